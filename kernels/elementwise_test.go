package kernels_test

import (
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/internal/kerneltest"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/schedule"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// TestElementwiseChainBroadcast: Y = Relu(X·S + B) with X [n, 24], S [24] (broadcast
// over rows) and B [n, 1] (broadcast over columns); the two intermediates are inlined,
// the rows run in parallel and the columns are vectorized, then the result is compared
// with Mul → Add → Relu on the reference evaluator.
func TestElementwiseChainBroadcast(t *testing.T) {
	const n, c = 5, 24
	xv, sv, bv := rnd(41, n*c), rnd(42, c), rnd(43, n)
	shapes(t, "n", n, func(t *testing.T, rows loopir.Expr, dims []int64) {
		x := te.Placeholder("X", tensor.Float32, rows, loopir.Int(c))
		sc := te.Placeholder("S", tensor.Float32, loopir.Int(c))
		b := te.Placeholder("B", tensor.Float32, rows, loopir.Int(1))
		mul := te.Compute("mul", []loopir.Expr{rows, loopir.Int(c)}, func(i []loopir.Expr) loopir.Expr {
			return te.Mul(x.At(i[0], i[1]), sc.At(i[1]))
		})
		add := te.Compute("add", []loopir.Expr{rows, loopir.Int(c)}, func(i []loopir.Expr) loopir.Expr {
			return te.Add(mul.At(i[0], i[1]), b.At(i[0], loopir.Int(0)))
		})
		y := te.Compute("relu", []loopir.Expr{rows, loopir.Int(c)}, func(i []loopir.Expr) loopir.Expr {
			return te.MaxOf(add.At(i[0], i[1]), loopir.Float(0, tensor.Float32))
		})
		f, err := te.Lower("chain", []*te.Tensor{x, sc, b}, []*te.Tensor{y})
		if err != nil {
			t.Fatal(err)
		}
		s := schedule.New(f)
		for _, name := range []string{"mul", "add"} {
			blk, err := s.GetBlock(name)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.ComputeInline(blk); err != nil {
				t.Fatal(err)
			}
		}
		blk, _ := s.GetBlock("relu")
		l, _ := s.GetLoops(blk)
		if err := s.Parallel(l[0]); err != nil {
			t.Fatal(err)
		}
		if err := s.Vectorize(l[1]); err != nil {
			t.Fatal(err)
		}
		got := kerneltest.Run(t, s.Func(), dims, n*c, xv, sv, bv)
		prod := refRun(t, graph.OpMul, nil, []*tensor.Tensor{ts(tensor.Shape{n, c}, xv), ts(tensor.Shape{c}, sv)})
		sum := refRun(t, graph.OpAdd, nil, []*tensor.Tensor{prod, ts(tensor.Shape{n, 1}, bv)})
		check(t, "elementwise chain", got, refRun(t, graph.OpRelu, nil, []*tensor.Tensor{sum}))
	})
}

// TestStagesShareStorage runs Y = (2X + 1)² − 1 through three intermediates, the first
// and last of which share one allocation after the reuse-local-storage pass.
func TestStagesShareStorage(t *testing.T) {
	shapes(t, "n", 37, func(t *testing.T, n loopir.Expr, dims []int64) {
		sh := []loopir.Expr{n}
		x := te.Placeholder("X", tensor.Float32, sh...)
		p1 := te.Compute("P1", sh, func(i []loopir.Expr) loopir.Expr { return te.Mul(x.At(i[0]), loopir.Float(2, tensor.Float32)) })
		p2 := te.Compute("P2", sh, func(i []loopir.Expr) loopir.Expr { return te.Add(p1.At(i[0]), loopir.Float(1, tensor.Float32)) })
		p3 := te.Compute("P3", sh, func(i []loopir.Expr) loopir.Expr { return te.Mul(p2.At(i[0]), p2.At(i[0])) })
		y := te.Compute("Y", sh, func(i []loopir.Expr) loopir.Expr { return te.Sub(p3.At(i[0]), loopir.Float(1, tensor.Float32)) })
		xv := rnd(61, 37)
		got := compileRun(t, []*te.Tensor{x}, y, dims, 37, xv)
		want := make([]float32, 37)
		for i, v := range xv {
			want[i] = (2*v+1)*(2*v+1) - 1
		}
		check(t, "stages", got, ts(tensor.Shape{37}, want))
	})
}
