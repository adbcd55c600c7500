package vm

import (
	"fmt"
	"math"

	"github.com/kilnrt/kiln/tensor"
)

// Host shape functions of the ops whose operand also moves the indexing (Slice, Pad,
// Split, OneHot, reductions); see builtins_hostshape.go.

// SliceExtent is the length of the ONNX slice [start, end) by step of an axis of
// extent dim, the bounds clamped as ONNX does; step is not 0.
func SliceExtent(start, end, step, dim int64) int64 {
	s, e := ClampSlice(start, end, step, dim)
	if step > 0 && e > s {
		return (e-s-1)/step + 1
	}
	if step < 0 && s > e {
		return (s-e-1)/-max(step, -math.MaxInt64) + 1
	}
	return 0
}

// ClampSlice applies ONNX Slice clamping to start and end for an axis of extent dim:
// negative values count from the end, then both are clamped to [0, dim] for a positive
// step and to [-1, dim-1] for a negative one.
func ClampSlice(start, end, step, dim int64) (int64, int64) {
	if start < 0 {
		start = max(start, math.MinInt64+dim) + dim
	}
	if end < 0 {
		end = max(end, math.MinInt64+dim) + dim
	}
	if step > 0 {
		return max(0, min(start, dim)), max(0, min(end, dim))
	}
	return max(-1, min(start, dim-1)), max(-1, min(end, dim-1))
}

func shapeSlice(args []*tensor.Tensor) (*tensor.Tensor, error) {
	const name = BuiltinShapeSlice
	in, err := shapeArgs(name, args, 3, 5)
	if err != nil {
		return nil, err
	}
	var vals [4][]int64 // starts, ends, axes, steps
	for i := 1; i < len(args); i++ {
		if vals[i-1], err = intsArg(name, args, i); err != nil {
			return nil, err
		}
	}
	starts, ends, axes, steps := vals[0], vals[1], vals[2], vals[3]
	if axes == nil {
		for i := range starts {
			axes = append(axes, int64(i))
		}
	}
	if steps == nil {
		for range starts {
			steps = append(steps, 1)
		}
	}
	if len(ends) != len(starts) || len(axes) != len(starts) || len(steps) != len(starts) {
		return nil, fmt.Errorf("%w: %s: %d starts, %d ends, %d axes and %d steps", ErrInput, name, len(starts), len(ends), len(axes), len(steps))
	}
	if _, err := axesArg(name, axes, len(in)); err != nil {
		return nil, err
	}
	out := append([]int64{}, in...)
	for i, a := range axes {
		ax, _ := axisArg(name, a, len(in))
		if steps[i] == 0 {
			return nil, fmt.Errorf("%w: %s: step 0", ErrInput, name)
		}
		out[ax] = SliceExtent(starts[i], ends[i], steps[i], in[ax])
	}
	return shapeResult(name, out)
}

func shapePad(args []*tensor.Tensor) (*tensor.Tensor, error) {
	const name = BuiltinShapePad
	in, err := shapeArgs(name, args, 2, 3)
	if err != nil {
		return nil, err
	}
	pads, err := intsArg(name, args, 1)
	if err != nil {
		return nil, err
	}
	var axes []int64
	if len(args) == 3 {
		if axes, err = intsArg(name, args, 2); err != nil {
			return nil, err
		}
	} else {
		for i := range in {
			axes = append(axes, int64(i))
		}
	}
	if len(pads) != 2*len(axes) {
		return nil, fmt.Errorf("%w: %s: %d pads for %d axes", ErrInput, name, len(pads), len(axes))
	}
	if _, err := axesArg(name, axes, len(in)); err != nil {
		return nil, err
	}
	out := append([]int64{}, in...)
	for i, a := range axes {
		ax, _ := axisArg(name, a, len(in))
		b, e := pads[i], pads[i+len(axes)]
		if b < -maxExtent || b > maxExtent || e < -maxExtent || e > maxExtent {
			return nil, fmt.Errorf("%w: %s: pads %d and %d", ErrInput, name, b, e)
		}
		if out[ax] = in[ax] + b + e; out[ax] < 0 {
			return nil, fmt.Errorf("%w: %s: pads %d and %d crop more than the %d of axis %d", ErrInput, name, b, e, in[ax], ax)
		}
	}
	return shapeResult(name, out)
}

func shapeSplit(args []*tensor.Tensor) (*tensor.Tensor, error) {
	const name = BuiltinShapeSplit
	in, err := shapeArgs(name, args, 4, 4)
	if err != nil {
		return nil, err
	}
	a, err := int64Scalar(name, args, 1)
	if err != nil {
		return nil, err
	}
	ax, err := axisArg(name, a, len(in))
	if err != nil {
		return nil, err
	}
	sizes, err := intsArg(name, args, 2)
	if err != nil {
		return nil, err
	}
	parts, err := int64Scalar(name, args, 3)
	if err != nil {
		return nil, err
	}
	if int64(len(sizes)) != parts {
		return nil, fmt.Errorf("%w: %s: %d sizes for %d outputs", ErrInput, name, len(sizes), parts)
	}
	sum := int64(0)
	for _, s := range sizes {
		if s < 0 || s > maxExtent {
			return nil, fmt.Errorf("%w: %s: size %d in %v", ErrInput, name, s, sizes)
		}
		sum += s
	}
	if sum != in[ax] {
		return nil, fmt.Errorf("%w: %s: sizes %v add up to %d, not the %d of axis %d", ErrInput, name, sizes, sum, in[ax], ax)
	}
	return shapeResult(name, sizes)
}

func shapeOneHot(args []*tensor.Tensor) (*tensor.Tensor, error) {
	const name = BuiltinShapeOneHot
	if len(args) != 1 {
		return nil, fmt.Errorf("%s takes 1 argument, got %d", name, len(args))
	}
	d, err := scalarArg(name, args, 0)
	if err != nil {
		return nil, err
	}
	if !(d >= 1 && d <= float64(maxExtent)) {
		return nil, fmt.Errorf("%w: %s: depth %g", ErrInput, name, d)
	}
	return shapeResult(name, []int64{int64(d)})
}

func shapeReduce(args []*tensor.Tensor) (*tensor.Tensor, error) {
	const name = BuiltinShapeReduce
	in, err := shapeArgs(name, args, 4, 4)
	if err != nil {
		return nil, err
	}
	axes, err := intsArg(name, args, 1)
	if err != nil {
		return nil, err
	}
	keep, err := int64Scalar(name, args, 2)
	if err != nil {
		return nil, err
	}
	noop, err := int64Scalar(name, args, 3)
	if err != nil {
		return nil, err
	}
	if len(axes) == 0 && noop != 0 {
		return shapeResult(name, in)
	}
	red, err := axesArg(name, axes, len(in))
	if err != nil {
		return nil, err
	}
	out := []int64{}
	for i, d := range in {
		switch {
		case !red[i] && len(axes) > 0:
			out = append(out, d)
		case keep != 0:
			out = append(out, 1)
		}
	}
	return shapeResult(name, out)
}
