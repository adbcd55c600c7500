package httpapi

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/kilnrt/kiln/serve"
	"github.com/kilnrt/kiln/tensor"
)

// decodeJSONData reads an input's "data": a flat or nested JSON array of numbers, of
// true/false for BOOL, of strings for BYTES, with exactly as many elements as the shape.
func decodeJSONData(name, datatype string, shape []int64, raw json.RawMessage) (*tensor.Tensor, error) {
	dt, err := serve.DTypeOf(datatype)
	if err != nil {
		return nil, fmt.Errorf("input %q: %w", name, err)
	}
	count, err := serve.CheckShape(name, shape)
	if err != nil {
		return nil, err
	}
	n := int64(count)
	ts := make(tensor.Shape, len(shape))
	for i, d := range shape {
		ts[i] = int(d)
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: input %q: %s", serve.ErrInvalid, name, fmt.Sprintf(format, args...))
	}
	if dt == tensor.String {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, bad("data is not JSON: %v", err)
		}
		var out []string
		var walk func(any) error
		walk = func(v any) error {
			switch x := v.(type) {
			case string:
				out = append(out, x)
			case []any:
				for _, e := range x {
					if err := walk(e); err != nil {
						return err
					}
				}
			default:
				return bad("BYTES data holds %T, want strings", v)
			}
			return nil
		}
		if err := walk(v); err != nil {
			return nil, err
		}
		if int64(len(out)) != n {
			return nil, bad("%d elements for shape %v (%d)", len(out), shape, n)
		}
		return tensor.FromSlice(ts, out)
	}
	toks, err := scanArray(raw, n)
	if err != nil {
		return nil, bad("%v", err)
	}
	if int64(len(toks)) != n {
		return nil, bad("%d elements for shape %v (%d)", len(toks), shape, n)
	}
	switch {
	case dt == tensor.Bool:
		out := make([]bool, len(toks))
		for i, t := range toks {
			switch t {
			case "true":
				out[i] = true
			case "false":
			default:
				return nil, bad("element %d is %s, want true or false", i, t)
			}
		}
		return tensor.FromSlice(ts, out)
	case dt.IsFloat():
		vals := make([]float64, len(toks))
		for i, t := range toks {
			v, err := strconv.ParseFloat(t, 64)
			if err != nil {
				return nil, bad("element %d: %s is not a number", i, t)
			}
			vals[i] = v
		}
		return tensor.FromFloat64s(dt, ts, vals), nil
	case dt == tensor.Uint64:
		out := make([]uint64, len(toks))
		for i, t := range toks {
			v, err := strconv.ParseUint(t, 10, 64)
			if err != nil {
				return nil, bad("element %d: %s is not a UINT64", i, t)
			}
			out[i] = v
		}
		return tensor.FromSlice(ts, out)
	default:
		lo, hi := intRange(dt)
		vals := make([]int64, len(toks))
		for i, t := range toks {
			v, err := strconv.ParseInt(t, 10, 64)
			if err != nil || v < lo || v > hi {
				return nil, bad("element %d: %s is not a %s", i, t, datatype)
			}
			vals[i] = v
		}
		return tensor.FromInt64s(dt, ts, vals), nil
	}
}

func intRange(dt tensor.DType) (int64, int64) {
	bits := dt.Size() * 8
	if dt.IsUnsigned() {
		return 0, int64(1)<<bits - 1
	}
	return -(int64(1) << (bits - 1)), int64(1)<<(bits-1) - 1
}

// scanArray returns the scalar tokens of a (nested) JSON array in order, refusing
// anything but arrays, numbers, true and false, and more than max elements.
func scanArray(b []byte, max int64) ([]string, error) {
	var toks []string
	depth := 0
	expectValue := true // after '[' or ','
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case c == ' ' || c == '\n' || c == '\t' || c == '\r':
			i++
		case c == '[':
			if !expectValue {
				return nil, fmt.Errorf("unexpected '[' at byte %d", i)
			}
			depth++
			i++
		case c == ']':
			if depth == 0 {
				return nil, fmt.Errorf("unbalanced ']' at byte %d", i)
			}
			depth--
			expectValue = false
			i++
		case c == ',':
			if expectValue || depth == 0 {
				return nil, fmt.Errorf("unexpected ',' at byte %d", i)
			}
			expectValue = true
			i++
		default:
			if !expectValue || depth == 0 {
				return nil, fmt.Errorf("unexpected %q at byte %d (data must be an array)", c, i)
			}
			j := i
			for j < len(b) && (b[j] == '-' || b[j] == '+' || b[j] == '.' || b[j] >= '0' && b[j] <= '9' || b[j] >= 'a' && b[j] <= 'z' || b[j] >= 'A' && b[j] <= 'Z') {
				j++
			}
			if j == i {
				return nil, fmt.Errorf("unexpected %q at byte %d", c, i)
			}
			if int64(len(toks)) >= max {
				return nil, fmt.Errorf("more elements than the shape holds (%d)", max)
			}
			toks = append(toks, string(b[i:j]))
			expectValue = false
			i = j
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("unterminated array")
	}
	return toks, nil
}

// encodeJSONData writes a tensor as a flat JSON array.
func encodeJSONData(t *tensor.Tensor) ([]byte, error) {
	out := []byte{'['}
	sep := func(i int) {
		if i > 0 {
			out = append(out, ',')
		}
	}
	switch d := t.Data.(type) {
	case []string:
		for i, s := range d {
			sep(i)
			b, _ := json.Marshal(s)
			out = append(out, b...)
		}
	case []bool:
		for i, v := range d {
			sep(i)
			out = strconv.AppendBool(out, v)
		}
	default:
		switch {
		case t.DType.IsFloat():
			bits := 64
			if t.DType != tensor.Float64 {
				bits = 32
			}
			for i, v := range t.Float64s() {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					return nil, fmt.Errorf("element %d is %v, which JSON cannot carry", i, v)
				}
				sep(i)
				out = strconv.AppendFloat(out, v, 'g', -1, bits)
			}
		case t.DType == tensor.Uint64:
			for i, v := range d.([]uint64) {
				sep(i)
				out = strconv.AppendUint(out, v, 10)
			}
		case t.DType.IsInt():
			for i, v := range t.Int64s() {
				sep(i)
				out = strconv.AppendInt(out, v, 10)
			}
		default:
			return nil, fmt.Errorf("%v has no JSON form", t.DType)
		}
	}
	return append(out, ']'), nil
}
