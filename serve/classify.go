package serve

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/kilnrt/kiln/tensor"
)

// Triton's classification extension: an output requested with the parameter
// classification: K is answered with its K highest-valued elements per batch entry
// (the whole tensor when the model does not batch), each "<value>:<index>[:<label>]"
// as Triton's server writes them (the value as C's %f prints it), BYTES of shape
// [batch, K] or [K]. Integer, FP32 and FP64 outputs only, as in Triton.

// classifications reads the classification parameter of each requested output.
func classifications(req *InferRequest) (map[string]int, error) {
	var out map[string]int
	for _, o := range req.Outputs {
		v, ok := o.Params[classificationParam]
		if !ok {
			continue
		}
		var k int64
		switch n := v.(type) {
		case int64:
			k = n
		case uint64:
			k = int64(min(n, math.MaxInt32))
		case float64: // a JSON number
			if n != math.Trunc(n) {
				k = -1
			} else {
				k = int64(max(min(n, math.MaxInt32), -1))
			}
		default:
			return nil, fmt.Errorf("%w: output %q: parameter %q is %T, not an integer", ErrInvalid, o.Name, classificationParam, v)
		}
		if k < 1 {
			return nil, fmt.Errorf("%w: output %q: parameter %q must be a positive integer (the number of classes), not %v", ErrInvalid, o.Name, classificationParam, v)
		}
		if out == nil {
			out = map[string]int{}
		}
		out[o.Name] = int(min(k, math.MaxInt32))
	}
	return out, nil
}

// classify1 replaces an output by its top k classes per batch entry (the whole tensor
// when the model does not batch), in Triton's format: "<value>:<index>[:<label>]",
// integer values in decimal and floating-point ones as C's "%f" prints them (6
// decimals), highest value first (equal values by index).
func classify1(o Tensor, k int, batch bool, labels []string) (Tensor, error) {
	values, err := classValues(o.Data)
	if err != nil {
		return Tensor{}, fmt.Errorf("%w: output %q: %v", ErrInvalid, o.Name, err)
	}
	rows := 1
	if batch && len(o.Shape) > 0 {
		rows = int(o.Shape[0])
	}
	per := 0
	if rows > 0 {
		per = len(values) / rows
	}
	k = min(k, per)
	out := make([]string, 0, rows*k)
	idx := make([]int, per)
	for r := range rows {
		row := values[r*per : (r+1)*per]
		for i := range idx {
			idx[i] = i
		}
		slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(row[b].f, row[a].f) })
		for _, i := range idx[:k] {
			s := row[i].s + ":" + strconv.Itoa(i)
			if i < len(labels) {
				s += ":" + labels[i]
			}
			out = append(out, s)
		}
	}
	shape := []int64{int64(k)}
	if batch {
		shape = []int64{int64(rows), int64(k)}
	}
	t, err := tensor.FromSlice(intShape(shape), out)
	if err != nil {
		return Tensor{}, fmt.Errorf("%w: output %q: %v", ErrInternal, o.Name, err)
	}
	return Tensor{Name: o.Name, Datatype: "BYTES", Shape: shape, Data: t}, nil
}

// classifiable reports whether classification takes outputs of the type (Triton's:
// integers, FP32, FP64).
func classifiable(dt tensor.DType) bool {
	if !dt.Valid() {
		return false
	}
	_, err := classValues(tensor.New(dt, tensor.Shape{0}))
	return err == nil
}

// classValue is an element as classification compares (f) and prints (s) it.
type classValue struct {
	f float64
	s string
}

// classValues reads the elements of a numeric output, as Triton's classification
// accepts them (integers, FP32, FP64).
func classValues(t *tensor.Tensor) ([]classValue, error) {
	fl := func(f float64) classValue { return classValue{f, formatFixed(f)} }
	in := func(i int64) classValue { return classValue{float64(i), strconv.FormatInt(i, 10)} }
	switch d := t.Data.(type) {
	case []float32:
		return mapValues(d, func(v float32) classValue { return fl(float64(v)) }), nil
	case []float64:
		return mapValues(d, fl), nil
	case []int8:
		return mapValues(d, func(v int8) classValue { return in(int64(v)) }), nil
	case []int16:
		return mapValues(d, func(v int16) classValue { return in(int64(v)) }), nil
	case []int32:
		return mapValues(d, func(v int32) classValue { return in(int64(v)) }), nil
	case []int64:
		return mapValues(d, in), nil
	case []uint8:
		return mapValues(d, func(v uint8) classValue { return in(int64(v)) }), nil
	case []uint16:
		return mapValues(d, func(v uint16) classValue { return in(int64(v)) }), nil
	case []uint32:
		return mapValues(d, func(v uint32) classValue { return in(int64(v)) }), nil
	case []uint64:
		return mapValues(d, func(v uint64) classValue {
			return classValue{float64(v), strconv.FormatUint(v, 10)}
		}), nil
	}
	return nil, fmt.Errorf("classification needs an integer, FP32 or FP64 output, not %s", Datatype(t.DType))
}

func mapValues[T any](d []T, f func(T) classValue) []classValue {
	out := make([]classValue, len(d))
	for i, v := range d {
		out[i] = f(v)
	}
	return out
}

// formatFixed prints a value as C's printf("%f") does, which Triton's classification
// uses (std::to_string): 6 decimals, "nan", "inf", "-inf".
func formatFixed(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return strconv.FormatFloat(f, 'f', 6, 64)
}
