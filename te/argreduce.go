package te

import (
	"fmt"

	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/tensor"
)

// argReduce is a pair reduction: one block computes both the best value and its index
// along one reduction axis.
type argReduce struct {
	index, value *Tensor
	axis         loopir.IterVar
	max          bool
}

// ArgMax declares, over the given shape, the position along axis of the largest f(i)
// (the first one among ties) and that largest value, as two tensors computed by one
// block: an int64 index tensor and a value tensor of f's type.
func ArgMax(name string, shape []loopir.Expr, axis loopir.IterVar, f func(i []loopir.Expr) loopir.Expr) (index, value *Tensor) {
	return argReduction(name, shape, axis, f, true)
}

// ArgMin is ArgMax for the smallest value.
func ArgMin(name string, shape []loopir.Expr, axis loopir.IterVar, f func(i []loopir.Expr) loopir.Expr) (index, value *Tensor) {
	return argReduction(name, shape, axis, f, false)
}

func argReduction(name string, shape []loopir.Expr, axis loopir.IterVar, f func(i []loopir.Expr) loopir.Expr, isMax bool) (*Tensor, *Tensor) {
	axes := make([]*loopir.Var, len(shape))
	idx := make([]loopir.Expr, len(shape))
	for k := range axes {
		axes[k] = loopir.NewVar(fmt.Sprintf("%s_i%d", name, k))
		idx[k] = axes[k]
	}
	src := f(idx)
	if hasReduce(src) {
		panic("BUG: te.ArgMax/ArgMin of a reduction")
	}
	mk := func(n string, dt tensor.DType) *Tensor {
		t := &Tensor{Name: n, DT: dt, Shape: shape, axes: axes, body: src,
			buf: &loopir.Buffer{Name: n, DT: dt, Shape: shape, Scope: "global"}}
		t.buf.Producer = t
		return t
	}
	ar := &argReduce{index: mk(name, tensor.Int64), value: mk(name+"_value", src.DType()), axis: axis, max: isMax}
	ar.index.arg, ar.value.arg = ar, ar
	return ar.index, ar.value
}

// lowerArg builds the pair block: init value = identity, index = 0; update both where
// the new element is strictly better (the index first, while the old value is still
// there). A NaN is better than any number.
func lowerArg(ar *argReduce) loopir.Stmt {
	t := ar.index
	src := t.body
	blk := &loopir.Block{Name: t.Name}
	idx := make([]loopir.Expr, len(t.axes))
	var loops []*loopir.For
	for k, ax := range t.axes {
		lv := loopir.NewVar(fmt.Sprintf("%s_l%d", t.Name, k))
		idx[k] = ax
		blk.Iters = append(blk.Iters, loopir.IterVar{Var: ax, Extent: t.Shape[k], Kind: loopir.Spatial})
		blk.Bindings = append(blk.Bindings, lv)
		loops = append(loops, &loopir.For{Var: lv, Min: loopir.Int(0), Extent: t.Shape[k]})
	}
	rv := loopir.NewVar(t.Name + "_r0")
	blk.Iters = append(blk.Iters, ar.axis)
	blk.Bindings = append(blk.Bindings, rv)
	loops = append(loops, &loopir.For{Var: rv, Min: loopir.Int(0), Extent: ar.axis.Extent})
	comb, op := loopir.MinReduce, loopir.LT
	if ar.max {
		comb, op = loopir.MaxReduce, loopir.GT
	}
	val := &loopir.Load{Buf: ar.value.buf, Index: idx}
	better := loopir.Bin(op, src, val)
	if src.DType().IsFloat() {
		// NaN is the best of all (numpy's argmax and argmin): the first NaN is taken
		// and kept
		better = loopir.Bin(loopir.Or, better, loopir.Bin(loopir.And, loopir.Bin(loopir.NE, src, src), loopir.Bin(loopir.EQ, val, val)))
	}
	blk.Init = loopir.Seq{
		&loopir.Store{Buf: ar.value.buf, Index: idx, Value: comb.Identity(ar.value.DT)},
		&loopir.Store{Buf: t.buf, Index: idx, Value: loopir.Int(0)},
	}
	blk.Body = loopir.Seq{
		&loopir.Store{Buf: t.buf, Index: idx, Value: &loopir.Select{Cond: better, T: ar.axis.Var, F: &loopir.Load{Buf: t.buf, Index: idx}}},
		&loopir.Store{Buf: ar.value.buf, Index: idx, Value: &loopir.Select{Cond: better, T: src, F: val}},
	}
	for _, dep := range reads(src) {
		blk.Reads = append(blk.Reads, wholeRegion(dep.buf))
	}
	for _, b := range []*loopir.Buffer{t.buf, ar.value.buf} {
		w := loopir.Region{Buf: b}
		for _, i := range idx {
			w.Ranges = append(w.Ranges, [2]loopir.Expr{i, loopir.Int(1)})
		}
		blk.Writes = append(blk.Writes, w)
	}
	var s loopir.Stmt = blk
	for k := len(loops) - 1; k >= 0; k-- {
		loops[k].Body = s
		s = loops[k]
	}
	return s
}
