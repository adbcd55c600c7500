package kernels

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// Data-movement (injective) ops: every output element is one input element (or a fill
// value) chosen by index arithmetic. Reads are in bounds by construction: an index that
// comes from data (Gather, GatherElements) goes through te.CheckedIndex (one outside
// [-n, n) fails the kernel, and is clamped meanwhile), and each branch of a Select (both
// are evaluated) reads at a clamped index.

// injectiveComputes: data movement ops (transpose, gather, slice, concat, split, ...).
func injectiveComputes() map[graph.Op]ComputeFunc {
	m := map[graph.Op]ComputeFunc{
		graph.OpTranspose:       computeTranspose,
		graph.OpGather:          computeGather,
		graph.OpGatherElements:  computeGatherElements,
		graph.OpGatherND:        computeGatherND,
		graph.OpSlice:           computeSlice,
		graph.OpConcat:          computeConcat,
		graph.OpSplit:           computeSplit,
		graph.OpPad:             computePad,
		graph.OpReshape:         computeReshape,
		graph.OpFlatten:         computeFlatten,
		graph.OpSqueeze:         computeSqueeze,
		graph.OpUnsqueeze:       computeUnsqueeze,
		graph.OpExpand:          computeExpand,
		graph.OpTile:            computeTile,
		graph.OpDepthToSpace:    computeDepthToSpace,
		graph.OpSpaceToDepth:    computeSpaceToDepth,
		graph.OpTrilu:           computeTrilu,
		graph.OpOneHot:          computeOneHot,
		graph.OpReverseSequence: computeReverseSequence,
	}
	for op, f := range m {
		m[op] = injTyped(f)
	}
	return m
}

// injTyped refuses inputs whose element type the kernels cannot hold (half floats,
// strings, complex numbers) before f builds anything.
func injTyped(f ComputeFunc) ComputeFunc {
	return func(n *graph.Node, in []Input) ([]*te.Tensor, error) {
		for k, x := range in {
			if !x.Present() {
				continue
			}
			if dt := x.T.DT; dt != tensor.Bool && (!dt.IsNumeric() || dt == tensor.Float16 || dt == tensor.BFloat16) {
				return nil, Unsupported("%v input %d of type %v", n.Op, k, dt)
			}
		}
		return f(n, in)
	}
}

// injClamp limits an index expression to [0, n-1] (n > 0).
func injClamp(x, n loopir.Expr) loopir.Expr {
	return loopir.Bin(loopir.Max, loopir.Bin(loopir.Min, x, sub(n, i64(1))), i64(0))
}

// injEmpty reports a static zero extent among the tensor's extents.
func injEmpty(t *te.Tensor) bool {
	for _, e := range t.Shape {
		if c, ok := e.(*loopir.IntImm); ok && c.V == 0 {
			return true
		}
	}
	return false
}

// injCopy is a computation with x's element at every index of shape, read at src(i).
func injCopy(name string, x *te.Tensor, shape []loopir.Expr, src func(i []loopir.Expr) []loopir.Expr) *te.Tensor {
	return te.Compute(name, shape, func(i []loopir.Expr) loopir.Expr { return x.At(src(i)...) })
}

// computeTranspose permutes axes; perm defaults to reversing them.
func computeTranspose(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	x := in[0].T
	r := len(x.Shape)
	perm := attrs[graph.TransposeAttrs](n).Perm
	if perm == nil {
		for k := r - 1; k >= 0; k-- {
			perm = append(perm, int64(k))
		}
	}
	if len(perm) != r {
		return nil, Unsupported("Transpose perm %v for rank %d", perm, r)
	}
	p := make([]int, r)
	seen := make([]bool, r)
	for k, v := range perm {
		a, err := NormAxis(v, r)
		if err != nil {
			return nil, err
		}
		if seen[a] {
			return nil, Unsupported("Transpose perm %v is not a permutation", perm)
		}
		seen[a], p[k] = true, a
	}
	shape := make([]loopir.Expr, r)
	for k, a := range p {
		shape[k] = x.Shape[a]
	}
	out := injCopy("transpose", x, shape, func(i []loopir.Expr) []loopir.Expr {
		src := make([]loopir.Expr, r)
		for k, a := range p {
			src[a] = i[k]
		}
		return src
	})
	return []*te.Tensor{out}, nil
}

// computeGather reads x along axis at the positions held by the indices tensor:
// out[pre, j..., post] = x[pre, ind[j...], post]. A constant scalar index becomes a
// literal (checked at run time along a symbolic axis); other indices are read and
// checked at run time (te.CheckedIndex: one outside [-n, n) fails the kernel).
func computeGather(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	x, ind := in[0].T, in[1].T
	if !ind.DT.IsInt() {
		return nil, Unsupported("Gather indices of type %v", ind.DT)
	}
	axis, err := NormAxis(attrs[graph.GatherAttrs](n).Axis, len(x.Shape))
	if err != nil {
		return nil, err
	}
	d := x.Shape[axis]
	if c, ok := d.(*loopir.IntImm); ok && c.V == 0 {
		return nil, Unsupported("Gather along an empty axis")
	}
	q := len(ind.Shape)
	shape := append(append(append([]loopir.Expr{}, x.Shape[:axis]...), ind.Shape...), x.Shape[axis+1:]...)
	var fixed loopir.Expr
	if in[1].Const != nil && in[1].Const.Len() == 1 {
		v := in[1].Const.Int64s()[0]
		dc, ok := d.(*loopir.IntImm)
		switch {
		case ok:
			if v < 0 {
				v += dc.V
			}
			if v < 0 || v >= dc.V {
				return nil, Unsupported("Gather index %d out of range for extent %d", in[1].Const.Int64s()[0], dc.V)
			}
			fixed = i64(v)
		default: // a symbolic axis: checked at run time, as a run-time index is
			fixed = te.CheckedIndex(i64(v), d)
		}
	}
	out := injCopy("gather", x, shape, func(i []loopir.Expr) []loopir.Expr {
		src := make([]loopir.Expr, 0, len(x.Shape))
		src = append(src, i[:axis]...)
		if fixed != nil {
			src = append(src, fixed)
		} else {
			src = append(src, te.CheckedIndex(ind.At(i[axis:axis+q]...), d))
		}
		return append(src, i[axis+q:]...)
	})
	return []*te.Tensor{out}, nil
}

// computeGatherElements reads x at the indices' own positions, with the axis coordinate
// replaced by the index value: out[i] = x[i with i[axis] = ind[i]].
func computeGatherElements(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	x, ind := in[0].T, in[1].T
	if !ind.DT.IsInt() {
		return nil, Unsupported("GatherElements indices of type %v", ind.DT)
	}
	if len(ind.Shape) != len(x.Shape) {
		return nil, Unsupported("GatherElements indices of rank %d on data of rank %d", len(ind.Shape), len(x.Shape))
	}
	axis, err := NormAxis(attrs[graph.GatherAttrs](n).Axis, len(x.Shape))
	if err != nil {
		return nil, err
	}
	xe, err := Extents(x)
	if err != nil {
		return nil, err
	}
	ie, err := Extents(ind)
	if err != nil {
		return nil, err
	}
	for a := range xe {
		if a != axis && ie[a] > xe[a] {
			return nil, Unsupported("GatherElements indices extent %d exceeds data extent %d on axis %d", ie[a], xe[a], a)
		}
	}
	if xe[axis] == 0 && !injEmpty(ind) {
		return nil, Unsupported("GatherElements along an empty axis")
	}
	out := injCopy("gather_elements", x, ind.Shape, func(i []loopir.Expr) []loopir.Expr {
		src := append([]loopir.Expr{}, i...)
		src[axis] = te.CheckedIndex(ind.At(i...), x.Shape[axis])
		return src
	})
	return []*te.Tensor{out}, nil
}
