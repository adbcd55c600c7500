package ref

// Sequence and optional ops, and SequenceMap.

import (
	"fmt"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

func ctlSeq(v Value, what string) (*Sequence, error) {
	s, ok := v.(*Sequence)
	if !ok {
		return nil, Badf("%s is %s, want a sequence", what, Describe(v))
	}
	return s, nil
}

// ctlPos reads a position input, accepting negative positions; insert allows pos == len.
func ctlPos(v Value, length int, insert bool) (int, error) {
	p, err := ctlInt(v, "position")
	if err != nil {
		return 0, err
	}
	limit := int64(length)
	if insert {
		limit++
	}
	if p < 0 {
		p += int64(length)
	}
	if p < 0 || p >= limit {
		return 0, Badf("position %d out of range for a sequence of length %d", p, length)
	}
	return int(p), nil
}

func ctlSequenceConstruct(_ *Ctx, n *graph.Node, in []Value) ([]Value, error) {
	s := &Sequence{}
	for i, v := range in {
		t, err := ctlTensor(v, fmt.Sprintf("input %d", i))
		if err != nil {
			return nil, err
		}
		if i > 0 && t.DType != s.Elem {
			return nil, Badf("elements have dtypes %v and %v", s.Elem, t.DType)
		}
		s.Elem = t.DType
		s.Items = append(s.Items, t)
	}
	return []Value{s}, nil
}

func ctlSequenceEmpty(_ *Ctx, n *graph.Node, _ []Value) ([]Value, error) {
	return []Value{&Sequence{Elem: tensor.DType(attrs[graph.SequenceEmptyAttrs](n).DType)}}, nil
}

func ctlSequenceAt(_ *Ctx, _ *graph.Node, in []Value) ([]Value, error) {
	s, err := ctlSeq(in[0], "input")
	if err != nil {
		return nil, err
	}
	p, err := ctlPos(in[1], len(s.Items), false)
	if err != nil {
		return nil, err
	}
	return []Value{s.Items[p]}, nil
}

func ctlSequenceInsert(_ *Ctx, _ *graph.Node, in []Value) ([]Value, error) {
	s, err := ctlSeq(in[0], "input")
	if err != nil {
		return nil, err
	}
	t, err := ctlTensor(in[1], "tensor")
	if err != nil {
		return nil, err
	}
	if len(s.Items) > 0 && t.DType != s.Elem {
		return nil, Badf("inserting %v into a sequence of %v", t.DType, s.Elem)
	}
	p := len(s.Items)
	if len(in) > 2 && in[2] != nil {
		if p, err = ctlPos(in[2], len(s.Items), true); err != nil {
			return nil, err
		}
	}
	items := append(append(append([]*tensor.Tensor{}, s.Items[:p]...), t), s.Items[p:]...)
	return []Value{&Sequence{Elem: t.DType, Items: items}}, nil
}

func ctlSequenceErase(_ *Ctx, _ *graph.Node, in []Value) ([]Value, error) {
	s, err := ctlSeq(in[0], "input")
	if err != nil {
		return nil, err
	}
	if len(s.Items) == 0 {
		return nil, Badf("erase from an empty sequence")
	}
	p := len(s.Items) - 1
	if len(in) > 1 && in[1] != nil {
		if p, err = ctlPos(in[1], len(s.Items), false); err != nil {
			return nil, err
		}
	}
	items := append(append([]*tensor.Tensor{}, s.Items[:p]...), s.Items[p+1:]...)
	return []Value{&Sequence{Elem: s.Elem, Items: items}}, nil
}

func ctlSequenceLength(_ *Ctx, _ *graph.Node, in []Value) ([]Value, error) {
	s, err := ctlSeq(in[0], "input")
	if err != nil {
		return nil, err
	}
	return []Value{tensor.Scalar(int64(len(s.Items)))}, nil
}

func ctlSplitToSequence(_ *Ctx, n *graph.Node, in []Value) ([]Value, error) {
	a := attrs[graph.SplitToSequenceAttrs](n)
	t, err := ctlTensor(in[0], "input")
	if err != nil {
		return nil, err
	}
	axis, err := tensor.NormAxis(a.Axis, len(t.Shape))
	if err != nil {
		return nil, Badf("%v", err)
	}
	length := t.Shape[axis]
	var sizes []int
	keep := true
	switch {
	case len(in) < 2 || in[1] == nil:
		for i := 0; i < length; i++ {
			sizes = append(sizes, 1)
		}
		keep = a.KeepDims != 0
	default:
		st, err := ctlTensor(in[1], "split")
		if err != nil {
			return nil, err
		}
		vals := st.Int64s()
		if len(st.Shape) == 0 {
			if vals[0] <= 0 {
				return nil, Badf("split size %d", vals[0])
			}
			for left := length; left > 0; left -= int(vals[0]) {
				sizes = append(sizes, min(left, int(vals[0])))
			}
		} else {
			sum := 0
			for _, v := range vals {
				if v < 0 {
					return nil, Badf("negative split size %d", v)
				}
				sizes = append(sizes, int(v))
				sum += int(v)
			}
			if sum != length {
				return nil, Badf("split sizes sum to %d, axis has %d", sum, length)
			}
		}
	}
	s := &Sequence{Elem: t.DType}
	start := 0
	for _, sz := range sizes {
		part := ctlRange(t, axis, start, start+sz)
		if !keep {
			part = ctlSliceAxis(t, axis, start)
		}
		s.Items = append(s.Items, part)
		start += sz
	}
	return []Value{s}, nil
}

// ctlRange returns t with axis restricted to [lo, hi).
func ctlRange(t *tensor.Tensor, axis, lo, hi int) *tensor.Tensor {
	parts := make([]*tensor.Tensor, 0, hi-lo)
	for k := lo; k < hi; k++ {
		parts = append(parts, ctlSliceAxis(t, axis, k))
	}
	if len(parts) == 0 {
		shape := t.Shape.Clone()
		shape[axis] = 0
		return tensor.New(t.DType, shape)
	}
	out, err := ctlConcat(parts, axis, true)
	if err != nil {
		panic("BUG: " + err.Error())
	}
	return out
}

func ctlConcatFromSequence(_ *Ctx, n *graph.Node, in []Value) ([]Value, error) {
	a := attrs[graph.ConcatFromSequenceAttrs](n)
	s, err := ctlSeq(in[0], "input")
	if err != nil {
		return nil, err
	}
	if len(s.Items) == 0 {
		return nil, Badf("concatenating an empty sequence")
	}
	rank := len(s.Items[0].Shape)
	if a.NewAxis != 0 {
		rank++
	}
	axis, err := tensor.NormAxis(a.Axis, rank)
	if err != nil {
		return nil, Badf("%v", err)
	}
	out, err := ctlConcat(s.Items, axis, a.NewAxis != 0)
	if err != nil {
		return nil, err
	}
	return []Value{out}, nil
}

func ctlSequenceMap(ec *Ctx, n *graph.Node, in []Value) ([]Value, error) {
	body := attrs[graph.SequenceMapAttrs](n).Body
	s0, err := ctlSeq(in[0], "input sequence")
	if err != nil {
		return nil, err
	}
	length := len(s0.Items)
	outs := make([]*Sequence, len(n.Outputs))
	for i := range outs {
		outs[i] = &Sequence{Elem: body.Results[i].Type.DType}
	}
	for k := 0; k < length; k++ {
		args := make([]Value, len(in))
		for j, v := range in {
			if s, ok := v.(*Sequence); ok {
				if len(s.Items) != length {
					return nil, Badf("sequences have lengths %d and %d", length, len(s.Items))
				}
				args[j] = s.Items[k]
			} else {
				args[j] = v
			}
		}
		res, err := ec.Run(body, args)
		if err != nil {
			return nil, fmt.Errorf("sequence map element %d: %w", k, err)
		}
		for i := range outs {
			t, err := ctlTensor(res[i], "body output")
			if err != nil {
				return nil, err
			}
			outs[i].Elem = t.DType
			outs[i].Items = append(outs[i].Items, t)
		}
	}
	vs := make([]Value, len(outs))
	for i, o := range outs {
		vs[i] = o
	}
	return vs, nil
}

func ctlOptional(_ *Ctx, n *graph.Node, in []Value) ([]Value, error) {
	o := &Optional{Elem: *n.Outputs[0].Type.Elem}
	if len(in) > 0 {
		o.V = in[0]
	}
	return []Value{o}, nil
}

func ctlOptionalGet(_ *Ctx, _ *graph.Node, in []Value) ([]Value, error) {
	switch v := in[0].(type) {
	case *Optional:
		if v.V == nil {
			return nil, Badf("optional has no element")
		}
		return []Value{v.V}, nil
	case nil:
		return nil, Badf("optional input is missing")
	default:
		return []Value{v}, nil
	}
}

func ctlOptionalHas(_ *Ctx, _ *graph.Node, in []Value) ([]Value, error) {
	has := false
	if len(in) > 0 {
		switch v := in[0].(type) {
		case *Optional:
			has = v.V != nil
		case nil:
		default:
			has = true
		}
	}
	return []Value{tensor.Scalar(has)}, nil
}
