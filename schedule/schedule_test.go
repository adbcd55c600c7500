package schedule

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/kilnrt/kiln/codegen"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/internal/kerneltest"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/loopir/passes"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

var update = flag.Bool("update", false, "rewrite golden files")

// matmul lowers C[m, n] = sum_k A[m, k] * B[k, n] with symbolic m, n and k = 64.
func matmul(t *testing.T) *loopir.PrimFunc {
	t.Helper()
	m, n, k := te.Dim("m"), te.Dim("n"), loopir.Int(64)
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
	return f
}

// tile applies a small register-tiling schedule: split n by 8, k by 4, reorder so the
// n-tile is innermost, vectorize it, unroll the k-tile.
func tile(t *testing.T, s *Schedule) {
	t.Helper()
	b, err := s.GetBlock("C")
	if err != nil {
		t.Fatal(err)
	}
	loops, err := s.GetLoops(b)
	if err != nil {
		t.Fatal(err)
	}
	j, err := s.Split(loops[1], []int64{-1, 8})
	if err != nil {
		t.Fatal(err)
	}
	k, err := s.Split(loops[2], []int64{-1, 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Reorder(loops[0], j[0], k[0], k[1], j[1]); err != nil {
		t.Fatal(err)
	}
	if err := s.Vectorize(j[1]); err != nil {
		t.Fatal(err)
	}
	if err := s.Unroll(k[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DecomposeReduction(b, k[0]); err != nil {
		t.Fatal(err)
	}
	if err := loopir.Verify(s.Func()); err != nil {
		t.Fatalf("scheduled function does not verify: %v", err)
	}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs:\n%s", path, got)
	}
}

func emit(t *testing.T, f *loopir.PrimFunc) string {
	t.Helper()
	g, err := passes.CPUPipeline().Run(f)
	if err != nil {
		t.Fatal(err)
	}
	src, err := codegen.EmitC(g)
	if err != nil {
		t.Fatal(err)
	}
	return src.Code
}

func TestTileBeforeAfter(t *testing.T) {
	f := matmul(t)
	before := loopir.Print(f)
	s := New(f)
	tile(t, s)
	golden(t, "matmul_tiled.loopir", loopir.Print(s.Func()))
	golden(t, "matmul_tiled.trace", s.Trace().String())
	if loopir.Print(f) != before {
		t.Error("scheduling modified the original function")
	}
}

func TestTraceReplayGivesIdenticalC(t *testing.T) {
	s := New(matmul(t))
	tile(t, s)
	text := s.Trace().String()
	parsed, err := ParseTrace(text)
	if err != nil {
		t.Fatal(err)
	}
	if parsed.String() != text {
		t.Fatalf("trace does not round-trip:\n%s\nvs\n%s", text, parsed.String())
	}
	replayed, err := parsed.Replay(matmul(t))
	if err != nil {
		t.Fatal(err)
	}
	if a, b := emit(t, s.Func()), emit(t, replayed.Func()); a != b {
		t.Errorf("replayed schedule gives different C:\n%s\nvs\n%s", a, b)
	}
}

func TestPreconditions(t *testing.T) {
	s := New(matmul(t))
	b, _ := s.GetBlock("C")
	loops, _ := s.GetLoops(b)
	checks := map[string]error{
		"split factors":       func() error { _, err := s.Split(loops[0], []int64{-1, -1}); return err }(),
		"split one factor":    func() error { _, err := s.Split(loops[0], []int64{4}); return err }(),
		"parallel reduction":  s.Parallel(loops[2]),
		"vectorize outer":     s.Vectorize(loops[0]),
		"reorder not a nest":  s.Reorder(loops[0], loops[2]),
		"fuse not nested":     func() error { _, err := s.Fuse(loops[0], loops[2]); return err }(),
		"unknown block":       func() error { _, err := s.GetBlock("nope"); return err }(),
		"reorder repeated":    s.Reorder(loops[0], loops[0]),
		"unknown loop handle": s.Unroll("l99"),
		"decompose unknown":   func() error { _, err := s.DecomposeReduction("b99", loops[0]); return err }(),
	}
	for name, err := range checks {
		if !errors.Is(err, ErrSchedule) {
			t.Errorf("%s: got %v, want ErrSchedule", name, err)
		}
	}
	if got := loopir.Print(s.Func()); got != loopir.Print(matmul(t)) {
		t.Error("failed primitives changed the function")
	}
	if _, err := ParseTrace("split(l0, [1, 2"); err == nil {
		t.Error("bad trace accepted")
	}
}

// TestScheduledMatmulRuns checks the tiled and fused kernel against the reference, with
// n not a multiple of the split factor (the block predicate must hold).
func TestScheduledMatmulRuns(t *testing.T) {
	s := New(matmul(t))
	tile(t, s)
	b, _ := s.GetBlock("C")
	loops, _ := s.GetLoops(b)
	if _, err := s.Fuse(loops[0], loops[1]); err != nil {
		t.Fatal(err)
	}
	if err := loopir.Verify(s.Func()); err != nil {
		t.Fatalf("fused function does not verify: %v", err)
	}
	const m, n = 3, 13
	a, bm := kerneltest.Random(1, m*64), kerneltest.Random(2, 64*n)
	got := kerneltest.Run(t, s.Func(), []int64{m, n}, m*n, a, bm)
	want := kerneltest.Ref(t, graph.OpMatMul, nil, []*tensor.Tensor{
		tensor.MustFromSlice(tensor.Shape{m, 64}, a), tensor.MustFromSlice(tensor.Shape{64, n}, bm)})
	kerneltest.Close(t, "scheduled matmul", got, want)
}

func TestDecomposeRequiresEnclosingReductionLoops(t *testing.T) {
	s := New(matmul(t))
	b, _ := s.GetBlock("C")
	loops, _ := s.GetLoops(b)
	// put the reduction loop outermost; decomposing at the spatial loop below it is illegal
	if err := s.Reorder(loops[2], loops[0], loops[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DecomposeReduction(b, loops[0]); !errors.Is(err, ErrSchedule) {
		t.Errorf("got %v, want ErrSchedule", err)
	}
	if _, err := s.DecomposeReduction(b, loops[2]); err != nil {
		t.Errorf("decomposing at the outermost reduction loop: %v", err)
	}
	if _, err := s.DecomposeReduction(b, loops[2]); !errors.Is(err, ErrSchedule) {
		t.Errorf("second decomposition (no init left): %v", err)
	}
}

// TestVectorizeReduction: a reduction loop may be vectorized only once its block's init
// is decomposed out (the code generator then emits a vector reduction); a loop over a
// block that still initializes inside it is refused.
func TestVectorizeReduction(t *testing.T) {
	s := New(matmul(t))
	b, _ := s.GetBlock("C")
	loops, _ := s.GetLoops(b)
	if err := s.Vectorize(loops[2]); !errors.Is(err, ErrSchedule) {
		t.Errorf("vectorizing k with the init inside: %v, want ErrSchedule", err)
	}
	if _, err := s.DecomposeReduction(b, loops[2]); err != nil {
		t.Fatal(err)
	}
	if err := s.Vectorize(loops[2]); err != nil {
		t.Errorf("vectorizing the decomposed sum over k: %v", err)
	}
	if err := s.Vectorize(loops[1]); !errors.Is(err, ErrSchedule) {
		t.Errorf("vectorizing a loop that is not innermost: %v, want ErrSchedule", err)
	}
}
