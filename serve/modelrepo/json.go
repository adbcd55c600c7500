package modelrepo

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/kilnrt/kiln/serve/modelrepo/modelpb"
)

// ModelConfigJSON renders a model configuration the way Triton's REST endpoint
// GET /v2/models/{model}/config returns it: protobuf's JSON mapping with the proto
// field names ("max_batch_size"), enums by name, every scalar, list and map field
// present even when empty, unset messages and oneof members left out, and 64-bit
// integers as JSON numbers rather than the strings protobuf's mapping uses (Triton
// rewrites them the same way). Fields appear in declaration order (Triton's), map keys
// sorted. The output is compact.
func ModelConfigJSON(c *modelpb.ModelConfig) ([]byte, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: no config to render", ErrModelConfig)
	}
	var b bytes.Buffer
	if err := writeMessage(&b, c.ProtoReflect()); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func writeMessage(b *bytes.Buffer, m protoreflect.Message) error {
	b.WriteByte('{')
	fields := m.Descriptor().Fields()
	first := true
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		// Messages and oneof members only when set; scalars, lists and maps always.
		if (fd.Message() != nil && !fd.IsList() && !fd.IsMap() || fd.ContainingOneof() != nil) && !m.Has(fd) {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		writeString(b, string(fd.Name()))
		b.WriteByte(':')
		var err error
		switch {
		case fd.IsList():
			err = writeList(b, fd, m.Get(fd).List())
		case fd.IsMap():
			err = writeMap(b, fd, m.Get(fd).Map())
		default:
			err = writeValue(b, fd, m.Get(fd))
		}
		if err != nil {
			return err
		}
	}
	b.WriteByte('}')
	return nil
}

func writeList(b *bytes.Buffer, fd protoreflect.FieldDescriptor, l protoreflect.List) error {
	b.WriteByte('[')
	for i := 0; i < l.Len(); i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		if err := writeValue(b, fd, l.Get(i)); err != nil {
			return err
		}
	}
	b.WriteByte(']')
	return nil
}

func writeMap(b *bytes.Buffer, fd protoreflect.FieldDescriptor, m protoreflect.Map) error {
	type entry struct {
		key string
		val protoreflect.Value
	}
	var entries []entry
	m.Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
		entries = append(entries, entry{k.String(), v})
		return true
	})
	slices.SortFunc(entries, func(x, y entry) int { return bytes.Compare([]byte(x.key), []byte(y.key)) })
	b.WriteByte('{')
	for i, e := range entries {
		if i > 0 {
			b.WriteByte(',')
		}
		writeString(b, e.key)
		b.WriteByte(':')
		if err := writeValue(b, fd.MapValue(), e.val); err != nil {
			return err
		}
	}
	b.WriteByte('}')
	return nil
}

// writeValue writes one singular value of the field's kind.
func writeValue(b *bytes.Buffer, fd protoreflect.FieldDescriptor, v protoreflect.Value) error {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return writeMessage(b, v.Message())
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			writeString(b, string(ev.Name()))
		} else {
			b.WriteString(strconv.FormatInt(int64(v.Enum()), 10))
		}
	case protoreflect.BoolKind:
		b.WriteString(strconv.FormatBool(v.Bool()))
	case protoreflect.StringKind:
		writeString(b, v.String())
	case protoreflect.BytesKind:
		writeString(b, base64.StdEncoding.EncodeToString(v.Bytes()))
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		b.WriteString(strconv.FormatInt(v.Int(), 10))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		b.WriteString(strconv.FormatUint(v.Uint(), 10))
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		bits := 64
		if fd.Kind() == protoreflect.FloatKind {
			bits = 32
		}
		switch f := v.Float(); {
		case math.IsNaN(f):
			writeString(b, "NaN")
		case math.IsInf(f, 1):
			writeString(b, "Infinity")
		case math.IsInf(f, -1):
			writeString(b, "-Infinity")
		default:
			b.WriteString(strconv.FormatFloat(f, 'g', -1, bits))
		}
	default:
		return fmt.Errorf("modelrepo: cannot render field %s of kind %s as JSON", fd.FullName(), fd.Kind())
	}
	return nil
}

// writeString writes a JSON string without escaping HTML characters.
func writeString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)           // a string always encodes
	b.Truncate(b.Len() - 1) // Encode's newline
}

// ParseModelConfigJSON parses a model configuration in protobuf's JSON mapping, as
// Triton's load API takes it (parameter "config"; what ModelConfigJSON renders parses
// back). A field kiln does not transcribe, known to Triton or not, is an error naming
// it, as are bad JSON and wrong value types; every error is a *SyntaxError (wrapping
// ErrModelConfig). The result is not validated: see ValidateModelConfig.
func ParseModelConfigJSON(data []byte) (*modelpb.ModelConfig, error) {
	if len(data) > MaxModelConfigBytes {
		return nil, &SyntaxError{Msg: fmt.Sprintf("%d bytes is more than the limit of %d", len(data), MaxModelConfigBytes)}
	}
	c := &modelpb.ModelConfig{}
	if err := protojson.Unmarshal(data, c); err != nil {
		e := syntaxError(data, err).(*SyntaxError)
		if strings.Contains(e.Msg, "unknown field") {
			e.Msg += " (not a field of Triton's ModelConfig, or one kiln does not implement)"
		}
		return nil, e
	}
	return c, nil
}
