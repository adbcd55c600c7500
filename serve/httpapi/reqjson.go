package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/valyala/fastjson"

	"github.com/kilnrt/kiln/serve"
)

// fastHeaderMax is the largest JSON header decoded with fastjson. A header this small
// (a binary-extension request's, or one with a few JSON elements) is parsed into a
// tree of values from a pooled parser, which is several times cheaper than
// encoding/json's reflection, most of all with cold caches after an inference. A
// larger one, where inputs come as JSON arrays, goes to encoding/json, which keeps
// "data" as the raw bytes it was sent as: fastjson's tree costs some 80 bytes for each
// element of an array, and a pooled parser keeps its largest tree.
const fastHeaderMax = 16 << 10

// headerParsers are the parsers of headers up to fastHeaderMax.
var headerParsers fastjson.ParserPool

// decodeHeader decodes an inference request's JSON header as encoding/json would into
// jsonRequest (keys matched without regard to case, null leaving a field as it is,
// unknown keys ignored), except that a repeated key replaces what came before it, and
// with the top-level "sequence_id" parameter, when a number, kept as its digits
// (json.Number: a uint64 correlation ID loses its low bits as a float64).
func decodeHeader(head []byte) (jsonRequest, error) {
	if len(head) > fastHeaderMax {
		return decodeLargeHeader(head)
	}
	var jr jsonRequest
	p := headerParsers.Get()
	defer headerParsers.Put(p)
	v, err := p.ParseBytes(head)
	if err == nil {
		// the parser accepts more than JSON (NaN, unknown escapes); the validator is
		// strict, and its recursion is bounded by the parser's depth limit, which
		// this header passed
		err = fastjson.ValidateBytes(head)
	}
	if err != nil {
		return jr, invalidJSON(err)
	}
	err = eachKey(v, func(key string, v *fastjson.Value) (err error) {
		switch {
		case strings.EqualFold(key, "id"):
			err = setString(&jr.ID, v)
		case strings.EqualFold(key, "parameters"):
			if jr.Parameters, err = paramsOf(v); err == nil {
				if _, ok := jr.Parameters[serve.ParamSequenceID].(float64); ok {
					jr.Parameters[serve.ParamSequenceID] = json.Number(lastMember(v, serve.ParamSequenceID).MarshalTo(nil))
				}
			}
		case strings.EqualFold(key, "inputs"):
			jr.Inputs, err = eachElement(v, jr.Inputs[:0], inputOf)
		case strings.EqualFold(key, "outputs"):
			jr.Outputs, err = eachElement(v, jr.Outputs[:0], outputOf)
		}
		return err
	})
	if err != nil {
		return jr, notARequest(err)
	}
	return jr, nil
}

// decodeLargeHeader is decodeHeader through encoding/json.
func decodeLargeHeader(head []byte) (jsonRequest, error) {
	var jr jsonRequest
	if err := json.NewDecoder(bytes.NewReader(head)).Decode(&jr); err != nil {
		return jr, invalidJSON(err)
	}
	if _, ok := jr.Parameters[serve.ParamSequenceID].(float64); ok {
		var exact struct {
			Parameters map[string]json.RawMessage `json:"parameters"`
		}
		if json.Unmarshal(head, &exact) == nil {
			jr.Parameters[serve.ParamSequenceID] = json.Number(exact.Parameters[serve.ParamSequenceID])
		}
	}
	return jr, nil
}

func invalidJSON(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return notARequest(fmt.Errorf("%s: %s, not %s", te.Field, te.Value, jsonKind(te.Type)))
	}
	return fmt.Errorf("%w: the request is not valid JSON: %v", serve.ErrInvalid, err)
}

// jsonKind names what JSON value decodes into t, for an error about the client's JSON
// (not Go's type names).
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "a " + t.Kind().String()
}

// notARequest is a JSON header that does not have an inference request's form.
func notARequest(err error) error {
	return fmt.Errorf("%w: the request's JSON is not an inference request: %v", serve.ErrInvalid, err)
}

// fieldError is an error at path in a JSON header: "inputs[0].shape".
type fieldError struct {
	path string
	err  error
}

func (e *fieldError) Error() string { return e.path + ": " + e.err.Error() }

// at is err at step (a key, or an index as "[i]") above where it happened.
func at(step string, err error) error {
	if fe, ok := err.(*fieldError); ok {
		if !strings.HasPrefix(fe.path, "[") {
			step += "."
		}
		return &fieldError{step + fe.path, fe.err}
	}
	return &fieldError{step, err}
}

func inputOf(v *fastjson.Value) (in jsonInput, err error) {
	err = eachKey(v, func(key string, v *fastjson.Value) (err error) {
		switch {
		case strings.EqualFold(key, "name"):
			err = setString(&in.Name, v)
		case strings.EqualFold(key, "datatype"):
			err = setString(&in.Datatype, v)
		case strings.EqualFold(key, "shape"):
			in.Shape, err = eachElement(v, in.Shape[:0], int64Of)
		case strings.EqualFold(key, "parameters"):
			in.Parameters, err = paramsOf(v)
		case strings.EqualFold(key, "data"):
			in.Data = v.MarshalTo(nil) // null too, as encoding/json keeps it
		}
		return err
	})
	return in, err
}

func outputOf(v *fastjson.Value) (o jsonOutputReq, err error) {
	err = eachKey(v, func(key string, v *fastjson.Value) (err error) {
		switch {
		case strings.EqualFold(key, "name"):
			err = setString(&o.Name, v)
		case strings.EqualFold(key, "parameters"):
			o.Parameters, err = paramsOf(v)
		}
		return err
	})
	return o, err
}

// eachKey calls f on each member of the object v, in order, until f fails; null is an
// object without members, anything else an error.
func eachKey(v *fastjson.Value, f func(key string, v *fastjson.Value) error) error {
	if v.Type() == fastjson.TypeNull {
		return nil
	}
	o, err := v.Object()
	if err != nil {
		return err
	}
	o.Visit(func(key []byte, v *fastjson.Value) {
		if err == nil {
			if err = f(string(key), v); err != nil {
				err = at(string(key), err)
			}
		}
	})
	return err
}

// eachElement appends elem of each element of the array v to s; null is nil, anything
// else an error.
func eachElement[T any](v *fastjson.Value, s []T, elem func(*fastjson.Value) (T, error)) ([]T, error) {
	if v.Type() == fastjson.TypeNull {
		return nil, nil
	}
	a, err := v.Array()
	if err != nil {
		return nil, err
	}
	for i, e := range a {
		x, err := elem(e)
		if err != nil {
			return nil, at("["+strconv.Itoa(i)+"]", err)
		}
		s = append(s, x)
	}
	if s == nil {
		s = []T{} // [] is an empty slice, not a missing one
	}
	return s, nil
}

// setString sets *dst to the string v (a copy: v's bytes are the request's); null
// leaves it.
func setString(dst *string, v *fastjson.Value) error {
	if v.Type() == fastjson.TypeNull {
		return nil
	}
	b, err := v.StringBytes()
	if err == nil {
		*dst = string(b)
	}
	return err
}

// lastMember is the value of the object v's last member named key (the one a map of
// its members holds).
func lastMember(v *fastjson.Value, key string) (last *fastjson.Value) {
	eachKey(v, func(k string, v *fastjson.Value) error {
		if k == key {
			last = v
		}
		return nil
	})
	return last
}

// int64Of is a shape's element; null is 0, as encoding/json leaves it.
func int64Of(v *fastjson.Value) (int64, error) {
	if v.Type() == fastjson.TypeNull {
		return 0, nil
	}
	if v.Type() != fastjson.TypeNumber {
		return 0, fmt.Errorf("%s, not an integer", v.Type())
	}
	s := v.MarshalTo(nil)
	n, err := strconv.ParseInt(string(s), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s is not a 64-bit integer", s)
	}
	return n, nil
}

// paramsOf is the parameters object v as encoding/json decodes an object into a
// map[string]any; null is nil.
func paramsOf(v *fastjson.Value) (map[string]any, error) {
	if v.Type() == fastjson.TypeNull {
		return nil, nil
	}
	x, err := anyOf(v)
	if err != nil {
		return nil, err
	}
	m, ok := x.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("parameters are %s, not an object", v.Type())
	}
	return m, nil
}

// anyOf is v as encoding/json decodes it into an interface value: float64, string,
// bool, nil, []any, map[string]any.
func anyOf(v *fastjson.Value) (any, error) {
	switch v.Type() {
	case fastjson.TypeNull:
		return nil, nil
	case fastjson.TypeTrue:
		return true, nil
	case fastjson.TypeFalse:
		return false, nil
	case fastjson.TypeNumber:
		s := v.MarshalTo(nil)
		f, err := strconv.ParseFloat(string(s), 64)
		if err != nil {
			return nil, fmt.Errorf("the number %s does not fit a float64", s)
		}
		return f, nil
	case fastjson.TypeString:
		b, _ := v.StringBytes()
		return string(b), nil
	case fastjson.TypeArray:
		a, _ := v.Array()
		out := make([]any, 0, len(a))
		for _, e := range a {
			x, err := anyOf(e)
			if err != nil {
				return nil, err
			}
			out = append(out, x)
		}
		return out, nil
	default: // an object
		m := map[string]any{}
		err := eachKey(v, func(key string, v *fastjson.Value) error {
			x, err := anyOf(v)
			m[key] = x
			return err
		})
		return m, err
	}
}
