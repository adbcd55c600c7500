package graph

import "github.com/kilnrt/kiln/tensor"

// maxCondDepth bounds the walk of staticBool through a condition's producers.
const maxCondDepth = 16

// staticBool returns the value of a one-element boolean tensor when inference can tell
// it without running the model: a constant, or Equal of two one-element integer values
// whose elements are known (a constant, or Type.Known: shape arithmetic) and are the
// same dim (equal at run time) or different constants, through Not, Identity and a Cast
// from bool. Exporters guard rank changes this way ("if x.shape[1] == 1: squeeze"), and
// the answer lets an If take its branch's types.
func staticBool(v *Value, depth int) (val, ok bool) {
	if v == nil || depth > maxCondDepth || v.Type.Kind != KindTensor || v.Type.DType != tensor.Bool {
		return false, false
	}
	if v.Const != nil {
		if v.Const.Len() != 1 {
			return false, false
		}
		return v.Const.Int64s()[0] != 0, true
	}
	n := v.Def
	if n == nil {
		return false, false
	}
	switch n.Op {
	case OpNot:
		b, ok := staticBool(n.Input(0), depth+1)
		return !b, ok
	case OpIdentity, OpCast:
		return staticBool(n.Input(0), depth+1)
	case OpEqual:
		a, okA := oneKnown(n, 0)
		b, okB := oneKnown(n, 1)
		switch {
		case !okA || !okB:
		case a.Equal(b):
			return true, true
		case a.IsConst() && b.IsConst():
			return false, true
		}
	}
	return false, false
}

// oneKnown returns the element of a one-element integer input whose value is known.
func oneKnown(n *Node, i int) (Dim, bool) {
	v := n.Input(i)
	if v == nil || !v.Type.DType.IsInt() {
		return Dim{}, false
	}
	if v.Const != nil {
		if vals := v.Const.Int64s(); len(vals) == 1 {
			return Const(vals[0]), true
		}
		return Dim{}, false
	}
	if len(v.Type.Known) == 1 {
		return v.Type.Known[0], true
	}
	return Dim{}, false
}
