package graph

import "github.com/kilnrt/kiln/tensor"

// maxCondDepth bounds the walk of staticBools through a condition's producers.
const maxCondDepth = 16

// maxStaticBools is the most elements staticBools decides: conditions on shape vectors.
const maxStaticBools = 64

// staticBool returns the value of a one-element boolean tensor when inference can tell
// it without running the model (staticBools). Exporters guard rank changes this way
// ("if x.shape[1] == 1: squeeze"), and the answer lets an If take its branch's types.
func staticBool(v *Value, depth int) (val, ok bool) {
	vals, ok := staticBools(v, depth)
	if !ok || len(vals) != 1 {
		return false, false
	}
	return vals[0], true
}

// staticBools returns the elements of a 0-D or 1-D boolean tensor of at most
// maxStaticBools elements when inference can tell them without running the model: a
// constant, or Equal of two integer values whose elements are known (a constant, or
// Type.Known: shape arithmetic; one of them may be a single element, broadcast) and
// are, element by element, the same dim (equal at run time), different constants, or
// an extent against a negative constant; through Not, Identity and a Cast from bool.
// PyTorch exports expand(x, shape) as Expand(x, Where(Equal(shape, -1), 1, shape)),
// and the answer lets the Where, and so the Expand, keep the shape's symbols.
func staticBools(v *Value, depth int) ([]bool, bool) {
	if v == nil || depth > maxCondDepth || v.Type.Kind != KindTensor || v.Type.DType != tensor.Bool || v.Type.UnknownRank || len(v.Type.Shape) > 1 {
		return nil, false
	}
	if v.Const != nil {
		if v.Const.Len() > maxStaticBools {
			return nil, false
		}
		out := make([]bool, v.Const.Len())
		for i, x := range v.Const.Int64s() {
			out[i] = x != 0
		}
		return out, true
	}
	n := v.Def
	if n == nil {
		return nil, false
	}
	switch n.Op {
	case OpNot:
		b, ok := staticBools(n.Input(0), depth+1)
		if !ok {
			return nil, false
		}
		out := make([]bool, len(b))
		for i, x := range b {
			out[i] = !x
		}
		return out, true
	case OpIdentity, OpCast:
		return staticBools(n.Input(0), depth+1)
	case OpEqual:
		a, okA := knownElems(n, 0)
		b, okB := knownElems(n, 1)
		if !okA || !okB || (len(a) != len(b) && len(a) != 1 && len(b) != 1) {
			return nil, false
		}
		out := make([]bool, max(len(a), len(b)))
		for i := range out {
			eq, ok := equalDims(a[min(i, len(a)-1)], b[min(i, len(b)-1)])
			if !ok {
				return nil, false
			}
			out[i] = eq
		}
		return out, true
	}
	return nil, false
}

// equalDims decides whether two known integer values are equal at run time.
func equalDims(a, b Dim) (eq, ok bool) {
	switch {
	case a.Equal(b):
		return true, true
	case a.IsConst() && b.IsConst():
		return false, true
	case negativeConst(a) && nonNegative(b), negativeConst(b) && nonNegative(a):
		return false, true
	}
	return false, false
}

func negativeConst(d Dim) bool { v, ok := d.Value(); return ok && v < 0 }

// nonNegative reports whether d is at least 0 for every value of its symbols (extents,
// never negative): no negative coefficient.
func nonNegative(d Dim) bool {
	if d.ovf || d.c < 0 {
		return false
	}
	for _, t := range d.terms {
		if t.coef < 0 {
			return false
		}
	}
	return true
}

// knownElems returns the elements of a 0-D or 1-D integer input of at most
// maxStaticBools elements whose values are known.
func knownElems(n *Node, i int) ([]Dim, bool) {
	v := n.Input(i)
	if v == nil || !v.Type.DType.IsInt() || v.Type.UnknownRank || len(v.Type.Shape) > 1 {
		return nil, false
	}
	if v.Const != nil {
		vals := v.Const.Int64s()
		if len(vals) == 0 || len(vals) > maxStaticBools {
			return nil, false
		}
		out := make([]Dim, len(vals))
		for j, x := range vals {
			out[j] = Const(x)
		}
		return out, true
	}
	if len(v.Type.Known) == 0 || len(v.Type.Known) > maxStaticBools {
		return nil, false
	}
	return v.Type.Known, true
}
