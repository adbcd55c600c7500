package vm

import (
	"fmt"
	"math"

	"github.com/kilnrt/kiln/tensor"
)

// Host shape functions: the output extents of an op whose shape, sizes, axes, repeats,
// pads, starts/ends or depth operand is a value known only at run time. Each takes the
// input's shape (ShapeOf) and the operand's values as host tensors and returns the
// output's extents as a 1-D int64 tensor, from which the compiled code binds the
// output's symbolic dims (shape.dim). A value a request can get wrong (a negative
// extent, a reshape that changes the element count, an axis out of range, a rank or an
// extent past the limits) is an error wrapping ErrInput; the instruction's Str names the
// node.
const (
	// BuiltinShapeReshape(in, target, allowzero): ONNX Reshape's output shape (0 copies
	// the input's extent unless allowzero is 1, one -1 takes the rest).
	BuiltinShapeReshape = "shape.reshape"
	// BuiltinShapeSqueeze(in[, axes]): in without the axes (each of extent 1), or
	// without every extent 1 when axes is absent.
	BuiltinShapeSqueeze = "shape.squeeze"
	// BuiltinShapeUnsqueeze(in, axes): in with an extent 1 inserted at each output axis.
	BuiltinShapeUnsqueeze = "shape.unsqueeze"
	// BuiltinShapeBroadcast(a, b): the numpy broadcast of the shapes a and b (Expand).
	BuiltinShapeBroadcast = "shape.broadcast"
	// BuiltinShapeTile(in, repeats): in[i]·repeats[i].
	BuiltinShapeTile = "shape.tile"
	// BuiltinShapeValues(t): the 1-D integer tensor t checked as a shape
	// (ConstantOfShape): every extent at least 0.
	BuiltinShapeValues = "shape.values"
	// BuiltinShapeRange(start, limit, delta): Range's length max(0, ⌈(limit-start)/delta⌉)
	// as a one-element shape.
	BuiltinShapeRange = "shape.range"
	// BuiltinShapeSlice(in, starts, ends[, axes[, steps]]): Slice's output shape, the
	// starts and ends clamped as ONNX does.
	BuiltinShapeSlice = "shape.slice"
	// BuiltinShapePad(in, pads[, axes]): Pad's output shape, in[a] + begin + end per
	// padded axis (negative pads crop).
	BuiltinShapePad = "shape.pad"
	// BuiltinShapeSplit(in, axis, sizes, outputs): the sizes, checked to be one per
	// output, at least 0 and to add up to in[axis].
	BuiltinShapeSplit = "shape.split"
	// BuiltinShapeOneHot(depth): OneHot's depth (a numeric scalar, truncated) as a
	// one-element shape; it must be at least 1.
	BuiltinShapeOneHot = "shape.onehot"
	// BuiltinShapeReduce(in, axes, keepdims, noop): a reduction's output shape over the
	// axes (all of them when axes is empty, unless noop is 1: then in itself).
	BuiltinShapeReduce = "shape.reduce"
	// BuiltinShapeResize(in, axes, policy, kind, values): Resize's output shape from
	// scales (kind 0, float values) or sizes (kind 1) over the axes, under the
	// keep_aspect_ratio policy (ResizeStretch, ResizeNotLarger, ResizeNotSmaller).
	BuiltinShapeResize = "shape.resize"
)

// maxHostRank bounds the rank a host shape function accepts or makes.
const maxHostRank = 32

// hostShapeBuiltins are the host shape functions, for StdBuiltins.
func hostShapeBuiltins() map[string]Builtin {
	return map[string]Builtin{
		BuiltinShapeReshape:   shapeReshape,
		BuiltinShapeSqueeze:   shapeSqueeze,
		BuiltinShapeUnsqueeze: shapeUnsqueeze,
		BuiltinShapeBroadcast: shapeBroadcast,
		BuiltinShapeTile:      shapeTile,
		BuiltinShapeValues:    shapeValues,
		BuiltinShapeRange:     shapeRange,
		BuiltinShapeSlice:     shapeSlice,
		BuiltinShapePad:       shapePad,
		BuiltinShapeSplit:     shapeSplit,
		BuiltinShapeOneHot:    shapeOneHot,
		BuiltinShapeReduce:    shapeReduce,
		BuiltinShapeResize:    shapeResize,

		BuiltinShapeSTFT:            shapeSTFT,
		BuiltinShapeMelWeightMatrix: shapeMelWeightMatrix,
		BuiltinShapeDFT:             shapeDFT,
	}
}

// intsArg is args[i] as int64 values: an integer tensor of rank at most 1 and at most
// maxHostRank elements.
func intsArg(name string, args []*tensor.Tensor, i int) ([]int64, error) {
	if i >= len(args) || args[i] == nil || !args[i].DType.IsInt() || len(args[i].Shape) > 1 {
		return nil, fmt.Errorf("%s: argument %d is not a 1-D integer tensor", name, i)
	}
	if n := args[i].Len(); n > maxHostRank {
		return nil, fmt.Errorf("%w: %s: %d values, more than the %d a shape may have", ErrInput, name, n, maxHostRank)
	}
	return args[i].Int64s(), nil
}

// shapeArgs checks the argument count and returns args[0] as a shape (ShapeOf).
func shapeArgs(name string, args []*tensor.Tensor, lo, hi int) ([]int64, error) {
	if len(args) < lo || len(args) > hi {
		return nil, fmt.Errorf("%s takes %d to %d arguments, got %d", name, lo, hi, len(args))
	}
	return intsArg(name, args, 0)
}

// shapeResult checks a computed shape (rank, each extent in [0, 2^40], the element
// count in int64) and returns it as a 1-D int64 tensor.
func shapeResult(name string, out []int64) (*tensor.Tensor, error) {
	if len(out) > maxHostRank {
		return nil, fmt.Errorf("%w: %s: rank %d, more than %d", ErrInput, name, len(out), maxHostRank)
	}
	n := int64(1)
	for _, d := range out {
		if d < 0 || d > maxExtent {
			return nil, fmt.Errorf("%w: %s: extent %d in %v", ErrInput, name, d, out)
		}
		var ok bool
		if n, ok = tensor.SignedMul(n, d); !ok || n > math.MaxInt64/16 {
			return nil, fmt.Errorf("%w: %w: %s: shape %v has too many elements", ErrInput, tensor.ErrTooLarge, name, out)
		}
	}
	return tensor.MustFromSlice(tensor.Shape{len(out)}, append([]int64{}, out...)), nil
}

// axisArg normalizes axis into [0, rank) or is an ErrInput error.
func axisArg(name string, axis int64, rank int) (int, error) {
	a, err := tensor.NormAxis(axis, rank)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: %w", ErrInput, name, err)
	}
	return a, nil
}

// axesArg normalizes distinct axes into [0, rank) as a set.
func axesArg(name string, axes []int64, rank int) (map[int]bool, error) {
	set := map[int]bool{}
	for _, a := range axes {
		ax, err := axisArg(name, a, rank)
		if err != nil {
			return nil, err
		}
		if set[ax] {
			return nil, fmt.Errorf("%w: %s: axes %v repeat axis %d", ErrInput, name, axes, ax)
		}
		set[ax] = true
	}
	return set, nil
}

func elements(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= d // shapes of tensors that exist: no overflow
	}
	return n
}

func shapeReshape(args []*tensor.Tensor) (*tensor.Tensor, error) {
	const name = BuiltinShapeReshape
	in, err := shapeArgs(name, args, 3, 3)
	if err != nil {
		return nil, err
	}
	target, err := intsArg(name, args, 1)
	if err != nil {
		return nil, err
	}
	allowZero, err := int64Scalar(name, args, 2)
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(target))
	infer, known := -1, int64(1)
	for i, v := range target {
		switch {
		case v == 0 && allowZero == 0:
			if i >= len(in) {
				return nil, fmt.Errorf("%w: %s: entry %d of %v is 0 but the input has rank %d", ErrInput, name, i, target, len(in))
			}
			out[i] = in[i]
		case v == -1:
			if infer >= 0 {
				return nil, fmt.Errorf("%w: %s: more than one -1 in %v", ErrInput, name, target)
			}
			infer = i
			continue
		case v < 0 || v > maxExtent:
			return nil, fmt.Errorf("%w: %s: extent %d in %v", ErrInput, name, v, target)
		default:
			out[i] = v
		}
		var ok bool
		if known, ok = tensor.SignedMul(known, out[i]); !ok || known > math.MaxInt64/16 {
			return nil, fmt.Errorf("%w: %s: %v has too many elements", ErrInput, name, target)
		}
	}
	total := elements(in)
	if infer >= 0 {
		if known == 0 || total%known != 0 {
			return nil, fmt.Errorf("%w: %s: cannot reshape %v (%d elements) to %v", ErrInput, name, in, total, target)
		}
		out[infer] = total / known
	} else if known != total {
		return nil, fmt.Errorf("%w: %s: cannot reshape %v (%d elements) to %v (%d elements)", ErrInput, name, in, total, out, known)
	}
	return shapeResult(name, out)
}

func shapeSqueeze(args []*tensor.Tensor) (*tensor.Tensor, error) {
	const name = BuiltinShapeSqueeze
	in, err := shapeArgs(name, args, 1, 2)
	if err != nil {
		return nil, err
	}
	drop := map[int]bool{}
	if len(args) == 2 {
		axes, err := intsArg(name, args, 1)
		if err != nil {
			return nil, err
		}
		if drop, err = axesArg(name, axes, len(in)); err != nil {
			return nil, err
		}
	} else {
		for i, d := range in {
			drop[i] = d == 1
		}
	}
	out := []int64{}
	for i, d := range in {
		switch {
		case !drop[i]:
			out = append(out, d)
		case d != 1:
			return nil, fmt.Errorf("%w: %s: axis %d of %v has extent %d, not 1", ErrInput, name, i, in, d)
		}
	}
	return shapeResult(name, out)
}

func shapeUnsqueeze(args []*tensor.Tensor) (*tensor.Tensor, error) {
	const name = BuiltinShapeUnsqueeze
	in, err := shapeArgs(name, args, 2, 2)
	if err != nil {
		return nil, err
	}
	axes, err := intsArg(name, args, 1)
	if err != nil {
		return nil, err
	}
	r := len(in) + len(axes)
	ins, err := axesArg(name, axes, r)
	if err != nil {
		return nil, err
	}
	out := make([]int64, 0, r)
	k := 0
	for i := range r {
		if ins[i] {
			out = append(out, 1)
		} else {
			out = append(out, in[k])
			k++
		}
	}
	return shapeResult(name, out)
}

func shapeBroadcast(args []*tensor.Tensor) (*tensor.Tensor, error) {
	const name = BuiltinShapeBroadcast
	a, err := shapeArgs(name, args, 2, 2)
	if err != nil {
		return nil, err
	}
	b, err := intsArg(name, args, 1)
	if err != nil {
		return nil, err
	}
	r := max(len(a), len(b))
	out := make([]int64, r)
	for i := range out {
		x, y := int64(1), int64(1)
		if k := i - (r - len(a)); k >= 0 {
			x = a[k]
		}
		if k := i - (r - len(b)); k >= 0 {
			y = b[k]
		}
		switch {
		case x == y || y == 1:
			out[i] = x
		case x == 1:
			out[i] = y
		default:
			return nil, fmt.Errorf("%w: %s: %v and %v do not broadcast", ErrInput, name, a, b)
		}
	}
	return shapeResult(name, out)
}

func shapeTile(args []*tensor.Tensor) (*tensor.Tensor, error) {
	const name = BuiltinShapeTile
	in, err := shapeArgs(name, args, 2, 2)
	if err != nil {
		return nil, err
	}
	reps, err := intsArg(name, args, 1)
	if err != nil {
		return nil, err
	}
	if len(reps) != len(in) {
		return nil, fmt.Errorf("%w: %s: %d repeats for rank %d", ErrInput, name, len(reps), len(in))
	}
	out := make([]int64, len(in))
	for i, r := range reps {
		v, ok := tensor.SignedMul(in[i], r)
		if r < 0 || !ok {
			return nil, fmt.Errorf("%w: %s: repeat %d of extent %d", ErrInput, name, r, in[i])
		}
		out[i] = v
	}
	return shapeResult(name, out)
}

func shapeValues(args []*tensor.Tensor) (*tensor.Tensor, error) {
	const name = BuiltinShapeValues
	v, err := shapeArgs(name, args, 1, 1)
	if err != nil {
		return nil, err
	}
	return shapeResult(name, v)
}

func shapeRange(args []*tensor.Tensor) (*tensor.Tensor, error) {
	const name = BuiltinShapeRange
	if len(args) != 3 {
		return nil, fmt.Errorf("%s takes 3 arguments, got %d", name, len(args))
	}
	var n int64
	if args[0] != nil && args[0].DType.IsInt() {
		v, err := int64Scalars(name, args, 3)
		if err != nil {
			return nil, err
		}
		s, l, d := v[0], v[1], v[2]
		if d == 0 {
			return nil, fmt.Errorf("%w: %s: delta 0", ErrInput, name)
		}
		// ⌈(l-s)/d⌉ without overflow: in float64, exact below 2^53 and past the bound above
		span := float64(l) - float64(s)
		if q := span / float64(d); q > float64(maxExtent) {
			return nil, fmt.Errorf("%w: %s: a range from %d to %d by %d is too long", ErrInput, name, s, l, d)
		}
		diff, ok := tensor.SignedAdd(l, -s)
		if !ok || s == math.MinInt64 {
			return nil, fmt.Errorf("%w: %s: a range from %d to %d by %d is too long", ErrInput, name, s, l, d)
		}
		if diff != 0 && (diff > 0) == (d > 0) {
			n = diff / d
			if diff%d != 0 {
				n++
			}
		}
	} else {
		var v [3]float64
		for i := range v {
			x, err := scalarArg(name, args, i)
			if err != nil {
				return nil, err
			}
			v[i] = x
		}
		s, l, d := v[0], v[1], v[2]
		q := math.Ceil((l - s) / d)
		if d == 0 || math.IsNaN(q) || q > float64(maxExtent) {
			return nil, fmt.Errorf("%w: %s: a range from %g to %g by %g", ErrInput, name, s, l, d)
		}
		n = int64(max(0, q))
	}
	return shapeResult(name, []int64{n})
}
