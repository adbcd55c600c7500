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

// TopK kernels. A te compute cannot sort, so the loop nest is built directly: per row
// along the axis, the outputs themselves hold the best k elements seen so far, in order
// (values, and their int64 positions along the axis). Each element of the row is
// compared with the last slot; when it beats it, one descending pass over the k slots
// shifts the slots it beats down by one and drops it in place. Ties keep the element of
// the lower index first (it was seen first, and an element only moves past slots it
// strictly beats), as ONNX specifies. The work is O(d) per row of extent d, plus O(k)
// per element that enters the top k (about k·(1 + ln(d/k)) of them on data in random
// order; d on data sorted the wrong way). The outputs are always sorted, which sorted=0
// allows. NaN ranks above every number (first for largest, last for smallest), and NaNs
// keep the order of their indices.

// topKStrategies: TopK with a constant k.
func topKStrategies() map[graph.Op][]kernels.Strategy {
	st := kernels.Strategy{Name: "topk-loops", Build: func(n *graph.Node, in []kernels.Input, _ target.Target) (*kernels.Impl, error) {
		f, params, err := TopK(kernels.KernelName(n), n, in)
		if err != nil {
			return nil, err
		}
		return &kernels.Impl{Func: f, Trace: &schedule.Trace{}, Params: params}, nil
	}}
	return map[graph.Op][]kernels.Strategy{graph.OpTopK: {st}}
}

// parallelTopKWork is the least number of row elements a TopK needs before its outer
// row loop runs in parallel.
const parallelTopKWork = 1 << 14

// TopK builds the loop nest of a TopK node whose k is a constant. The parameter is X,
// then the outputs Values and Indices. Extents other than the axis may be symbolic; the
// axis extent must be a constant at least k.
func TopK(name string, n *graph.Node, in []kernels.Input) (*loopir.PrimFunc, []kernels.Param, error) {
	a := n.Attrs.(*graph.TopKAttrs)
	x := in[0].T
	if dt := x.DT; !dt.IsNumeric() || dt == tensor.Float16 || dt == tensor.BFloat16 {
		return nil, nil, kernels.Unsupported("TopK of type %v", dt)
	}
	if len(in) < 2 || in[1].Const == nil || in[1].Const.Len() != 1 || !in[1].Const.DType.IsInt() {
		return nil, nil, kernels.Unsupported("TopK with a run-time k")
	}
	if len(n.Outputs) != 2 {
		return nil, nil, kernels.Unsupported("TopK with %d outputs", len(n.Outputs))
	}
	k := in[1].Const.Int64s()[0]
	ax, err := kernels.NormAxis(a.Axis, len(x.Shape))
	if err != nil {
		return nil, nil, err
	}
	d, ok := rnnConst(x.Shape[ax])
	if !ok {
		return nil, nil, kernels.Unsupported("TopK along a symbolic axis (%v)", loopir.ExprString(x.Shape[ax]))
	}
	if k < 0 || k > d {
		return nil, nil, kernels.Unsupported("TopK k=%d along an axis of extent %d", k, d)
	}
	outShape := append([]loopir.Expr{}, x.Shape...)
	outShape[ax] = loopir.Int(k)
	t := &topKNest{
		x:      &loopir.Buffer{Name: "X", DT: x.DT, Shape: append([]loopir.Expr{}, x.Shape...), Scope: "global"},
		vals:   &loopir.Buffer{Name: "Values", DT: x.DT, Shape: outShape, Scope: "global"},
		idx:    &loopir.Buffer{Name: "Indices", DT: tensor.Int64, Shape: append([]loopir.Expr{}, outShape...), Scope: "global"},
		axis:   ax,
		d:      d,
		k:      k,
		larger: a.Largest != 0,
	}
	params := []*loopir.Buffer{t.x, t.vals, t.idx}
	f := &loopir.PrimFunc{Name: name, Params: params, Dims: rnnDims(params), Body: t.body()}
	rnnRenameLoops(f.Body, f.Dims)
	if err := loopir.Verify(f); err != nil {
		panic(fmt.Sprintf("BUG: TopK loop nest: %v", err))
	}
	return f, []kernels.Param{{Input: 0}}, nil
}

// topKNest is one TopK kernel being built.
type topKNest struct {
	x, vals, idx *loopir.Buffer
	axis         int
	d, k         int64
	larger       bool
}

// body runs the selection for every row: loops over the extents other than the axis
// (the outermost in parallel when there is enough work), then the row.
func (t *topKNest) body() loopir.Stmt {
	if t.k == 0 {
		return loopir.Seq{}
	}
	var rows []loopir.Expr
	for a, e := range t.x.Shape {
		if a != t.axis {
			rows = append(rows, e)
		}
	}
	kind := loopir.Serial
	if e, ok := staticElements(t.x.Shape); ok && e >= parallelTopKWork && len(rows) > 0 {
		if c, ok := rnnConst(rows[0]); ok && c >= 2 {
			kind = loopir.Parallel
		}
	}
	return loopNest("r", rows, kind, t.row)
}

// row selects the top k of one row; r are the indices of the other axes.
func (t *topKNest) row(r []loopir.Expr) loopir.Stmt {
	at := func(p loopir.Expr) []loopir.Expr {
		i := make([]loopir.Expr, 0, len(r)+1)
		i = append(i, r[:t.axis]...)
		i = append(i, p)
		return append(i, r[t.axis:]...)
	}
	j := loopir.NewVar("j")
	v := &loopir.Load{Buf: t.x, Index: at(j)}
	c := loopir.Int
	bin := loopir.Bin
	slot := func(p loopir.Expr) loopir.Expr { return &loopir.Load{Buf: t.vals, Index: at(p)} }
	// beats: the element at slot p is filled (p < j: slots fill in order) and v ranks
	// strictly above it.
	beats := func(p loopir.Expr) loopir.Expr {
		return bin(loopir.Or, bin(loopir.GE, p, j), &loopir.Not{X: t.keeps(slot(p), v)})
	}
	put := func(p loopir.Expr, val, pos loopir.Expr) loopir.Stmt {
		return loopir.Seq{
			&loopir.Store{Buf: t.vals, Index: at(p), Value: val},
			&loopir.Store{Buf: t.idx, Index: at(p), Value: pos},
		}
	}
	q := loopir.NewVar("q")
	p := bin(loopir.Sub, c(t.k-1), q)
	next := bin(loopir.Min, bin(loopir.Add, p, c(1)), c(t.k-1)) // clamped: read only where p+1 < k
	insert := &loopir.For{Var: q, Min: c(0), Extent: c(t.k), Kind: loopir.Serial, Body: &loopir.IfThenElse{
		Cond: beats(p),
		Then: loopir.Seq{
			&loopir.IfThenElse{
				Cond: bin(loopir.And, bin(loopir.LT, p, c(t.k-1)), bin(loopir.LT, p, j)),
				Then: put(next, slot(p), &loopir.Load{Buf: t.idx, Index: at(p)}),
			},
			&loopir.IfThenElse{Cond: bin(loopir.EQ, p, c(0)), Then: put(c(0), v, j)},
		},
		Else: &loopir.IfThenElse{
			Cond: bin(loopir.And, bin(loopir.LT, p, c(t.k-1)), beats(next)),
			Then: put(next, v, j),
		},
	}}
	return &loopir.For{Var: j, Min: c(0), Extent: c(t.d), Kind: loopir.Serial, Body: &loopir.IfThenElse{
		Cond: beats(c(t.k - 1)),
		Then: insert,
	}}
}

// keeps reports that a, already in a slot, stays ahead of b, which comes later along
// the axis: a ranks at least as high (NaN above every number; equal values keep their
// order).
func (t *topKNest) keeps(a, b loopir.Expr) loopir.Expr {
	bin := loopir.Bin
	float := t.x.DT.IsFloat()
	if t.larger {
		ge := bin(loopir.GE, a, b)
		if !float {
			return ge
		}
		return bin(loopir.Or, ge, bin(loopir.NE, a, a))
	}
	le := bin(loopir.LE, a, b)
	if !float {
		return le
	}
	return bin(loopir.Or, le, bin(loopir.NE, b, b))
}
