package vm

import (
	"fmt"

	"github.com/kilnrt/kiln/tensor"
)

// seqSplit is SplitToSequence: t split along axis into pieces of the sizes in split (a
// scalar: pieces of that size, the last one shorter; a 1-D tensor: one piece per
// entry, summing to the axis); without split, pieces of 1 whose axis is dropped unless
// keepdims.
func seqSplit(c *call, _ *Instr, args []Value) (Value, error) {
	t, err := c.host(args[0])
	if err != nil {
		return nil, err
	}
	a, err := c.intArg(args[1], "the axis")
	if err != nil {
		return nil, err
	}
	keep, err := c.intArg(args[2], "keepdims")
	if err != nil {
		return nil, err
	}
	axis, err := tensor.NormAxis(a, len(t.Shape))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInput, err)
	}
	length := t.Shape[axis]
	var sizes []int
	if len(args) < 4 {
		for range length {
			sizes = append(sizes, 1)
		}
	} else {
		keep = 1
		st, err := c.host(args[3])
		if err != nil {
			return nil, err
		}
		if !st.DType.IsInt() || len(st.Shape) > 1 {
			return nil, fmt.Errorf("%w: split is %v%v, want an integer scalar or 1-D tensor", ErrInput, st.DType, st.Shape)
		}
		vals := st.Int64s()
		if len(st.Shape) == 0 {
			if vals[0] <= 0 {
				return nil, fmt.Errorf("%w: split size %d", ErrInput, vals[0])
			}
			for left := int64(length); left > 0; left -= vals[0] {
				sizes = append(sizes, int(min(left, vals[0])))
			}
		} else {
			sum := int64(0)
			for _, v := range vals {
				if v < 0 || v > int64(length) {
					return nil, fmt.Errorf("%w: split size %d for an axis of %d", ErrInput, v, length)
				}
				sizes = append(sizes, int(v))
				sum += v
			}
			if sum != int64(length) {
				return nil, fmt.Errorf("%w: split sizes sum to %d, the axis has %d", ErrInput, sum, length)
			}
		}
	}
	raw, err := t.Raw()
	if err != nil {
		return nil, err
	}
	outer, inner := 1, t.DType.Size()
	for _, d := range t.Shape[:axis] {
		outer *= d
	}
	for _, d := range t.Shape[axis+1:] {
		inner *= d
	}
	s := &Seq{Elem: t.DType}
	start := 0
	for _, sz := range sizes {
		part := make([]byte, 0, outer*sz*inner)
		for o := range outer {
			base := (o*length + start) * inner
			part = append(part, raw[base:base+sz*inner]...)
		}
		shape := t.Shape.Clone()
		shape[axis] = sz
		if keep == 0 {
			shape = append(shape[:axis:axis], t.Shape[axis+1:]...)
		}
		pt, err := tensor.FromRaw(t.DType, shape, part)
		if err != nil {
			return nil, err
		}
		s.Items = append(s.Items, &Host{T: pt})
		start += sz
	}
	return s, nil
}

// seqConcat is ConcatFromSequence: the items joined along axis, or stacked along a new
// axis when newaxis is 1. Every item must have the first's element type and extents
// (but the axis's, when joining).
func seqConcat(c *call, _ *Instr, args []Value) (Value, error) {
	s, err := seqArg(args[0])
	if err != nil {
		return nil, err
	}
	a, err := c.intArg(args[1], "the axis")
	if err != nil {
		return nil, err
	}
	newAxis, err := c.intArg(args[2], "new_axis")
	if err != nil {
		return nil, err
	}
	if len(s.Items) == 0 {
		return nil, fmt.Errorf("%w: concatenating an empty sequence", ErrInput)
	}
	first := s.Items[0].T
	rank := len(first.Shape)
	if newAxis != 0 {
		rank++
	}
	axis, err := tensor.NormAxis(a, rank)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInput, err)
	}
	// each item viewed with the new axis of extent 1
	shapes := make([]tensor.Shape, len(s.Items))
	total := 0
	for i, h := range s.Items {
		sh := h.T.Shape.Clone()
		if newAxis != 0 {
			sh = append(sh[:axis], append(tensor.Shape{1}, h.T.Shape[axis:]...)...)
		}
		if h.T.DType != first.DType || len(sh) != rank {
			return nil, fmt.Errorf("%w: item %d is %v%v, item 0 is %v%v", ErrInput, i, h.T.DType, h.T.Shape, first.DType, first.Shape)
		}
		for k := range sh {
			if i > 0 && k != axis && sh[k] != shapes[0][k] {
				return nil, fmt.Errorf("%w: item %d is %v%v, item 0 is %v%v", ErrInput, i, h.T.DType, h.T.Shape, first.DType, first.Shape)
			}
		}
		shapes[i] = sh
		total += sh[axis]
	}
	out := shapes[0].Clone()
	out[axis] = total
	n, err := tensor.CheckedBytes(first.DType, out)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInput, err)
	}
	if n > c.m.limits.TensorBytes {
		return nil, fmt.Errorf("%w: %w", ErrInput, c.m.limits.TensorError("the concatenated sequence", n))
	}
	outer, inner := 1, first.DType.Size()
	for _, d := range out[:axis] {
		outer *= d
	}
	for _, d := range out[axis+1:] {
		inner *= d
	}
	raws := make([][]byte, len(s.Items))
	for i, h := range s.Items {
		if raws[i], err = h.T.Raw(); err != nil {
			return nil, err
		}
	}
	buf := make([]byte, 0, n)
	for o := range outer {
		for i, sh := range shapes {
			w := sh[axis] * inner
			buf = append(buf, raws[i][o*w:(o+1)*w]...)
		}
	}
	t, err := tensor.FromRaw(first.DType, out, buf)
	if err != nil {
		return nil, err
	}
	return &Host{T: t}, nil
}
