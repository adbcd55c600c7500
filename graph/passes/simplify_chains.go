package passes

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

// Reshape/Transpose/Squeeze chains (part of simplify). Each rule rewrites the node in
// place: its output Value keeps its identity (and its name when it is a result), only
// the node's op, attributes and inputs change. Producers left without readers are
// removed by dce; producers with other readers stay computed. Simplify visits nodes in
// order, so a producer has already been rewritten when its reader is looked at and one
// step back along a chain is enough. Values in a blocked layout (Type.Block) are never
// touched.
//
//   - Transpose(Transpose(x, p1), p2) → Transpose(x, q) with q[j] = p1[p2[j]];
//   - a Transpose with the identity permutation becomes Identity(x) (simplify's no-op
//     rule then bypasses it unless it is a result);
//   - a Transpose of a static shape that moves only size-1 axes (the non-1 axes keep
//     their relative order) becomes Reshape(x, shape): a view, no copy;
//   - a view op (Reshape, Flatten, Squeeze, Unsqueeze) of a view op, on static shapes,
//     becomes Reshape(start, shape) where start is the producer's input.

// chainCtx carries what the rules need across one Simplify run.
type chainCtx struct {
	names *freshNames // for the names of new shape constants
}

func newChainCtx(m *graph.Module) *chainCtx {
	return &chainCtx{names: moduleNames(m)}
}

// simplifyChain applies the chain rules to n (a node of f), in place.
func (c *chainCtx) simplifyChain(f *graph.Func, n *graph.Node) {
	if n.Op == graph.OpTranspose {
		c.transpose(f, n)
	}
	if isChainView(n) {
		c.viewChain(f, n)
	}
}

// plain reports a tensor value in the plain (unblocked) layout.
func plain(v *graph.Value) bool {
	return v != nil && v.Type.Kind == graph.KindTensor && v.Type.Block == 0
}

// isChainView: a single-output view op other than Identity on plain tensors.
func isChainView(n *graph.Node) bool {
	info := n.Op.Info()
	return info != nil && info.Flags&graph.View != 0 && n.Op != graph.OpIdentity &&
		len(n.Outputs) == 1 && len(n.Inputs) > 0 && plain(n.Inputs[0]) && plain(n.Outputs[0])
}

// isPlainTranspose: a Transpose of a ranked plain tensor with a valid permutation.
func isPlainTranspose(n *graph.Node) ([]int64, bool) {
	if n.Op != graph.OpTranspose || len(n.Outputs) != 1 || len(n.Inputs) != 1 || !plain(n.Inputs[0]) || !plain(n.Outputs[0]) {
		return nil, false
	}
	a, _ := n.Attrs.(*graph.TransposeAttrs)
	r := n.Inputs[0].Type.Rank()
	if a == nil || r < 0 {
		return nil, false
	}
	return normPerm(a.Perm, r)
}

// normPerm returns perm with negative axes normalized (nil: reversed axes), or false
// when it is not a permutation of rank axes.
func normPerm(perm []int64, r int) ([]int64, bool) {
	out := make([]int64, r)
	if perm == nil {
		for i := range out {
			out[i] = int64(r - 1 - i)
		}
		return out, true
	}
	if len(perm) != r {
		return nil, false
	}
	seen := make([]bool, r)
	for i, p := range perm {
		if p < 0 {
			p += int64(r)
		}
		if p < 0 || p >= int64(r) || seen[p] {
			return nil, false
		}
		seen[p] = true
		out[i] = p
	}
	return out, true
}

func (c *chainCtx) transpose(f *graph.Func, n *graph.Node) {
	p2, ok := isPlainTranspose(n)
	if !ok {
		return
	}
	if d := n.Inputs[0].Def; d != nil {
		if p1, ok := isPlainTranspose(d); ok {
			q := make([]int64, len(p2))
			for j := range p2 {
				q[j] = p1[p2[j]]
			}
			n.Inputs = []*graph.Value{d.Inputs[0]}
			n.Attrs = &graph.TransposeAttrs{Perm: q}
			p2 = q
		}
	}
	x, out := n.Inputs[0], n.Outputs[0]
	identity := true
	for j, p := range p2 {
		identity = identity && p == int64(j)
	}
	if identity {
		n.Op, n.Attrs = graph.OpIdentity, nil
		return
	}
	in, ok1 := x.Type.ConstShape()
	os, ok2 := out.Type.ConstShape()
	if !ok1 || !ok2 || os.NumElements() == 0 || !onlyUnitAxesMove(in, p2) {
		return
	}
	c.toReshape(f, n, x, os)
}

// onlyUnitAxesMove: the axes of extent other than 1 appear in perm in increasing order,
// so transposing does not change the order of the elements.
func onlyUnitAxesMove(in tensor.Shape, perm []int64) bool {
	last := int64(-1)
	for _, p := range perm {
		if in[p] == 1 {
			continue
		}
		if p < last {
			return false
		}
		last = p
	}
	return true
}

// viewChain: n is a view of a view (static shapes) → Reshape of the first view's input.
func (c *chainCtx) viewChain(f *graph.Func, n *graph.Node) {
	d := n.Inputs[0].Def
	if d == nil || !isChainView(d) {
		return
	}
	start, out := d.Inputs[0], n.Outputs[0]
	_, ok1 := start.Type.ConstShape()
	os, ok2 := out.Type.ConstShape()
	if !ok1 || !ok2 || os.NumElements() == 0 || start.Type.DType != out.Type.DType {
		return
	}
	c.toReshape(f, n, start, os)
}

// toReshape makes n the node Reshape(x, shape). A Reshape that already reads a constant
// spelling exactly shape keeps it; otherwise a new constant is added to f.
func (c *chainCtx) toReshape(f *graph.Func, n *graph.Node, x *graph.Value, shape tensor.Shape) {
	dims := make([]int64, len(shape))
	for i, d := range shape {
		dims[i] = int64(d)
	}
	sc := n.Input(1)
	if n.Op != graph.OpReshape || !spells(sc, dims) {
		sc = graph.NewConst(c.names.fresh(n.Outputs[0].Name+"_shape"), tensor.MustFromSlice(tensor.Shape{len(dims)}, dims))
		f.Consts = append(f.Consts, sc)
	}
	n.Op = graph.OpReshape
	n.Attrs = &graph.ReshapeAttrs{}
	n.Inputs = []*graph.Value{x, sc}
}

// spells reports a constant i64 vector equal to dims.
func spells(v *graph.Value, dims []int64) bool {
	if v == nil || v.Const == nil || v.Const.DType != tensor.Int64 || len(v.Const.Shape) != 1 || v.Const.Len() != len(dims) {
		return false
	}
	for i, d := range v.Const.Int64s() {
		if d != dims[i] {
			return false
		}
	}
	return true
}
