package codegen_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/codegen"
	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/internal/kerneltest"
	"github.com/kilnrt/kiln/internal/testdata"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

var checked = codegen.COptions{ExternRuntime: true, BoundsCheck: true}

// lowerAddRows is Y = A + B over [rows, 64] with the generic rule: a parallel row loop
// around a vector loop.
func lowerAddRows(t *testing.T) *loopir.PrimFunc {
	t.Helper()
	rows := te.Dim("rows")
	a := te.Placeholder("A", tensor.Float32, rows, loopir.Int(64))
	b := te.Placeholder("B", tensor.Float32, rows, loopir.Int(64))
	y := te.Compute("Y", a.Shape, func(i []loopir.Expr) loopir.Expr { return te.Add(a.At(i...), b.At(i...)) })
	f, err := te.Lower("add_rows", []*te.Tensor{a, b}, []*te.Tensor{y})
	if err != nil {
		t.Fatal(err)
	}
	return lowerGeneric(t, f)
}

// lowerGather is Y[j, :] = X[I[j], :] with the index checked, as in TestGoldenGatherIndexCheck.
func lowerGather(t *testing.T) *loopir.PrimFunc {
	t.Helper()
	rows, n := te.Dim("rows"), te.Dim("n")
	x := te.Placeholder("X", tensor.Float32, rows, loopir.Int(64))
	ind := te.Placeholder("I", tensor.Int64, n)
	y := te.Compute("Y", []loopir.Expr{n, loopir.Int(64)}, func(i []loopir.Expr) loopir.Expr {
		return x.At(te.CheckedIndex(ind.At(i[0]), rows), i[1])
	})
	f, err := te.Lower("gather", []*te.Tensor{x, ind}, []*te.Tensor{y})
	if err != nil {
		t.Fatal(err)
	}
	return lowerGeneric(t, f)
}

// TestGoldenDefaultBuildHasNoBoundsChecks: without BoundsCheck the add kernel is printed
// as it always was (the golden file predates the checked mode), no helper, no check.
func TestGoldenDefaultBuildHasNoBoundsChecks(t *testing.T) {
	src, err := codegen.EmitCWith(codegen.COptions{ExternRuntime: true}, lowerAddRows(t))
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "add_rows.c", src.Code)
	if strings.Contains(src.Code, "kiln_bc") {
		t.Error("a default build calls a bounds check")
	}
}

// TestGoldenBoundsCheckedAdd: the vector loop's loads and store are checked as whole
// vectors before the loop (which stays a plain vector loop), the parallel chunks record
// a failure in their env, merged at the join, and the kernel returns the status.
func TestGoldenBoundsCheckedAdd(t *testing.T) {
	src, err := codegen.EmitCWith(checked, lowerAddRows(t))
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "add_rows_bounds_check.c", src.Code)
}

// TestGoldenBoundsCheckedGather: the index load, the gathered row (a vector whose base
// is the checked index) and the store are all checked.
func TestGoldenBoundsCheckedGather(t *testing.T) {
	src, err := codegen.EmitCWith(checked, lowerGather(t))
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "gather_bounds_check.c", src.Code)
}

// buildChecked compiles f (already lowered) with bounds checks and returns the device
// and the loaded kernel; it skips the test without a C compiler.
func buildChecked(t *testing.T, f *loopir.PrimFunc) (*cpu.Device, devices.Kernel) {
	t.Helper()
	src, err := codegen.EmitCWith(codegen.COptions{BoundsCheck: true}, f)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := cpu.Open(cpu.Options{Threads: 2})
	if errors.Is(err, devices.ErrUnavailable) {
		testdata.NoCompiler(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	bin, err := dev.Compiler().Build(context.Background(), src.Code)
	if err != nil {
		t.Fatalf("%v\n%s", err, src.Code)
	}
	mod, err := dev.Load(bin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mod.Close() })
	k, err := mod.Kernel(src.Kernels[0])
	if err != nil {
		t.Fatal(err)
	}
	return dev, k
}

// overrun is Y[i] = X[min(i, n-1)] + 1 for i in [0, n + extra): with extra = 1 its last
// store is one past the end of Y (n elements). The store is checked before the loop as a
// range, or, with guarded, under an always-true condition, one element at a time.
func overrun(kind loopir.ForKind, extra int64, guarded bool) *loopir.PrimFunc {
	n, i := loopir.NewVar("n"), loopir.NewVar("i")
	x := &loopir.Buffer{Name: "X", DT: tensor.Float32, Shape: []loopir.Expr{n}, Scope: "global"}
	y := &loopir.Buffer{Name: "Y", DT: tensor.Float32, Shape: []loopir.Expr{n}, Scope: "global"}
	store := &loopir.Store{Buf: y, Index: []loopir.Expr{i}, Value: loopir.Bin(loopir.Add,
		&loopir.Load{Buf: x, Index: []loopir.Expr{loopir.Bin(loopir.Min, i, loopir.Bin(loopir.Sub, n, loopir.Int(1)))}},
		loopir.Float(1, tensor.Float32))}
	var body loopir.Stmt = store
	if guarded {
		body = &loopir.IfThenElse{Cond: loopir.Bin(loopir.GE, i, loopir.Int(0)), Then: store}
	}
	return &loopir.PrimFunc{Name: "overrun", Params: []*loopir.Buffer{x, y}, Dims: []*loopir.Var{n},
		Body: &loopir.For{Var: i, Min: loopir.Int(0), Extent: loopir.Bin(loopir.Add, n, loopir.Int(extra)), Kind: kind, Body: body}}
}

// TestStoreOnePastTheEndIsReported: a loop whose store runs one past the end of its
// output, serial, vectorized or parallel, checked as a range before the loop or element
// by element, makes the kernel return StatusOutOfBounds with the output's number and
// the offset, instead of writing past the buffer; the same loop in bounds passes.
func TestStoreOnePastTheEndIsReported(t *testing.T) {
	const n = 37
	x := make([]float32, n)
	for _, kind := range []loopir.ForKind{loopir.Serial, loopir.Vectorized, loopir.Unrolled, loopir.Parallel} {
		for _, guarded := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/guarded=%v", kind, guarded), func(t *testing.T) {
				dev, k := buildChecked(t, overrun(kind, 1, guarded))
				_, err := kerneltest.Launch(dev, k, []int64{n}, n, x)
				var ke *devices.KernelError
				if !errors.As(err, &ke) || ke.Code != codegen.StatusOutOfBounds || ke.Detail != [2]int64{1, n} {
					t.Fatalf("got %v (%+v), want status %d for buffer 1 at element %d", err, ke, codegen.StatusOutOfBounds, n)
				}
				dev, k = buildChecked(t, overrun(kind, 0, guarded))
				got, err := kerneltest.Launch(dev, k, []int64{n}, n, x)
				if err != nil || got[n-1] != 1 {
					t.Fatalf("in bounds: %v, %v", got, err)
				}
			})
		}
	}
}

// TestBoundsCheckedKernelsMatchRef runs checked builds of scheduled kernels (parallel
// vector loops, a gather, vector reductions, a tensorized matmul with tails) on data
// and compares them with the reference: no check fires on a correct kernel, and the
// checks do not change results.
func TestBoundsCheckedKernelsMatchRef(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	run := func(f *loopir.PrimFunc, dims []int64, outLen int, in ...[]float32) []float32 {
		t.Helper()
		dev, k := buildChecked(t, f)
		got, err := kerneltest.Launch(dev, k, dims, outLen, in...)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	t.Run("add", func(t *testing.T) {
		a, b := randN(r, 3*64), randN(r, 3*64)
		got := run(lowerAddRows(t), []int64{3}, 3*64, a, b)
		want := kerneltest.Ref(t, graph.OpAdd, nil, []*tensor.Tensor{
			tensor.MustFromSlice(tensor.Shape{3, 64}, a), tensor.MustFromSlice(tensor.Shape{3, 64}, b)})
		kerneltest.Close(t, "add", got, want)
	})
	t.Run("softmax", func(t *testing.T) {
		x := randN(r, 5*19)
		got := run(lowerSoftmaxRows(t), []int64{5, 19}, 5*19, x)
		want := kerneltest.Ref(t, graph.OpSoftmax, &graph.SoftmaxAttrs{Axis: 1}, []*tensor.Tensor{tensor.MustFromSlice(tensor.Shape{5, 19}, x)})
		kerneltest.Close(t, "softmax", got, want)
	})
	t.Run("matmul_packed", func(t *testing.T) {
		low := lowerPackedMatMul(t)
		const m = 7
		av, bv := randN(r, m*64), randN(r, 64*40)
		got := run(low, []int64{m}, m*40, av, bv)
		want := kerneltest.Ref(t, graph.OpMatMul, nil, []*tensor.Tensor{
			tensor.MustFromSlice(tensor.Shape{m, 64}, av), tensor.MustFromSlice(tensor.Shape{64, 40}, bv)})
		kerneltest.Close(t, "matmul", got, want)
	})
}
