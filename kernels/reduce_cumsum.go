package kernels

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// computeCumSum is CumSum: out[.., i, ..] is the sum of x[.., k, ..] along the axis over
// k <= i (k < i when exclusive; k >= i and k > i when reversed), a reduction over the
// whole axis whose excluded terms are zero. A constant axis reduces over that axis's
// extent. A run-time axis a (te.CheckedIndex: one outside [-rank, rank) fails the
// kernel) reduces over the largest extent K and reads, on each axis j, k where j = a
// and the output's index elsewhere; terms with k beyond a's extent are zero and their
// reads are clamped into bounds.
func computeCumSum(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	x, axis := in[0].T, in[1].T
	dt := x.DT
	if !dt.IsNumeric() || halfFloat(dt) {
		return nil, Unsupported("CumSum on %v", dt)
	}
	if !axis.DT.IsInt() || len(axis.Shape) > 1 || (len(axis.Shape) == 1 && !isOne(axis.Shape[0])) {
		return nil, Unsupported("CumSum with an axis of type %v%v", axis.DT, axis.Shape)
	}
	r := len(x.Shape)
	if r == 0 {
		return nil, Unsupported("CumSum of a scalar")
	}
	a := attrs[graph.CumSumAttrs](n)
	cmp := map[[2]bool]loopir.BinOp{
		{false, false}: loopir.LE, {true, false}: loopir.LT, // k <= i, k < i
		{false, true}: loopir.GE, {true, true}: loopir.GT, // k >= i, k > i
	}[[2]bool{a.Exclusive != 0, a.Reverse != 0}]
	if axes, ok := ConstInts(in, 1); ok && len(axes) == 1 {
		ax, err := NormAxis(axes[0], r)
		if err != nil {
			return nil, err
		}
		k := te.RAxis("k", x.Shape[ax])
		out := te.Compute("cumsum", x.Shape, func(i []loopir.Expr) loopir.Expr {
			src := append([]loopir.Expr{}, i...)
			src[ax] = k.Var
			return te.Sum(te.Select(loopir.Bin(cmp, k.Var, i[ax]), x.At(src...), zeroOf(dt)), k)
		})
		return []*te.Tensor{out}, nil
	}
	ext, err := Extents(x)
	if err != nil {
		return nil, err
	}
	longest := int64(0)
	for _, e := range ext {
		longest = max(longest, e)
	}
	k := te.RAxis("k", i64(longest))
	out := te.Compute("cumsum", x.Shape, func(i []loopir.Expr) loopir.Expr {
		ax := te.CheckedIndex(axis.At(zeros(len(axis.Shape))...), i64(int64(r)))
		var pos, extent loopir.Expr = i[r-1], i64(ext[r-1]) // the output's index on the axis, its extent
		for j := r - 2; j >= 0; j-- {
			on := loopir.Bin(loopir.EQ, ax, i64(int64(j)))
			pos, extent = te.Select(on, i[j], pos), te.Select(on, i64(ext[j]), extent)
		}
		src := make([]loopir.Expr, r)
		for j := range src {
			src[j] = te.Select(loopir.Bin(loopir.EQ, ax, i64(int64(j))), clampIndex(k.Var, ext[j]), i[j])
		}
		keep := loopir.Bin(loopir.And, loopir.Bin(loopir.LT, k.Var, extent), loopir.Bin(cmp, k.Var, pos))
		return te.Sum(te.Select(keep, x.At(src...), zeroOf(dt)), k)
	})
	return []*te.Tensor{out}, nil
}

func zeroOf(dt tensor.DType) loopir.Expr {
	if dt.IsFloat() {
		return loopir.Float(0, dt)
	}
	return &loopir.IntImm{V: 0, DT: dt}
}
