package vm

import (
	"fmt"
	"math"
	"reflect"

	"github.com/kilnrt/kiln/tensor"
)

// Host ops whose output extents are counts of the data: NonZero and Compress. Each
// counts first, then allocates the output (through the HostCtx, within the call's
// limits) and fills it.

// Names of the standard host ops (the ONNX op names).
const (
	HostNonZero   = "NonZero"
	HostCompress  = "Compress"
	HostUnique    = "Unique"
	HostNMS       = "NonMaxSuppression"
	HostTopK      = "TopK"
	HostMaxUnpool = "MaxUnpool"
)

// absentAxis is the attribute value of an axis the model left out (graph.AbsentInt).
const absentAxis = math.MinInt64

// hostInput is in[i], or an error when the op's required input i is absent.
func hostInput(in []*tensor.Tensor, i int) (*tensor.Tensor, error) {
	if i >= len(in) || in[i] == nil {
		return nil, fmt.Errorf("BUG: input %d is absent", i)
	}
	return in[i], nil
}

// nonzero reports, per element of t, whether it is not zero (a non-empty string).
func nonzero(t *tensor.Tensor) []bool {
	out := make([]bool, t.Len())
	switch d := t.Data.(type) {
	case []bool:
		copy(out, d)
	case []string:
		for i, s := range d {
			out[i] = s != ""
		}
	default:
		if t.DType.IsInt() {
			for i, v := range t.Int64s() {
				out[i] = v != 0
			}
			break
		}
		for i, v := range t.Float64s() {
			out[i] = v != 0
		}
	}
	return out
}

// take allocates a tensor of x's element type and shape whose element i is x's element
// src[i].
func take(h *HostCtx, x *tensor.Tensor, shape []int64, src []int) (*tensor.Tensor, error) {
	out, err := h.Alloc(x.DType, shape...)
	if err != nil {
		return nil, err
	}
	if len(src) != out.Len() {
		return nil, fmt.Errorf("BUG: take of %d elements into %v", len(src), shape)
	}
	from, ok1 := x.NativeBytes()
	to, ok2 := out.NativeBytes()
	if ok1 && ok2 {
		es := x.DType.Size()
		for i, s := range src {
			copy(to[i*es:(i+1)*es], from[s*es:(s+1)*es])
		}
		return out, nil
	}
	xv, ov := reflect.ValueOf(x.Data), reflect.ValueOf(out.Data)
	for i, s := range src {
		ov.Index(i).Set(xv.Index(s))
	}
	return out, nil
}

func hostNonZero(h *HostCtx, _ HostAttrs, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, err := hostInput(in, 0)
	if err != nil {
		return nil, err
	}
	if err := h.Reserve(int64(x.Len())); err != nil {
		return nil, err
	}
	nz := nonzero(x)
	count := 0
	for _, b := range nz {
		if b {
			count++
		}
	}
	r := len(x.Shape)
	if r == 0 { // a scalar: no coordinates
		out, err := h.Alloc(tensor.Int64, 0, int64(count))
		return []*tensor.Tensor{out}, err
	}
	out, err := h.Alloc(tensor.Int64, int64(r), int64(count))
	if err != nil {
		return nil, err
	}
	o := out.Data.([]int64)
	k := 0
	for i, b := range nz { // coordinates of the nonzero elements only, from the flat index
		if !b {
			continue
		}
		for d, rest := r-1, i; d >= 0; d-- {
			o[d*count+k] = int64(rest % x.Shape[d])
			rest /= x.Shape[d]
		}
		k++
	}
	return []*tensor.Tensor{out}, nil
}

func hostCompress(h *HostCtx, a HostAttrs, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, err := hostInput(in, 0)
	if err != nil {
		return nil, err
	}
	cond, err := hostInput(in, 1)
	if err != nil {
		return nil, err
	}
	if len(cond.Shape) != 1 {
		return nil, fmt.Errorf("%w: condition has shape %v, want one dimension", ErrInput, cond.Shape)
	}
	if err := h.Reserve(int64(cond.Len()) * 9); err != nil {
		return nil, err
	}
	keepOf := func(extent int) []int {
		var keep []int
		for i, b := range nonzero(cond) {
			if i >= extent {
				break
			}
			if b {
				keep = append(keep, i)
			}
		}
		return keep
	}
	axis := a.Int("axis", absentAxis)
	if axis == absentAxis {
		keep := keepOf(x.Len())
		out, err := take(h, x, []int64{int64(len(keep))}, keep)
		return []*tensor.Tensor{out}, err
	}
	ax, err := tensor.NormAxis(axis, len(x.Shape))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInput, err)
	}
	keep := keepOf(x.Shape[ax])
	outer, d, inner := x.Shape[:ax].NumElements(), x.Shape[ax], x.Shape[ax+1:].NumElements()
	shape := int64Shape(x.Shape)
	shape[ax] = int64(len(keep))
	n, err := tensor.CheckedMul(int64(outer*inner), int64(len(keep)))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInput, err)
	}
	if err := h.Reserve(n * 8); err != nil {
		return nil, err
	}
	src := make([]int, 0, n)
	for o := 0; o < outer; o++ {
		for _, k := range keep {
			for i := 0; i < inner; i++ {
				src = append(src, (o*d+k)*inner+i)
			}
		}
	}
	out, err := take(h, x, shape, src)
	return []*tensor.Tensor{out}, err
}
