package vm

import (
	"fmt"
	"math"

	"github.com/kilnrt/kiln/tensor"
)

// Resize policies for BuiltinShapeResize's policy argument (keep_aspect_ratio_policy).
const (
	ResizeStretch    = 0
	ResizeNotLarger  = 1
	ResizeNotSmaller = 2
)

// shapeResize is Resize's output shape from run-time scales or sizes (see
// BuiltinShapeResize): scales give floor(in·scale), each scale finite and above 0;
// sizes give themselves, or under not_larger (not_smaller) the smallest (largest) of
// size/in over the axes as one scale and round-half-up(in·scale) for each axis. A
// resized axis of extent 0 cannot grow.
func shapeResize(args []*tensor.Tensor) (*tensor.Tensor, error) {
	const name = BuiltinShapeResize
	in, err := shapeArgs(name, args, 5, 5)
	if err != nil {
		return nil, err
	}
	rawAxes, err := intsArg(name, args, 1)
	if err != nil {
		return nil, err
	}
	policy, err := int64Scalar(name, args, 2)
	if err != nil {
		return nil, err
	}
	kind, err := int64Scalar(name, args, 3)
	if err != nil {
		return nil, err
	}
	v := args[4]
	if v == nil || len(v.Shape) > 1 || !v.DType.IsNumeric() {
		return nil, fmt.Errorf("%s: argument 4 is not a 1-D numeric tensor", name)
	}
	axes := make([]int, len(rawAxes))
	seen := map[int]bool{}
	for k, a := range rawAxes {
		if axes[k], err = axisArg(name, a, len(in)); err != nil {
			return nil, err
		}
		if seen[axes[k]] {
			return nil, fmt.Errorf("%w: %s: axes %v repeat axis %d", ErrInput, name, rawAxes, axes[k])
		}
		seen[axes[k]] = true
	}
	if v.Len() != len(axes) {
		return nil, fmt.Errorf("%w: %s: %d scales or sizes for %d axes", ErrInput, name, v.Len(), len(axes))
	}
	out := append([]int64{}, in...)
	if kind == 0 { // scales
		for k, s := range v.Float64s() {
			e := float64(in[axes[k]]) * s
			if !(s > 0) || math.IsInf(s, 0) || e > float64(maxExtent) {
				return nil, fmt.Errorf("%w: %s: scale %g of axis %d (extent %d)", ErrInput, name, s, axes[k], in[axes[k]])
			}
			out[axes[k]] = int64(math.Floor(e))
		}
	} else {
		if !v.DType.IsInt() {
			return nil, fmt.Errorf("%s: sizes of type %v", name, v.DType)
		}
		sizes := v.Int64s()
		var common float64
		for k, s := range sizes {
			if s < 0 || s > maxExtent {
				return nil, fmt.Errorf("%w: %s: size %d of axis %d", ErrInput, name, s, axes[k])
			}
			out[axes[k]] = s
			sc := float64(s) / float64(max(in[axes[k]], 1))
			if k == 0 || (policy == ResizeNotLarger) == (sc < common) {
				common = sc
			}
		}
		if policy == ResizeNotLarger || policy == ResizeNotSmaller {
			for _, ax := range axes {
				out[ax] = int64(common*float64(in[ax]) + 0.5)
			}
		}
	}
	for _, ax := range axes {
		if in[ax] == 0 && out[ax] > 0 {
			return nil, fmt.Errorf("%w: %s: axis %d of extent 0 resized to %d", ErrInput, name, ax, out[ax])
		}
	}
	return shapeResult(name, out)
}
