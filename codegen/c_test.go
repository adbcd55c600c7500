package codegen_test

import (
	"errors"
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/kilnrt/kiln/codegen"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/internal/kerneltest"
	"github.com/kilnrt/kiln/intrin"
	"github.com/kilnrt/kiln/kernels"
	kcpu "github.com/kilnrt/kiln/kernels/cpu"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/loopir/passes"
	"github.com/kilnrt/kiln/schedule"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

var update = flag.Bool("update", false, "rewrite golden files")

func lowerMatmul(t *testing.T) *loopir.PrimFunc {
	t.Helper()
	m, n := te.Dim("m"), te.Dim("n")
	k := loopir.Int(64)
	a := te.Placeholder("A", tensor.Float32, m, k)
	b := te.Placeholder("B", tensor.Float32, k, n)
	r := te.RAxis("k", k)
	c := te.Compute("C", []loopir.Expr{m, n}, func(i []loopir.Expr) loopir.Expr {
		return te.Sum(te.Mul(a.At(i[0], r.Var), b.At(r.Var, i[1])), r)
	})
	f, err := te.Lower("matmul", []*te.Tensor{a, b}, []*te.Tensor{c})
	if err != nil {
		t.Fatal(err)
	}
	g, err := passes.CPUPipeline().Run(f)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestGoldenMatmul(t *testing.T) {
	src, err := codegen.EmitC(lowerMatmul(t))
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "matmul.c", src.Code)
}

// TestGoldenTensorizedParallel covers the tensor intrinsic's definition, its call, the
// outlined parallel loops and the thread pool runtime.
func TestGoldenTensorizedParallel(t *testing.T) {
	low := lowerPackedMatMul(t)
	src, err := codegen.EmitC(low)
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "matmul_tensorized_parallel.c", src.Code)
}

func checkGolden(t *testing.T, name, code string) {
	t.Helper()
	src := codegen.Source{Code: code}
	golden := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(golden, []byte(src.Code), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if src.Code != string(want) {
		t.Errorf("generated C differs from %s:\n%s", golden, src.Code)
	}
}

func TestUnsupportedConstructsAreErrors(t *testing.T) {
	f := lowerMatmul(t)
	outer := f.Body.(loopir.Seq)[0].(*loopir.For)
	outer.Kind = loopir.Parallel
	outer.Body.(*loopir.For).Kind = loopir.Parallel
	if _, err := codegen.EmitC(f); !errors.Is(err, codegen.ErrUnsupported) {
		t.Errorf("nested parallel loops: %v", err)
	}
	unlowered := &loopir.PrimFunc{Name: "x", Body: &loopir.Block{Name: "b"}}
	if _, err := codegen.EmitC(unlowered); !errors.Is(err, codegen.ErrUnsupported) {
		t.Errorf("unlowered block: %v", err)
	}
}

// TestMatmulAgainstRef runs the generated matmul with symbolic m, n bound at run time.
func TestMatmulAgainstRef(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, mn := range [][2]int{{5, 7}, {1, 33}} {
		m, n := mn[0], mn[1]
		a, b := randN(r, m*64), randN(r, 64*n)
		got := kerneltest.Run(t, lowerMatmul(t), []int64{int64(m), int64(n)}, m*n, a, b)
		want := kerneltest.Ref(t, graph.OpMatMul, nil, []*tensor.Tensor{
			tensor.MustFromSlice(tensor.Shape{m, 64}, a), tensor.MustFromSlice(tensor.Shape{64, n}, b)})
		kerneltest.Close(t, "matmul", got, want)
	}
}

// TestElementwiseChainAgainstRef: out[i,j] = tanh(A[i,j] * B[j] + 1), broadcasting B.
func TestElementwiseChainAgainstRef(t *testing.T) {
	rows, cols := te.Dim("rows"), loopir.Int(16)
	a := te.Placeholder("A", tensor.Float32, rows, cols)
	b := te.Placeholder("B", tensor.Float32, cols)
	prod := te.Compute("P", []loopir.Expr{rows, cols}, func(i []loopir.Expr) loopir.Expr {
		return te.Mul(a.At(i[0], i[1]), b.At(i[1]))
	})
	out := te.Compute("Y", []loopir.Expr{rows, cols}, func(i []loopir.Expr) loopir.Expr {
		return te.Tanh(te.Add(prod.At(i[0], i[1]), loopir.Float(1, tensor.Float32)))
	})
	f, err := te.Lower("chain", []*te.Tensor{a, b}, []*te.Tensor{out})
	if err != nil {
		t.Fatal(err)
	}
	if f, err = passes.CPUPipeline().Run(f); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	av, bv := randN(r, 3*16), randN(r, 16)
	got := kerneltest.Run(t, f, []int64{3}, 3*16, av, bv)
	at, bt := tensor.MustFromSlice(tensor.Shape{3, 16}, av), tensor.MustFromSlice(tensor.Shape{16}, bv)
	mul := kerneltest.Ref(t, graph.OpMul, nil, []*tensor.Tensor{at, bt})
	add := kerneltest.Ref(t, graph.OpAdd, nil, []*tensor.Tensor{mul, tensor.MustFromSlice(tensor.Shape{1}, []float32{1})})
	kerneltest.Close(t, "chain", got, kerneltest.Ref(t, graph.OpTanh, nil, []*tensor.Tensor{add}))
}

// TestParallelMatmul splits the row loop across threads (the outlined body captures the
// outer loop variable) and checks the result against the reference.
func TestParallelMatmul(t *testing.T) {
	f := lowerMatmul(t)
	// make the outer (m) loop parallel directly on the lowered nest
	outer := f.Body.(loopir.Seq)[0].(*loopir.For)
	inner := outer.Body.(*loopir.For)
	f.Body = loopir.Seq{&loopir.For{Var: outer.Var, Min: outer.Min, Extent: outer.Extent, Body: &loopir.For{
		Var: inner.Var, Min: inner.Min, Extent: inner.Extent, Kind: loopir.Parallel, Body: inner.Body}}}
	r := rand.New(rand.NewPCG(7, 8))
	const m, n = 4, 37
	a, b := randN(r, m*64), randN(r, 64*n)
	got := kerneltest.Run(t, f, []int64{m, n}, m*n, a, b)
	want := kerneltest.Ref(t, graph.OpMatMul, nil, []*tensor.Tensor{
		tensor.MustFromSlice(tensor.Shape{m, 64}, a), tensor.MustFromSlice(tensor.Shape{64, n}, b)})
	kerneltest.Close(t, "matmul", got, want)
}

func randN(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = r.Float32()*2 - 1
	}
	return v
}

// TestGoldenSymbolicFused covers division by dims: inside a loop whose extent is a
// product of dims they are at least 1, so the fused loop's indices use C's / and %;
// the same division where no loop proves it stays a floor division.
func TestGoldenSymbolicFused(t *testing.T) {
	b, s := te.Dim("b"), te.Dim("s")
	x := te.Placeholder("X", tensor.Float32, b, s, loopir.Int(8))
	y := te.Compute("Y", x.Shape, func(i []loopir.Expr) loopir.Expr {
		return te.Mul(x.At(i...), loopir.Float(2, tensor.Float32))
	})
	first := te.Compute("First", []loopir.Expr{loopir.Int(1)}, func(i []loopir.Expr) loopir.Expr {
		return x.At(loopir.Int(0), loopir.Bin(loopir.Mod, loopir.Int(7), s), loopir.Int(0))
	})
	f, err := te.Lower("scale", []*te.Tensor{x}, []*te.Tensor{y, first})
	if err != nil {
		t.Fatal(err)
	}
	low := lowerGeneric(t, f)
	src, err := codegen.EmitCWith(codegen.COptions{ExternRuntime: true}, low)
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "symbolic_fused.c", src.Code)
}

// lowerSoftmaxRows schedules a softmax over the rows of a [rows, cols] matrix (both
// symbolic) with the generic rule: the row max and the row sum are reductions over
// the contiguous axis, emitted as vector reductions.
// lowerPackedMatMul is A[m,64]·B[64,40] with B packed, tensorized on the generic 4×4
// micro-kernel, its row blocks in parallel.
func lowerPackedMatMul(t *testing.T) *loopir.PrimFunc {
	t.Helper()
	g := intrin.GemmF32("generic", 4, 4, 2)
	a := te.Placeholder("A", tensor.Float32, te.Dim("m"), loopir.Int(64))
	b := te.Placeholder("B", tensor.Float32, loopir.Int(64), loopir.Int(40))
	c := kcpu.MatMulPacked(a, b, 0, g.NR)
	f, err := te.Lower("matmul_packed", []*te.Tensor{a, b}, []*te.Tensor{c})
	if err != nil {
		t.Fatal(err)
	}
	s := schedule.New(f)
	if err := kcpu.ScheduleMatMulPacked(s, g, kcpu.GemmConfig{KC: 32, MC: 2, Parallel: true}); err != nil {
		t.Fatal(err)
	}
	low, err := passes.CPUPipeline().Run(s.Func())
	if err != nil {
		t.Fatal(err)
	}
	return low
}

func lowerSoftmaxRows(t *testing.T) *loopir.PrimFunc {
	t.Helper()
	x := te.Placeholder("X", tensor.Float32, te.Dim("rows"), te.Dim("cols"))
	y, err := kernels.SoftmaxAxis(x, 1, graph.OpSoftmax)
	if err != nil {
		t.Fatal(err)
	}
	f, err := te.Lower("softmax_rows", []*te.Tensor{x}, []*te.Tensor{y})
	if err != nil {
		t.Fatal(err)
	}
	return lowerGeneric(t, f)
}

// lowerGeneric schedules f with the CPU generic rule and runs the CPU pass pipeline.
func lowerGeneric(t *testing.T, f *loopir.PrimFunc) *loopir.PrimFunc {
	t.Helper()
	sc := schedule.New(f)
	if err := kcpu.ScheduleGeneric(sc); err != nil {
		t.Fatal(err)
	}
	low, err := passes.CPUPipeline().Run(sc.Func())
	if err != nil {
		t.Fatal(err)
	}
	return low
}

func TestGoldenVectorReduction(t *testing.T) {
	src, err := codegen.EmitCWith(codegen.COptions{ExternRuntime: true}, lowerSoftmaxRows(t))
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "vector_reduction.c", src.Code)
}

// TestVectorReductionAgainstRef runs the vector reductions at row lengths below, at and
// around the vector width, and with no columns at all.
func TestVectorReductionAgainstRef(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	f := lowerSoftmaxRows(t)
	for _, rc := range [][2]int{{3, 1}, {2, 7}, {4, 8}, {5, 37}, {1, 300}, {2, 0}} {
		rows, cols := rc[0], rc[1]
		x := randN(r, rows*cols)
		for i := range x {
			x[i] *= 20 // exercise the max subtraction
		}
		got := kerneltest.Run(t, f, []int64{int64(rows), int64(cols)}, rows*cols, x)
		want := kerneltest.Ref(t, graph.OpSoftmax, &graph.SoftmaxAttrs{Axis: 1}, []*tensor.Tensor{tensor.MustFromSlice(tensor.Shape{rows, cols}, x)})
		kerneltest.Close(t, "softmax", got, want)
	}
}
