package cpu

import (
	"fmt"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/schedule"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// Scatter kernels (ScatterElements, ScatterND; the loader maps the deprecated Scatter to
// ScatterElements). The output starts as a copy of the data and the updates are then
// applied one by one in the updates' row-major order, so with duplicate indices and
// reduction "none" the last update wins, and a reduction folds the updates into the
// element in that order, as kernels/ref does. A te compute cannot say this without
// folding every update into every output element (O(output × updates)), so the loop nest
// is built directly: a copy (parallel when large), then one serial loop nest over the
// updates, O(output + updates). Every index goes through loopir.IndexCheck: one outside
// [-n, n) fails the kernel (the VM reports an input error naming the node) and the
// update meanwhile lands at a clamped index inside the output.

// scatterStrategies: the scatter ops, whose updates are applied in order.
func scatterStrategies() map[graph.Op][]kernels.Strategy {
	st := kernels.Strategy{Name: "scatter-loops", Build: func(n *graph.Node, in []kernels.Input, _ target.Target) (*kernels.Impl, error) {
		f, params, err := Scatter(kernels.KernelName(n), n, in)
		if err != nil {
			return nil, err
		}
		return &kernels.Impl{Func: f, Trace: &schedule.Trace{}, Params: params}, nil
	}}
	return map[graph.Op][]kernels.Strategy{
		graph.OpScatterElements: {st},
		graph.OpScatterND:       {st},
	}
}

// parallelCopyElements is the least number of elements a copy needs before its outer
// loop runs in parallel (a parallel region costs a few microseconds).
const parallelCopyElements = 1 << 16

// Scatter builds the loop nest of a ScatterElements or ScatterND node. The parameters
// are data, indices and updates, then the output. Data and updates may have symbolic
// extents; what cannot be shown to fit (an indices extent beyond the data's along an
// axis it does not index, updates whose shape does not follow the indices) and a
// reduction on booleans are refused.
func Scatter(name string, n *graph.Node, in []kernels.Input) (*loopir.PrimFunc, []kernels.Param, error) {
	if len(in) != 3 || !in[0].Present() || !in[1].Present() || !in[2].Present() {
		return nil, nil, kernels.Unsupported("%v without its three inputs", n.Op)
	}
	x, ind, upd := in[0].T, in[1].T, in[2].T
	if !ind.DT.IsInt() {
		return nil, nil, kernels.Unsupported("%v indices of type %v", n.Op, ind.DT)
	}
	if dt := x.DT; dt != tensor.Bool && (!dt.IsNumeric() || dt == tensor.Float16 || dt == tensor.BFloat16) {
		return nil, nil, kernels.Unsupported("%v data of type %v", n.Op, dt)
	}
	if upd.DT != x.DT {
		return nil, nil, kernels.Unsupported("%v updates of type %v on data of type %v", n.Op, upd.DT, x.DT)
	}
	buf := func(name string, dt tensor.DType, shape []loopir.Expr) *loopir.Buffer {
		return &loopir.Buffer{Name: name, DT: dt, Shape: append([]loopir.Expr{}, shape...), Scope: "global"}
	}
	s := &scatterNest{
		data: buf("data", x.DT, x.Shape), ind: buf("indices", ind.DT, ind.Shape),
		upd: buf("updates", upd.DT, upd.Shape), out: buf("output", x.DT, x.Shape),
	}
	var red string
	var err error
	switch n.Op {
	case graph.OpScatterElements:
		a := n.Attrs.(*graph.ScatterElementsAttrs)
		red = a.Reduction
		err = s.elements(a.Axis)
	case graph.OpScatterND:
		red = n.Attrs.(*graph.ScatterNDAttrs).Reduction
		err = s.nd()
	default:
		panic(fmt.Sprintf("BUG: Scatter called for %v", n.Op))
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%v: %w", n.Op, err)
	}
	if s.combine, err = scatterCombine(red, x.DT); err != nil {
		return nil, nil, fmt.Errorf("%v: %w", n.Op, err)
	}
	for _, e := range s.axes {
		if c, ok := rnnConst(e); ok && c == 0 && !isEmpty(s.upd.Shape) {
			return nil, nil, kernels.Unsupported("%v into an empty axis", n.Op)
		}
	}
	params := []*loopir.Buffer{s.data, s.ind, s.upd, s.out}
	f := &loopir.PrimFunc{Name: name, Params: params, Dims: rnnDims(params), Body: s.body()}
	rnnRenameLoops(f.Body, f.Dims)
	if err := loopir.Verify(f); err != nil {
		panic(fmt.Sprintf("BUG: scatter loop nest of %v: %v", n.Op, err))
	}
	return f, []kernels.Param{{Input: 0}, {Input: 1}, {Input: 2}}, nil
}

// scatterNest is one scatter kernel being built: its buffers, the output position an
// update lands at, and how it combines with the element there.
type scatterNest struct {
	data, ind, upd, out *loopir.Buffer
	// dest is the output index of the update at u (indices read through IndexCheck).
	dest func(u []loopir.Expr) []loopir.Expr
	// axes are the output extents that dest reads indices along: an update is only
	// applied where each is positive (an empty axis has no element to write).
	axes    []loopir.Expr
	combine func(old, v loopir.Expr) loopir.Expr
}

// elements sets up ScatterElements: indices and updates of one shape and the data's
// rank; the update at u lands at u with u[axis] replaced by the index there.
func (s *scatterNest) elements(axis int64) error {
	r := len(s.data.Shape)
	ax, err := kernels.NormAxis(axis, r)
	if err != nil {
		return err
	}
	if len(s.ind.Shape) != r || len(s.upd.Shape) != r {
		return kernels.Unsupported("indices of rank %d and updates of rank %d on data of rank %d", len(s.ind.Shape), len(s.upd.Shape), r)
	}
	for a := range r {
		if !kernels.ExtentsAgree(s.ind.Shape[a], s.upd.Shape[a]) {
			return kernels.Unsupported("indices %s and updates %s differ in shape", rnnShapeString(s.ind.Shape), rnnShapeString(s.upd.Shape))
		}
		if a != ax && !extentFits(s.ind.Shape[a], s.data.Shape[a]) {
			return kernels.Unsupported("indices extent %s exceeds data extent %s on axis %d",
				loopir.ExprString(s.ind.Shape[a]), loopir.ExprString(s.data.Shape[a]), a)
		}
	}
	s.axes = []loopir.Expr{s.data.Shape[ax]}
	s.dest = func(u []loopir.Expr) []loopir.Expr {
		d := append([]loopir.Expr{}, u...)
		d[ax] = checkedIndex(&loopir.Load{Buf: s.ind, Index: append([]loopir.Expr{}, u...)}, s.data.Shape[ax])
		return d
	}
	return nil
}

// nd sets up ScatterND: indices [j..., k] with a constant k, updates j... followed by
// the data's extents after its first k; the update at (j..., t...) lands at
// (ind[j..., 0], ..., ind[j..., k-1], t...).
func (s *scatterNest) nd() error {
	q, r := len(s.ind.Shape), len(s.data.Shape)
	if q == 0 {
		return kernels.Unsupported("indices of rank 0")
	}
	kc, ok := s.ind.Shape[q-1].(*loopir.IntImm)
	if !ok {
		return kernels.Unsupported("indices with a symbolic last extent (%v)", loopir.ExprString(s.ind.Shape[q-1]))
	}
	k := int(kc.V)
	if k > r {
		return kernels.Unsupported("indices address %d axes of data of rank %d", k, r)
	}
	want := append(append([]loopir.Expr{}, s.ind.Shape[:q-1]...), s.data.Shape[k:]...)
	agree := len(s.upd.Shape) == len(want)
	for a := 0; agree && a < len(want); a++ {
		agree = kernels.ExtentsAgree(s.upd.Shape[a], want[a])
	}
	if !agree {
		return kernels.Unsupported("updates %s do not follow indices %s and data %s",
			rnnShapeString(s.upd.Shape), rnnShapeString(s.ind.Shape), rnnShapeString(s.data.Shape))
	}
	s.axes = s.data.Shape[:k]
	s.dest = func(u []loopir.Expr) []loopir.Expr {
		d := make([]loopir.Expr, 0, r)
		for m := range k {
			at := append(append(make([]loopir.Expr, 0, q), u[:q-1]...), loopir.Int(int64(m)))
			d = append(d, checkedIndex(&loopir.Load{Buf: s.ind, Index: at}, s.data.Shape[m]))
		}
		return append(d, u[q-1:]...)
	}
	return nil
}

// body copies the data to the output, then applies the updates in order.
func (s *scatterNest) body() loopir.Stmt {
	copyKind := loopir.Serial
	if e, ok := staticElements(s.data.Shape); ok && e >= parallelCopyElements {
		if c, ok := rnnConst(s.data.Shape[0]); ok && c >= 2 {
			copyKind = loopir.Parallel
		}
	}
	cp := loopNest("c", s.data.Shape, copyKind, func(i []loopir.Expr) loopir.Stmt {
		return &loopir.Store{Buf: s.out, Index: i, Value: &loopir.Load{Buf: s.data, Index: append([]loopir.Expr{}, i...)}}
	})
	apply := loopNest("u", s.upd.Shape, loopir.Serial, func(u []loopir.Expr) loopir.Stmt {
		d := s.dest(u)
		old := &loopir.Load{Buf: s.out, Index: d}
		v := &loopir.Load{Buf: s.upd, Index: append([]loopir.Expr{}, u...)}
		return &loopir.Store{Buf: s.out, Index: append([]loopir.Expr{}, d...), Value: s.combine(old, v)}
	})
	// An update along an axis that is empty at run time has no element to land on: the
	// indices are only checked (each fails the kernel), nothing is written.
	var guard loopir.Expr
	for _, e := range s.axes {
		if _, ok := rnnConst(e); ok {
			continue
		}
		pos := loopir.Bin(loopir.GT, e, loopir.Int(0))
		if guard == nil {
			guard = pos
		} else {
			guard = loopir.Bin(loopir.And, guard, pos)
		}
	}
	if guard != nil {
		apply = &loopir.IfThenElse{Cond: guard, Then: apply, Else: s.checkOnly()}
	}
	return loopir.Seq{cp, apply}
}

// checkOnly is the update nest that writes nothing: each index is checked (into an
// empty axis every one fails, and the first is reported).
func (s *scatterNest) checkOnly() loopir.Stmt {
	return loopNest("e", s.upd.Shape, loopir.Serial, func(u []loopir.Expr) loopir.Stmt {
		var sum loopir.Expr = loopir.Int(0)
		for _, e := range s.dest(u) {
			sum = loopir.Bin(loopir.Add, sum, e)
		}
		// A checked index is never negative: the condition only keeps the checks.
		return &loopir.IfThenElse{Cond: loopir.Bin(loopir.LT, sum, loopir.Int(0)), Then: loopir.Seq{}}
	})
}

// scatterCombine is how an update v meets the element old already there.
func scatterCombine(red string, dt tensor.DType) (func(old, v loopir.Expr) loopir.Expr, error) {
	if dt == tensor.Bool && red != "none" && red != "" {
		return nil, kernels.Unsupported("reduction %q on booleans", red)
	}
	op := map[string]loopir.BinOp{"add": loopir.Add, "mul": loopir.Mul, "max": loopir.Max, "min": loopir.Min}
	switch red {
	case "none", "":
		return func(_, v loopir.Expr) loopir.Expr { return v }, nil
	case "max", "min":
		if dt.IsFloat() { // a NaN on either side gives NaN, as math.Max and math.Min do
			cmp := map[string]loopir.BinOp{"max": loopir.GT, "min": loopir.LT}[red]
			return func(old, v loopir.Expr) loopir.Expr {
				keep := loopir.Bin(loopir.Or, loopir.Bin(loopir.NE, old, old), loopir.Bin(cmp, old, v))
				return &loopir.Select{Cond: keep, T: old, F: v}
			}, nil
		}
		fallthrough
	case "add", "mul":
		return func(old, v loopir.Expr) loopir.Expr { return loopir.Bin(op[red], old, v) }, nil
	}
	return nil, kernels.Unsupported("reduction %q", red)
}

// checkedIndex is the index v read from data for an axis of extent n (IndexCheck, on
// int64 operands).
func checkedIndex(v, n loopir.Expr) loopir.Expr {
	if v.DType() != tensor.Int64 {
		v = &loopir.Cast{To: tensor.Int64, X: v}
	}
	return &loopir.Call{Fn: loopir.IndexCheck, Args: []loopir.Expr{v, n}}
}

// extentFits reports an extent a provably at most b.
func extentFits(a, b loopir.Expr) bool {
	ca, oka := rnnConst(a)
	cb, okb := rnnConst(b)
	if oka && okb {
		return ca <= cb
	}
	return loopir.Equal(a, b)
}

// isEmpty reports a constant zero among the extents.
func isEmpty(shape []loopir.Expr) bool {
	for _, e := range shape {
		if c, ok := rnnConst(e); ok && c == 0 {
			return true
		}
	}
	return false
}

// staticElements is the number of elements of a static shape.
func staticElements(shape []loopir.Expr) (int64, bool) {
	n := int64(1)
	for _, e := range shape {
		c, ok := rnnConst(e)
		if !ok {
			return 0, false
		}
		n *= c
	}
	return n, true
}

// loopNest builds loops over shape, outermost first (the outermost of kind outer, the
// rest serial), around the body made from the index; a rank-0 shape is the body once.
func loopNest(prefix string, shape []loopir.Expr, outer loopir.ForKind, body func(i []loopir.Expr) loopir.Stmt) loopir.Stmt {
	vars := make([]*loopir.Var, len(shape))
	idx := make([]loopir.Expr, len(shape))
	for a := range shape {
		vars[a] = loopir.NewVar(fmt.Sprintf("%s%d", prefix, a))
		idx[a] = vars[a]
	}
	s := body(idx)
	for a := len(shape) - 1; a >= 0; a-- {
		kind := loopir.Serial
		if a == 0 {
			kind = outer
		}
		s = &loopir.For{Var: vars[a], Min: loopir.Int(0), Extent: shape[a], Kind: kind, Body: s}
	}
	return s
}
