package kernels

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
)

// computeGatherND reads slices of x addressed by index tuples (ONNX GatherND): with
// indices of shape [b..., j..., k] and batch_dims = len(b...),
// out[b..., j..., t...] = x[b..., ind[b..., j..., 0], ..., ind[b..., j..., k-1], t...].
// The batch extents of indices and data must agree; k must be a constant. Every index
// is read through te.CheckedIndex (one outside [-n, n) fails the kernel).
func computeGatherND(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	x, ind := in[0].T, in[1].T
	if !ind.DT.IsInt() {
		return nil, Unsupported("GatherND indices of type %v", ind.DT)
	}
	b := attrs[graph.GatherNDAttrs](n).BatchDims
	q := len(ind.Shape)
	if q == 0 || b < 0 || b >= int64(q) {
		return nil, Unsupported("GatherND indices of rank %d with batch_dims %d", q, b)
	}
	kc, ok := ind.Shape[q-1].(*loopir.IntImm)
	if !ok {
		return nil, Unsupported("GatherND indices with a symbolic last extent (%v)", loopir.ExprString(ind.Shape[q-1]))
	}
	k, nb := int(kc.V), int(b)
	if nb+k > len(x.Shape) {
		return nil, Unsupported("GatherND indices address %d axes of data of rank %d", nb+k, len(x.Shape))
	}
	for a := 0; a < nb; a++ {
		if !ExtentsAgree(ind.Shape[a], x.Shape[a]) {
			return nil, Unsupported("GatherND batch axis %d: indices extent %v, data extent %v",
				a, loopir.ExprString(ind.Shape[a]), loopir.ExprString(x.Shape[a]))
		}
	}
	for m := 0; m < k; m++ {
		if c, ok := x.Shape[nb+m].(*loopir.IntImm); ok && c.V == 0 && !injEmpty(ind) {
			return nil, Unsupported("GatherND along an empty axis")
		}
	}
	shape := append(append([]loopir.Expr{}, ind.Shape[:q-1]...), x.Shape[nb+k:]...)
	out := injCopy("gather_nd", x, shape, func(i []loopir.Expr) []loopir.Expr {
		src := append([]loopir.Expr{}, i[:nb]...)
		for m := 0; m < k; m++ {
			at := append(append(make([]loopir.Expr, 0, q), i[:q-1]...), i64(int64(m)))
			src = append(src, te.CheckedIndex(ind.At(at...), x.Shape[nb+m]))
		}
		return append(src, i[q-1:]...)
	})
	return []*te.Tensor{out}, nil
}

// ExtentsAgree reports two extents that are provably equal: the same constant, or the
// same expression over the same dims.
func ExtentsAgree(a, b loopir.Expr) bool {
	ca, oka := a.(*loopir.IntImm)
	cb, okb := b.(*loopir.IntImm)
	if oka && okb {
		return ca.V == cb.V
	}
	return loopir.Equal(a, b)
}
