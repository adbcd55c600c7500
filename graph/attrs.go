package graph

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/kilnrt/kiln/tensor"
)

// Attribute structs are plain Go structs whose fields carry the ONNX attribute name in an
// `attr:"name"` tag, an optional `default:"..."` (scalars only), `required:"true"` and,
// on int64 and []int64 fields, `min:"N"`: the least value the op accepts (every element
// of a list), checked by CheckAttrs before inference, so that an attribute used as a
// divisor or an extent (strides, dilations, kernel_shape, group, pads, blocksize, ...)
// is never zero or negative where the op needs it positive. Such a field is an extent,
// so it is also at most MaxAttrExtent: products like dilation·(kernel-1) then fit an
// int64.
// Allowed field types: int64, float32, string, []int64, []float32, []string,
// *tensor.Tensor, *Func (a subgraph) and *Type (a TypeProto attribute). A nil slice means "attribute absent".

// AttrField describes one attribute field of an op's attribute struct.
type AttrField struct {
	Name     string // ONNX attribute name
	Index    int    // struct field index
	Type     reflect.Type
	Default  string
	Required bool
	Min      int64 // the least value (int64 fields and elements of []int64); HasMin tells whether there is one
	HasMin   bool
}

var (
	typeInt64s  = reflect.TypeFor[[]int64]()
	typeFloats  = reflect.TypeFor[[]float32]()
	typeStrings = reflect.TypeFor[[]string]()
	typeTensor  = reflect.TypeFor[*tensor.Tensor]()
	typeFunc    = reflect.TypeFor[*Func]()
	typeType    = reflect.TypeFor[*Type]()
)

// attrFields caches AttrFields per type: every pass asks each node for its subgraphs,
// and parsing struct tags each time cost more than the pass's own work.
var attrFields sync.Map // reflect.Type → []AttrField

// AttrFields lists the attribute fields of an attribute struct type. The slice is
// shared: callers must not modify it.
func AttrFields(t reflect.Type) []AttrField {
	if fs, ok := attrFields.Load(t); ok {
		return fs.([]AttrField)
	}
	fs := attrFieldsOf(t)
	attrFields.Store(t, fs)
	return fs
}

func attrFieldsOf(t reflect.Type) []AttrField {
	var out []AttrField
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, ok := f.Tag.Lookup("attr")
		if !ok {
			continue
		}
		switch f.Type.Kind() {
		case reflect.Int64, reflect.Float32, reflect.String:
		default:
			switch f.Type {
			case typeInt64s, typeFloats, typeStrings, typeTensor, typeFunc, typeType:
			default:
				panic(fmt.Sprintf("BUG: attribute field %s.%s has unsupported type %v", t.Name(), f.Name, f.Type))
			}
		}
		af := AttrField{
			Name: name, Index: i, Type: f.Type,
			Default: f.Tag.Get("default"), Required: f.Tag.Get("required") == "true",
		}
		if m, ok := f.Tag.Lookup("min"); ok {
			v, err := strconv.ParseInt(m, 10, 64)
			if err != nil || (f.Type.Kind() != reflect.Int64 && f.Type != typeInt64s) {
				panic(fmt.Sprintf("BUG: attribute field %s.%s has a bad min tag %q", t.Name(), f.Name, m))
			}
			af.Min, af.HasMin = v, true
		}
		out = append(out, af)
	}
	return out
}

func applyDefaults(v reflect.Value) error {
	for _, f := range AttrFields(v.Type()) {
		if f.Default == "" {
			continue
		}
		if err := setScalar(v.Field(f.Index), f.Default); err != nil {
			return fmt.Errorf("%s: %w", f.Name, err)
		}
	}
	return nil
}

func setScalar(fv reflect.Value, s string) error {
	switch fv.Kind() {
	case reflect.Int64:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return err
		}
		fv.SetInt(n)
	case reflect.Float32:
		x, err := strconv.ParseFloat(s, 32)
		if err != nil {
			return err
		}
		fv.SetFloat(x)
	case reflect.String:
		fv.SetString(s)
	default:
		return fmt.Errorf("no scalar default for %v", fv.Type())
	}
	return nil
}

// MaxAttrExtent bounds the attributes with a min tag (extents, strides, pads, ...).
const MaxAttrExtent = 1<<31 - 1

// CheckAttrs checks n's attributes against their fields' min tags and MaxAttrExtent; a
// value out of range is an ErrInfer error naming the node, the attribute and the value.
func CheckAttrs(n *Node) error {
	if n.Attrs == nil {
		return nil
	}
	v := reflect.ValueOf(n.Attrs)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return nil
	}
	v = v.Elem()
	for _, f := range AttrFields(v.Type()) {
		if !f.HasMin {
			continue
		}
		fv := v.Field(f.Index)
		if fv.Kind() == reflect.Int64 {
			if x := fv.Int(); x < f.Min || x > MaxAttrExtent {
				return Inferf(n, "attribute %s is %d; it must be in [%d, %d]", f.Name, x, f.Min, MaxAttrExtent)
			}
			continue
		}
		for i := 0; i < fv.Len(); i++ {
			if x := fv.Index(i).Int(); x < f.Min || x > MaxAttrExtent {
				return Inferf(n, "attribute %s is %v; every entry must be in [%d, %d]", f.Name, fv.Interface(), f.Min, MaxAttrExtent)
			}
		}
	}
	return nil
}

// Subgraphs returns the Funcs held in n's attributes, in field order.
func (n *Node) Subgraphs() []*Func {
	if n.Attrs == nil {
		return nil
	}
	v := reflect.ValueOf(n.Attrs)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return nil
	}
	v = v.Elem()
	var out []*Func
	for _, f := range AttrFields(v.Type()) {
		if f.Type == typeFunc && !v.Field(f.Index).IsNil() {
			out = append(out, v.Field(f.Index).Interface().(*Func))
		}
	}
	return out
}

// formatAttrs prints the non-default, present attributes as `{name=value, ...}`; subgraph
// fields are printed by the caller and skipped here.
func formatAttrs(a any) string {
	if a == nil {
		return ""
	}
	v := reflect.ValueOf(a).Elem()
	var parts []string
	for _, f := range AttrFields(v.Type()) {
		fv := v.Field(f.Index)
		var s string
		switch {
		case f.Type == typeFunc:
			continue
		case f.Type == typeType:
			if fv.IsNil() {
				continue
			}
			s = fv.Interface().(*Type).String()
		case f.Type == typeTensor:
			if fv.IsNil() {
				continue
			}
			s = formatTensorLiteral(fv.Interface().(*tensor.Tensor))
		case fv.Kind() == reflect.Slice:
			if fv.IsNil() {
				continue
			}
			items := make([]string, fv.Len())
			for i := range items {
				items[i] = formatScalar(fv.Index(i))
			}
			s = "[" + strings.Join(items, ",") + "]"
		default:
			s = formatScalar(fv)
			if s == formatDefault(f) {
				continue
			}
		}
		parts = append(parts, f.Name+"="+s)
	}
	if len(parts) == 0 {
		return ""
	}
	return " {" + strings.Join(parts, ", ") + "}"
}

func formatDefault(f AttrField) string {
	switch f.Type.Kind() {
	case reflect.String:
		return strconv.Quote(f.Default)
	case reflect.Float32:
		if f.Default == "" {
			return "0"
		}
		x, _ := strconv.ParseFloat(f.Default, 32)
		return strconv.FormatFloat(x, 'g', -1, 32)
	default:
		if f.Default == "" {
			return "0"
		}
		return f.Default
	}
}

func formatScalar(v reflect.Value) string {
	switch v.Kind() {
	case reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Float32:
		return strconv.FormatFloat(v.Float(), 'g', -1, 32)
	case reflect.String:
		return strconv.Quote(v.String())
	}
	return fmt.Sprint(v.Interface())
}
