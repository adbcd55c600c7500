package kernels_test

import (
	"math"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// TestArgMaxArgMinPairReduction: the index and value of a pair reduction come from one
// block; with ties in the data the first index must win, as ONNX ArgMax/ArgMin
// (select_last_index = 0) define. The index is cast to float32 for the comparison.
func TestArgMaxArgMinPairReduction(t *testing.T) {
	const n, c = 4, 17
	xv := rnd(51, n*c)
	for i := range xv {
		xv[i] = float32(math.Round(float64(xv[i]) * 3)) // values in {-3..3}: many ties
	}
	for _, isMax := range []bool{true, false} {
		shapes(t, "n", n, func(t *testing.T, rows loopir.Expr, dims []int64) {
			x := te.Placeholder("X", tensor.Float32, rows, loopir.Int(c))
			r := te.RAxis("r", loopir.Int(c))
			reduce := te.ArgMin
			op := graph.OpArgMin
			if isMax {
				reduce, op = te.ArgMax, graph.OpArgMax
			}
			idx, _ := reduce("arg", []loopir.Expr{rows}, r, func(i []loopir.Expr) loopir.Expr { return x.At(i[0], r.Var) })
			y := te.Compute("y", []loopir.Expr{rows}, func(i []loopir.Expr) loopir.Expr { return te.Cast(tensor.Float32, idx.At(i[0])) })
			got := compileRun(t, []*te.Tensor{x}, y, dims, n, xv)
			want := refRun(t, op, &graph.ArgAttrs{Axis: 1, KeepDims: 0}, []*tensor.Tensor{ts(tensor.Shape{n, c}, xv)})
			wf := make([]float32, n)
			for i, v := range want.Int64s() {
				wf[i] = float32(v)
			}
			check(t, op.String(), got, ts(tensor.Shape{n}, wf))
		})
	}
}
