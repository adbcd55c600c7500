package kernels_test

import (
	"github.com/kilnrt/kiln/kernels"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/internal/kerneltest"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// compileRun lowers out from inputs and runs it through kerneltest.
func compileRun(t *testing.T, inputs []*te.Tensor, out *te.Tensor, dims []int64, outLen int, data ...[]float32) []float32 {
	t.Helper()
	f, err := te.Lower(out.Name, inputs, []*te.Tensor{out})
	if err != nil {
		t.Fatal(err)
	}
	return kerneltest.Run(t, f, dims, outLen, data...)
}

var (
	refRun = kerneltest.Ref
	check  = kerneltest.Close
	rnd    = kerneltest.Random
)

func ts(shape tensor.Shape, v []float32) *tensor.Tensor { return tensor.MustFromSlice(shape, v) }

func TestConv2D(t *testing.T) {
	cases := []struct {
		name                    string
		c, h, w, m, k, s, p, dl int64
		groups                  int64
		symbolicBatch           bool
	}{
		{"3x3 pad1", 4, 9, 9, 8, 3, 1, 1, 1, 1, true},
		{"stride2 dilation2", 3, 11, 10, 5, 3, 2, 2, 2, 1, false},
		{"depthwise", 6, 8, 8, 6, 3, 1, 1, 1, 6, true},
		{"grouped 1x1", 8, 5, 5, 4, 1, 1, 0, 1, 2, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			const n = 2
			var batch loopir.Expr = loopir.Int(n)
			var dims []int64
			if c.symbolicBatch {
				batch = te.Dim("n")
				dims = []int64{n}
			}
			x := te.Placeholder("x", tensor.Float32, batch, loopir.Int(c.c), loopir.Int(c.h), loopir.Int(c.w))
			w := te.Placeholder("w", tensor.Float32, loopir.Int(c.m), loopir.Int(c.c/c.groups), loopir.Int(c.k), loopir.Int(c.k))
			out, err := kernels.Conv2D(x, w, kernels.Conv2DAttrs{Strides: [2]int64{c.s, c.s}, Pads: [2]int64{c.p, c.p}, Dilations: [2]int64{c.dl, c.dl}, Groups: c.groups})
			if err != nil {
				t.Fatal(err)
			}
			xv, wv := rnd(1, int(n*c.c*c.h*c.w)), rnd(2, int(c.m*(c.c/c.groups)*c.k*c.k))
			oh := (c.h+2*c.p-c.dl*(c.k-1)-1)/c.s + 1
			ow := (c.w+2*c.p-c.dl*(c.k-1)-1)/c.s + 1
			got := compileRun(t, []*te.Tensor{x, w}, out, dims, int(n*c.m*oh*ow), xv, wv)
			want := refRun(t, graph.OpConv, &graph.ConvAttrs{AutoPad: "NOTSET", Group: c.groups,
				Strides: []int64{c.s, c.s}, Pads: []int64{c.p, c.p, c.p, c.p}, Dilations: []int64{c.dl, c.dl}},
				[]*tensor.Tensor{ts(tensor.Shape{n, int(c.c), int(c.h), int(c.w)}, xv), ts(tensor.Shape{int(c.m), int(c.c / c.groups), int(c.k), int(c.k)}, wv)})
			check(t, c.name, got, want)
		})
	}
}

// shapes runs a test with a leading extent that is symbolic (a runtime dim) and static.
func shapes(t *testing.T, name string, value int64, f func(t *testing.T, lead loopir.Expr, dims []int64)) {
	t.Run("symbolic", func(t *testing.T) { f(t, te.Dim(name), []int64{value}) })
	t.Run("static", func(t *testing.T) { f(t, loopir.Int(value), nil) })
}

func TestPool2D(t *testing.T) {
	for _, isMax := range []bool{true, false} {
		shapes(t, "n", 2, func(t *testing.T, batch loopir.Expr, dims []int64) {
			x := te.Placeholder("x", tensor.Float32, batch, loopir.Int(3), loopir.Int(9), loopir.Int(9))
			out, err := kernels.Pool2D(x, [2]int64{3, 3}, [2]int64{2, 2}, [2]int64{1, 1}, isMax)
			if err != nil {
				t.Fatal(err)
			}
			xv := rnd(3, 2*3*9*9)
			got := compileRun(t, []*te.Tensor{x}, out, dims, 2*3*5*5, xv)
			op := graph.OpAveragePool
			if isMax {
				op = graph.OpMaxPool
			}
			want := refRun(t, op, &graph.PoolAttrs{AutoPad: "NOTSET", KernelShape: []int64{3, 3}, Strides: []int64{2, 2}, Pads: []int64{1, 1, 1, 1}, P: 2},
				[]*tensor.Tensor{ts(tensor.Shape{2, 3, 9, 9}, xv)})
			check(t, op.String(), got, want)
		})
	}
}

func TestSoftmaxLayerNormReduce(t *testing.T) {
	const r, n = 5, 33
	xv := rnd(4, r*n)
	xt := ts(tensor.Shape{r, n}, xv)
	shapes(t, "rows", r, func(t *testing.T, rows loopir.Expr, dims []int64) {
		x := te.Placeholder("x", tensor.Float32, rows, loopir.Int(n))
		got := compileRun(t, []*te.Tensor{x}, kernels.Softmax(x), dims, r*n, xv)
		check(t, "softmax", got, refRun(t, graph.OpSoftmax, &graph.SoftmaxAttrs{Axis: -1}, []*tensor.Tensor{xt}))

		gamma := te.Placeholder("gamma", tensor.Float32, loopir.Int(n))
		beta := te.Placeholder("beta", tensor.Float32, loopir.Int(n))
		gv, bv := rnd(5, n), rnd(6, n)
		got = compileRun(t, []*te.Tensor{x, gamma, beta}, kernels.LayerNorm(x, gamma, beta, 1e-5), dims, r*n, xv, gv, bv)
		check(t, "layernorm", got, refRun(t, graph.OpLayerNormalization, &graph.LayerNormAttrs{Axis: -1, Epsilon: 1e-5, StashType: 1},
			[]*tensor.Tensor{xt, ts(tensor.Shape{n}, gv), ts(tensor.Shape{n}, bv)}))

		axes := tensor.MustFromSlice(tensor.Shape{1}, []int64{-1})
		got = compileRun(t, []*te.Tensor{x}, kernels.ReduceLast(x, false), dims, r, xv)
		check(t, "reduce sum", got, refRun(t, graph.OpReduceSum, &graph.ReduceAttrs{KeepDims: 0}, []*tensor.Tensor{xt}, axes))
		got = compileRun(t, []*te.Tensor{x}, kernels.ReduceLast(x, true), dims, r, xv)
		check(t, "reduce max", got, refRun(t, graph.OpReduceMax, &graph.ReduceAttrs{KeepDims: 0}, []*tensor.Tensor{xt}, axes))
	})
}

func TestMatMulDefinition(t *testing.T) {
	av, bv := rnd(7, 3*24), rnd(8, 24*10)
	shapes(t, "m", 3, func(t *testing.T, m loopir.Expr, dims []int64) {
		a := te.Placeholder("a", tensor.Float32, m, loopir.Int(24))
		b := te.Placeholder("b", tensor.Float32, loopir.Int(24), loopir.Int(10))
		got := compileRun(t, []*te.Tensor{a, b}, kernels.MatMul(a, b), dims, 30, av, bv)
		check(t, "matmul", got, refRun(t, graph.OpMatMul, nil, []*tensor.Tensor{ts(tensor.Shape{3, 24}, av), ts(tensor.Shape{24, 10}, bv)}))
	})
}

// TestBatchMatMul covers batched and transposed products (the transposed operands are
// checked against MatMul of explicitly transposed reference inputs).
func TestBatchMatMul(t *testing.T) {
	const batch, m, k, n = 3, 4, 9, 5
	for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
		shapes(t, "b", batch, func(t *testing.T, bd loopir.Expr, dims []int64) {
			ashape := []loopir.Expr{bd, loopir.Int(m), loopir.Int(k)}
			aref := tensor.Shape{batch, m, k}
			if tr[0] {
				ashape[1], ashape[2] = ashape[2], ashape[1]
				aref = tensor.Shape{batch, k, m}
			}
			bshape := []loopir.Expr{bd, loopir.Int(k), loopir.Int(n)}
			bref := tensor.Shape{batch, k, n}
			if tr[1] {
				bshape[1], bshape[2] = bshape[2], bshape[1]
				bref = tensor.Shape{batch, n, k}
			}
			a := te.Placeholder("a", tensor.Float32, ashape...)
			b := te.Placeholder("b", tensor.Float32, bshape...)
			av, bv := rnd(9, batch*m*k), rnd(10, batch*k*n)
			got := compileRun(t, []*te.Tensor{a, b}, kernels.BatchMatMul(a, b, tr[0], tr[1]), dims, batch*m*n, av, bv)
			at, bt := ts(aref, av), ts(bref, bv)
			perm := &graph.TransposeAttrs{Perm: []int64{0, 2, 1}}
			if tr[0] {
				at = refRun(t, graph.OpTranspose, perm, []*tensor.Tensor{at})
			}
			if tr[1] {
				bt = refRun(t, graph.OpTranspose, perm, []*tensor.Tensor{bt})
			}
			check(t, "batch matmul", got, refRun(t, graph.OpMatMul, nil, []*tensor.Tensor{at, bt}))
		})
	}
}
