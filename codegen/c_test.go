package codegen

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/loopir/passes"
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
	src, err := EmitC(lowerMatmul(t))
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "matmul.c")
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
	if _, err := EmitC(f); !errors.Is(err, ErrUnsupported) {
		t.Errorf("nested parallel loops: %v", err)
	}
	unlowered := &loopir.PrimFunc{Name: "x", Body: &loopir.Block{Name: "b"}}
	if _, err := EmitC(unlowered); !errors.Is(err, ErrUnsupported) {
		t.Errorf("unlowered block: %v", err)
	}
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// runC compiles one kernel and runs it on the given inputs, returning the output floats.
func runC(t *testing.T, f *loopir.PrimFunc, dims []int64, outLen int, inputs ...[]float32) []float32 {
	t.Helper()
	dev, err := cpu.Open(cpu.Options{})
	if errors.Is(err, devices.ErrUnavailable) {
		t.Skipf("no C compiler: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	src, err := EmitC(f)
	if err != nil {
		t.Fatal(err)
	}
	bin, err := dev.Compiler().Build(context.Background(), src.Code)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := dev.Load(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close()
	k, err := mod.Kernel(src.Kernels[0])
	if err != nil {
		t.Fatal(err)
	}
	var bufs []devices.Buffer
	for _, in := range inputs {
		b, _ := dev.Alloc(int64(4 * len(in)))
		if err := dev.CopyIn(b, f32Bytes(in)); err != nil {
			t.Fatal(err)
		}
		bufs = append(bufs, b)
	}
	out, _ := dev.Alloc(int64(4 * outLen))
	bufs = append(bufs, out)
	if err := dev.Launch(k, devices.Geometry{}, bufs, dims); err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, 4*outLen)
	if err := dev.CopyOut(raw, out); err != nil {
		t.Fatal(err)
	}
	res := make([]float32, outLen)
	for i := range res {
		res[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return res
}

func randF32(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = r.Float32()*2 - 1
	}
	return v
}

// refEval runs one graph op on the reference evaluator.
func refEval(t *testing.T, op graph.Op, attrs any, ins ...*tensor.Tensor) *tensor.Tensor {
	t.Helper()
	b := graph.NewBuilder("main")
	var params []*graph.Value
	inputs := map[string]ref.Value{}
	for i, in := range ins {
		name := string(rune('a' + i))
		params = append(params, b.Param(name, graph.TensorType(in.DType, graph.StaticShape(toI64(in.Shape)...)...)))
		inputs[name] = in
	}
	out, err := b.Op1(op, attrs, params...)
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.Module(out)
	if err != nil {
		t.Fatal(err)
	}
	res, err := ref.Eval(m, inputs, ref.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return res[0].(*tensor.Tensor)
}

func toI64(s tensor.Shape) []int64 {
	out := make([]int64, len(s))
	for i, d := range s {
		out[i] = int64(d)
	}
	return out
}

func closeTo(t *testing.T, got []float32, want *tensor.Tensor) {
	t.Helper()
	w := want.Float64s()
	if len(got) != len(w) {
		t.Fatalf("%d values, want %d", len(got), len(w))
	}
	for i := range w {
		if d := math.Abs(float64(got[i]) - w[i]); d > 1e-4+1e-3*math.Abs(w[i]) {
			t.Fatalf("element %d: got %v want %v", i, got[i], w[i])
		}
	}
}

// TestMatmulAgainstRef runs the generated matmul with symbolic m, n bound at run time.
func TestMatmulAgainstRef(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, mn := range [][2]int{{5, 7}, {1, 33}} {
		m, n := mn[0], mn[1]
		a, b := randF32(r, m*64), randF32(r, 64*n)
		got := runC(t, lowerMatmul(t), []int64{int64(m), int64(n)}, m*n, a, b)
		want := refEval(t, graph.OpMatMul, nil,
			tensor.MustFromSlice(tensor.Shape{m, 64}, a), tensor.MustFromSlice(tensor.Shape{64, n}, b))
		closeTo(t, got, want)
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
	av, bv := randF32(r, 3*16), randF32(r, 16)
	got := runC(t, f, []int64{3}, 3*16, av, bv)
	at, bt := tensor.MustFromSlice(tensor.Shape{3, 16}, av), tensor.MustFromSlice(tensor.Shape{16}, bv)
	mul := refEval(t, graph.OpMul, nil, at, bt)
	add := refEval(t, graph.OpAdd, nil, mul, tensor.MustFromSlice(tensor.Shape{1}, []float32{1}))
	closeTo(t, got, refEval(t, graph.OpTanh, nil, add))
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
	a, b := randF32(r, m*64), randF32(r, 64*n)
	got := runC(t, f, []int64{m, n}, m*n, a, b)
	want := refEval(t, graph.OpMatMul, nil,
		tensor.MustFromSlice(tensor.Shape{m, 64}, a), tensor.MustFromSlice(tensor.Shape{64, n}, b))
	closeTo(t, got, want)
}
