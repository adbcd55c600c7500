package kernels

import (
	"fmt"
	"math"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// reduceComputes: reductions, normalizations and pooling.
func reduceComputes() map[graph.Op]ComputeFunc {
	m := map[graph.Op]ComputeFunc{
		graph.OpArgMax:            computeArg,
		graph.OpArgMin:            computeArg,
		graph.OpGlobalAveragePool: computeGlobalPool,
		graph.OpGlobalMaxPool:     computeGlobalPool,
		graph.OpGlobalLpPool:      computeGlobalPool,
		graph.OpCumSum:            computeCumSum,
	}
	for _, op := range []graph.Op{graph.OpReduceSum, graph.OpReduceMean, graph.OpReduceMax, graph.OpReduceMin,
		graph.OpReduceProd, graph.OpReduceL1, graph.OpReduceL2, graph.OpReduceSumSquare,
		graph.OpReduceLogSum, graph.OpReduceLogSumExp} {
		m[op] = computeReduce
	}
	for op, f := range normComputes() {
		m[op] = f
	}
	for op, f := range poolComputes() {
		m[op] = f
	}
	return m
}

// Reduction describes a reduction of X over some of its axes: Axes[k] marks axis k as
// reduced; KeepDims keeps reduced axes as extent-1 axes of the result.
//
// With Out set (axes known only at run time, keeping dims), every axis may be reduced:
// Out[k] is the result's run-time extent of axis k (1 where reduced, X's extent where
// not), and axis k is summed over X's extent - Out[k] + 1 positions from the output
// index (all of it where reduced, one where kept; an extent-1 axis is the same either
// way). Axes is then unused.
type Reduction struct {
	X        *te.Tensor
	Axes     []bool
	KeepDims bool
	Out      []loopir.Expr
}

// span is the number of positions axis k of X is reduced over in the run-time mode.
func (r Reduction) span(k int) loopir.Expr {
	return add(sub(r.X.Shape[k], r.Out[k]), i64(1))
}

// Shape is the extents of the reduced result.
func (r Reduction) Shape() []loopir.Expr {
	if r.Out != nil {
		return r.Out
	}
	out := []loopir.Expr{}
	for k, e := range r.X.Shape {
		switch {
		case !r.Axes[k]:
			out = append(out, e)
		case r.KeepDims:
			out = append(out, loopir.Int(1))
		}
	}
	return out
}

// RAxes makes one reduction axis per reduced axis of X, in axis order.
func (r Reduction) RAxes(name string) []loopir.IterVar {
	var out []loopir.IterVar
	if r.Out != nil {
		for k := range r.X.Shape {
			out = append(out, te.RAxis(fmt.Sprintf("%s%d", name, k), r.span(k)))
		}
		return out
	}
	for k, e := range r.X.Shape {
		if r.Axes[k] {
			out = append(out, te.RAxis(fmt.Sprintf("%s%d", name, k), e))
		}
	}
	return out
}

// SourceIndex is the index into X of the element that output index i reads when the
// reduction axes stand at rv (one per reduced axis, as RAxes makes them).
func (r Reduction) SourceIndex(i []loopir.Expr, rv []loopir.IterVar) []loopir.Expr {
	idx := make([]loopir.Expr, len(r.X.Shape))
	if r.Out != nil {
		for k := range idx {
			idx[k] = add(i[k], rv[k].Var)
		}
		return idx
	}
	o, q := 0, 0
	for k := range idx {
		if r.Axes[k] {
			idx[k] = rv[q].Var
			q++
			if r.KeepDims {
				o++
			}
			continue
		}
		idx[k] = i[o]
		o++
	}
	return idx
}

// ResultIndex is the index into the reduced result of the group that X's element at
// index x belongs to (how a normalization reads its statistics back).
func (r Reduction) ResultIndex(x []loopir.Expr) []loopir.Expr {
	out := []loopir.Expr{}
	for k, e := range x {
		switch {
		case !r.Axes[k]:
			out = append(out, e)
		case r.KeepDims:
			out = append(out, loopir.Int(0))
		}
	}
	return out
}

// Count is the number of elements in each group: the product of the reduced extents.
func (r Reduction) Count() loopir.Expr {
	var n loopir.Expr = loopir.Int(1)
	if r.Out != nil {
		for k := range r.X.Shape {
			n = loopir.Bin(loopir.Mul, n, r.span(k))
		}
		return n
	}
	for k, e := range r.X.Shape {
		if r.Axes[k] {
			n = loopir.Bin(loopir.Mul, n, e)
		}
	}
	return n
}

// Compute declares the reduced tensor: comb (te.Sum, te.Max, ...) over the reduced axes
// of f, which receives the source index into X and the output index.
func (r Reduction) Compute(name string, comb func(loopir.Expr, ...loopir.IterVar) loopir.Expr, f func(x, i []loopir.Expr) loopir.Expr) *te.Tensor {
	rv := r.RAxes(name + "_r")
	return te.Compute(name, r.Shape(), func(i []loopir.Expr) loopir.Expr {
		return comb(f(r.SourceIndex(i, rv), i), rv...)
	})
}

// ComputeGuarded is Compute for a result that is non-empty where a group is empty (a
// reduced extent of 0, the Reduce* ops): a block's init runs at a group's first element,
// so an empty group would keep whatever the output buffer held. Its answer is the
// combiner's identity (0, 1, −inf, +inf, as ONNX defines it): the whole output where the
// count is 0 at compile time, a select on the count where it is symbolic. (Softmax or a
// normalization reduces the same axis it writes: no group is empty unless its output is.)
func (r Reduction) ComputeGuarded(name string, comb func(loopir.Expr, ...loopir.IterVar) loopir.Expr, f func(x, i []loopir.Expr) loopir.Expr) *te.Tensor {
	var cmb loopir.Combiner
	red := r.Compute(name, func(e loopir.Expr, rv ...loopir.IterVar) loopir.Expr {
		c := comb(e, rv...)
		rd, ok := c.(*loopir.Reduce)
		if !ok {
			panic("BUG: ComputeGuarded's combiner built no reduction")
		}
		cmb = rd.Comb
		return c
	}, f)
	n := r.Count()
	if c, ok := n.(*loopir.IntImm); ok && c.V > 0 {
		return red
	}
	id := cmb.Identity(red.DT)
	if c, ok := n.(*loopir.IntImm); ok && c.V == 0 {
		return r.Apply(name+"_empty", func([]loopir.Expr) loopir.Expr { return id })
	}
	return r.Apply(name+"_or_identity", func(i []loopir.Expr) loopir.Expr {
		return te.Select(loopir.Bin(loopir.EQ, n, loopir.Int(0)), id, red.At(i...))
	})
}

// Apply declares an elementwise stage over the reduced shape.
func (r Reduction) Apply(name string, f func(i []loopir.Expr) loopir.Expr) *te.Tensor {
	return te.Compute(name, r.Shape(), f)
}

// plainFloat reports a float dtype the code generators handle (not float16/bfloat16).
func plainFloat(dt tensor.DType) bool {
	return dt.IsFloat() && dt != tensor.Float16 && dt != tensor.BFloat16
}

// plainNumeric reports a plain float or an integer dtype.
func plainNumeric(dt tensor.DType) bool { return plainFloat(dt) || dt.IsInt() }

// countOf is a group count as a literal of dt.
func countOf(r Reduction, dt tensor.DType) loopir.Expr {
	return te.Cast(dt, r.Count())
}

// copyOf is the identity computation (a kernel's output cannot be its input).
func copyOf(x *te.Tensor) *te.Tensor {
	return te.Compute("copy", x.Shape, func(i []loopir.Expr) loopir.Expr { return x.At(i...) })
}

// computeReduce implements the Reduce* family (axes from the constant input 1).
func computeReduce(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	a := attrs[graph.ReduceAttrs](n)
	x := in[0].T
	var axes []int64
	given := len(in) > 1 && in[1].Present()
	if given {
		var ok bool
		if axes, ok = ConstInts(in, 1); !ok && !isEmpty(in[1].T) {
			return runtimeAxesReduce(n, in)
		}
	}
	red, err := graph.ReduceAxes(len(x.Shape), axes, given, a.NoopWithEmptyAxes != 0)
	if err != nil {
		return nil, Unsupported("%v: %v", n.Op, err)
	}
	if red == nil {
		return []*te.Tensor{copyOf(x)}, nil
	}
	out, err := ReduceOp(n.Op, Reduction{X: x, Axes: red, KeepDims: a.KeepDims != 0})
	return []*te.Tensor{out}, err
}

// isEmpty reports a 1-D tensor of static extent 0 (axes given as an empty input).
func isEmpty(t *te.Tensor) bool {
	if len(t.Shape) != 1 {
		return false
	}
	c, ok := t.Shape[0].(*loopir.IntImm)
	return ok && c.V == 0
}

// runtimeAxesReduce reduces over axes known at run time, keeping dims: the output
// type's extents (bound at run time from the axes) say which axes are reduced.
func runtimeAxesReduce(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	x := in[0].T
	if attrs[graph.ReduceAttrs](n).KeepDims == 0 {
		return nil, Unsupported("%v with run-time axes and keepdims=0", n.Op)
	}
	out, ok := outputShape(n, 0, in, x)
	if !ok || len(out) != len(x.Shape) {
		return nil, Unsupported("%v with run-time axes and no output type of the input's rank", n.Op)
	}
	t, err := ReduceOp(n.Op, Reduction{X: x, KeepDims: true, Out: out})
	return []*te.Tensor{t}, err
}

// ReduceOp builds one of the Reduce* ops over r. Integer inputs are allowed where the
// result stays exact (Sum, Prod, Max, Min, L1, SumSquare).
func ReduceOp(op graph.Op, r Reduction) (*te.Tensor, error) {
	x := r.X
	dt := x.DT
	intOK := op == graph.OpReduceSum || op == graph.OpReduceProd || op == graph.OpReduceMax ||
		op == graph.OpReduceMin || op == graph.OpReduceL1 || op == graph.OpReduceSumSquare
	if !plainFloat(dt) && !(intOK && dt.IsInt()) {
		return nil, Unsupported("%v on %v", op, dt)
	}
	at := func(xi, _ []loopir.Expr) loopir.Expr { return x.At(xi...) }
	square := func(xi, _ []loopir.Expr) loopir.Expr { v := x.At(xi...); return te.Mul(v, v) }
	name := "reduce"
	switch op {
	case graph.OpReduceSum:
		return r.ComputeGuarded(name, te.Sum, at), nil
	case graph.OpReduceMax:
		return r.ComputeGuarded(name, te.Max, at), nil
	case graph.OpReduceMin:
		return r.ComputeGuarded(name, te.Min, at), nil
	case graph.OpReduceProd:
		return r.ComputeGuarded(name, te.Prod, at), nil
	case graph.OpReduceSumSquare:
		return r.ComputeGuarded(name, te.Sum, square), nil
	case graph.OpReduceL1:
		return r.ComputeGuarded(name, te.Sum, func(xi, _ []loopir.Expr) loopir.Expr { return absOf(x.At(xi...)) }), nil
	case graph.OpReduceMean:
		s := r.ComputeGuarded("reduce_sum", te.Sum, at)
		return r.Apply("reduce_mean", func(i []loopir.Expr) loopir.Expr { return te.Div(s.At(i...), countOf(r, dt)) }), nil
	case graph.OpReduceL2:
		s := r.ComputeGuarded("reduce_sumsq", te.Sum, square)
		return r.Apply("reduce_l2", func(i []loopir.Expr) loopir.Expr { return te.Sqrt(s.At(i...)) }), nil
	case graph.OpReduceLogSum:
		s := r.ComputeGuarded("reduce_sum", te.Sum, at)
		return r.Apply("reduce_logsum", func(i []loopir.Expr) loopir.Expr { return te.Log(s.At(i...)) }), nil
	case graph.OpReduceLogSumExp:
		mx := r.ComputeGuarded("reduce_max", te.Max, at)
		s := r.ComputeGuarded("reduce_sumexp", te.Sum, func(xi, i []loopir.Expr) loopir.Expr {
			return te.Exp(te.Sub(x.At(xi...), mx.At(i...)))
		})
		return r.Apply("reduce_logsumexp", func(i []loopir.Expr) loopir.Expr {
			m := mx.At(i...)
			// a group of -inf only: the shifted sum is NaN, the answer -inf
			return te.Select(loopir.Bin(loopir.EQ, m, loopir.Float(math.Inf(-1), dt)), m, te.Add(m, te.Log(s.At(i...))))
		}), nil
	}
	return nil, Unsupported("%v is not a reduction", op)
}

// computeArg implements ArgMax and ArgMin with a pair reduction; select_last_index
// scans the axis backwards so that the first best element found is the last one.
func computeArg(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	a := attrs[graph.ArgAttrs](n)
	x := in[0].T
	if !plainNumeric(x.DT) {
		return nil, Unsupported("%v on %v", n.Op, x.DT)
	}
	ax, err := NormAxis(a.Axis, len(x.Shape))
	if err != nil {
		return nil, err
	}
	red := make([]bool, len(x.Shape))
	red[ax] = true
	r := Reduction{X: x, Axes: red, KeepDims: a.KeepDims != 0}
	rv := te.RAxis("k", x.Shape[ax])
	last := loopir.Bin(loopir.Sub, x.Shape[ax], loopir.Int(1))
	reverse := a.SelectLastIndex != 0
	arg := te.ArgMax
	if n.Op == graph.OpArgMin {
		arg = te.ArgMin
	}
	idx, _ := arg("arg", r.Shape(), rv, func(i []loopir.Expr) loopir.Expr {
		xi := r.SourceIndex(i, []loopir.IterVar{rv})
		if reverse {
			xi[ax] = loopir.Bin(loopir.Sub, last, rv.Var)
		}
		return x.At(xi...)
	})
	if !reverse {
		return []*te.Tensor{idx}, nil
	}
	return []*te.Tensor{r.Apply("arg_last", func(i []loopir.Expr) loopir.Expr {
		return loopir.Bin(loopir.Sub, last, idx.At(i...))
	})}, nil
}

// computeGlobalPool reduces every spatial axis (2 and up), keeping them as extent 1.
func computeGlobalPool(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	x := in[0].T
	if len(x.Shape) < 3 {
		return nil, Unsupported("%v on rank %d", n.Op, len(x.Shape))
	}
	if !plainFloat(x.DT) {
		return nil, Unsupported("%v on %v", n.Op, x.DT)
	}
	red := make([]bool, len(x.Shape))
	for k := 2; k < len(red); k++ {
		red[k] = true
	}
	r := Reduction{X: x, Axes: red, KeepDims: true}
	var out *te.Tensor
	var err error
	switch n.Op {
	case graph.OpGlobalMaxPool:
		out, err = ReduceOp(graph.OpReduceMax, r)
	case graph.OpGlobalAveragePool:
		out, err = ReduceOp(graph.OpReduceMean, r)
	default:
		p := attrs[graph.LpAttrs](n).P
		out, err = lpNorm(r, p)
	}
	return []*te.Tensor{out}, err
}

// lpNorm is (sum |x|^p)^(1/p) over r, with the exact forms for p = 1 and 2.
func lpNorm(r Reduction, p int64) (*te.Tensor, error) {
	x := r.X
	switch p {
	case 1:
		return ReduceOp(graph.OpReduceL1, r)
	case 2:
		return ReduceOp(graph.OpReduceL2, r)
	}
	if p <= 0 {
		return nil, Unsupported("Lp norm with p=%d", p)
	}
	pe := loopir.Float(float64(p), x.DT)
	s := r.Compute("lp_sum", te.Sum, func(xi, _ []loopir.Expr) loopir.Expr { return te.Pow(te.Abs(x.At(xi...)), pe) })
	return r.Apply("lp_norm", func(i []loopir.Expr) loopir.Expr {
		return te.Pow(s.At(i...), loopir.Float(1/float64(p), x.DT))
	}), nil
}
