package ref

// Casts to and from strings, with ONNX's rules: numbers print in the shortest form that
// reads back to the same value of their type ("INF", "-INF", "NaN" for the special
// values); strings read as decimal or scientific numbers or, in any case, "INF", "+INF",
// "-INF", "INFINITY", "NaN". Text that is not a number, and NaN, an infinity or a value
// out of range for an integer target, is refused (ErrBadInput): ONNX leaves it
// undefined.

import (
	"math"
	"strconv"
	"strings"

	"github.com/kilnrt/kiln/tensor"
)

// castTensor is x cast to to; only a cast from strings can fail.
func castTensor(x *tensor.Tensor, to tensor.DType) (*tensor.Tensor, error) {
	if x.DType != tensor.String || to == tensor.String {
		return x.Cast(to), nil
	}
	strs := x.Data.([]string)
	if to.IsFloat() {
		v := make([]float64, len(strs))
		for i, s := range strs {
			f, ok := readNumber(s)
			if !ok {
				return nil, Badf("string %d is not a number", i)
			}
			v[i] = f
		}
		return tensor.FromFloat64s(to, x.Shape, v), nil
	}
	v := make([]int64, len(strs))
	for i, s := range strs {
		t := strings.TrimSpace(s)
		if n, err := strconv.ParseInt(t, 10, 64); err == nil {
			v[i] = n
			continue
		}
		if n, err := strconv.ParseUint(t, 10, 64); err == nil && to == tensor.Uint64 {
			v[i] = int64(n)
			continue
		}
		f, ok := readNumber(t)
		if !ok || math.IsNaN(f) || math.IsInf(f, 0) || f >= 0x1p63 || f < -0x1p63 {
			return nil, Badf("string %d is not a number of %v", i, to)
		}
		if to == tensor.Bool && f != 0 {
			f = 1
		}
		v[i] = int64(f)
	}
	return tensor.FromInt64s(to, x.Shape, v), nil
}

// readNumber parses one number or special value.
func readNumber(s string) (float64, bool) {
	t := strings.TrimSpace(s)
	switch strings.ToLower(t) {
	case "inf", "+inf", "infinity", "+infinity":
		return math.Inf(1), true
	case "-inf", "-infinity":
		return math.Inf(-1), true
	case "nan", "+nan", "-nan":
		return math.NaN(), true
	}
	for _, r := range t {
		if !strings.ContainsRune("0123456789+-.eE", r) {
			return 0, false
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil && !math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}
