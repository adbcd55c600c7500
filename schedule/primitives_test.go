package schedule

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/internal/kerneltest"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// stencil lowers Y[i] = P[i] + P[i+1] + P[i+2] with P[j] = 2·X[j] in a local buffer.
func stencil(t *testing.T) *loopir.PrimFunc {
	t.Helper()
	n := loopir.Int(30)
	x := te.Placeholder("X", tensor.Float32, loopir.Int(32))
	p := te.Compute("P", []loopir.Expr{loopir.Int(32)}, func(i []loopir.Expr) loopir.Expr {
		return te.Mul(x.At(i[0]), loopir.Float(2, tensor.Float32))
	})
	y := te.Compute("Y", []loopir.Expr{n}, func(i []loopir.Expr) loopir.Expr {
		return te.Add(te.Add(p.At(i[0]), p.At(te.Add(i[0], loopir.Int(1)))), p.At(te.Add(i[0], loopir.Int(2))))
	})
	f, err := te.Lower("stencil", []*te.Tensor{x}, []*te.Tensor{y})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// matmulBiasRelu lowers D[i, j] = max(C[i, j] + bias[j], 0) with C = A·B local
// (m = 6, n = 8, k = 5).
func matmulBiasRelu(t *testing.T) *loopir.PrimFunc {
	t.Helper()
	a := te.Placeholder("A", tensor.Float32, loopir.Int(6), loopir.Int(5))
	b := te.Placeholder("B", tensor.Float32, loopir.Int(5), loopir.Int(8))
	bias := te.Placeholder("bias", tensor.Float32, loopir.Int(8))
	r := te.RAxis("k", loopir.Int(5))
	c := te.Compute("C", []loopir.Expr{loopir.Int(6), loopir.Int(8)}, func(i []loopir.Expr) loopir.Expr {
		return te.Sum(te.Mul(a.At(i[0], r.Var), b.At(r.Var, i[1])), r)
	})
	d := te.Compute("D", []loopir.Expr{loopir.Int(6), loopir.Int(8)}, func(i []loopir.Expr) loopir.Expr {
		return te.MaxOf(te.Add(c.At(i[0], i[1]), bias.At(i[1])), loopir.Float(0, tensor.Float32))
	})
	f, err := te.Lower("mm_bias_relu", []*te.Tensor{a, b, bias}, []*te.Tensor{d})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func wantStencil(x []float32) []float32 {
	out := make([]float32, 30)
	for i := range out {
		out[i] = 2*x[i] + 2*x[i+1] + 2*x[i+2]
	}
	return out
}

func wantMatmulBiasRelu(a, b, bias []float32) []float32 {
	out := make([]float32, 6*8)
	for i := 0; i < 6; i++ {
		for j := 0; j < 8; j++ {
			var s float32
			for k := 0; k < 5; k++ {
				s += a[i*5+k] * b[k*8+j]
			}
			out[i*8+j] = float32(math.Max(float64(s+bias[j]), 0))
		}
	}
	return out
}

func closeTo(t *testing.T, what string, got, want []float32) {
	t.Helper()
	kerneltest.Close(t, what, got, tensor.MustFromSlice(tensor.Shape{len(want)}, want))
}

// replayed checks that the trace round-trips through text and replays to the same C.
func replayed(t *testing.T, s *Schedule, fresh *loopir.PrimFunc) {
	t.Helper()
	parsed, err := ParseTrace(s.Trace().String())
	if err != nil {
		t.Fatal(err)
	}
	r, err := parsed.Replay(fresh)
	if err != nil {
		t.Fatalf("replay: %v\n%s", err, s.Trace())
	}
	if emit(t, r.Func()) != emit(t, s.Func()) {
		t.Error("replayed trace gives different C")
	}
}

func mustLoops(t *testing.T, s *Schedule, block string) (BlockRV, []LoopRV) {
	t.Helper()
	b, err := s.GetBlock(block)
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.GetLoops(b)
	if err != nil {
		t.Fatal(err)
	}
	return b, l
}

// TestComputeAtStencil: P moves under Y's outer loop (split by 4) and computes the six
// elements those four outputs read.
func TestComputeAtStencil(t *testing.T) {
	s := New(stencil(t))
	_, yl := mustLoops(t, s, "Y")
	parts, err := s.Split(yl[0], []int64{-1, 4})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := s.GetBlock("P")
	if err := s.ComputeAt(p, parts[0]); err != nil {
		t.Fatal(err)
	}
	if err := loopir.Verify(s.Func()); err != nil {
		t.Fatal(err)
	}
	golden(t, "stencil_compute_at.loopir", loopir.Print(s.Func()))
	x := kerneltest.Random(21, 32)
	closeTo(t, "stencil", kerneltest.Run(t, s.Func(), nil, 30, x), wantStencil(x))
	replayed(t, s, stencil(t))
}

// TestReverseComputeAtAndCacheWrite: the epilogue runs per row right after the row's
// reduction completes; then the output is written through a local cache.
func TestReverseComputeAtAndCacheWrite(t *testing.T) {
	s := New(matmulBiasRelu(t))
	_, cl := mustLoops(t, s, "C")
	d, _ := s.GetBlock("D")
	if err := s.ReverseComputeAt(d, cl[2]); !errors.Is(err, ErrSchedule) {
		t.Errorf("epilogue inside the reduction loop: got %v, want ErrSchedule", err)
	}
	if err := s.ReverseComputeAt(d, cl[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CacheWrite(d, 0, "local"); err != nil {
		t.Fatal(err)
	}
	if err := loopir.Verify(s.Func()); err != nil {
		t.Fatal(err)
	}
	golden(t, "mm_bias_relu_rcat.loopir", loopir.Print(s.Func()))
	a, b, bias := kerneltest.Random(22, 30), kerneltest.Random(23, 40), kerneltest.Random(24, 8)
	closeTo(t, "matmul+bias+relu", kerneltest.Run(t, s.Func(), nil, 48, a, b, bias), wantMatmulBiasRelu(a, b, bias))
	replayed(t, s, matmulBiasRelu(t))
}

// TestReverseComputeInline folds Y = tanh(P + 1) into P = A·B; a reduction producer
// refuses.
func TestReverseComputeInline(t *testing.T) {
	s := New(chain(t))
	y, _ := s.GetBlock("Y")
	if err := s.ReverseComputeInline(y); err != nil {
		t.Fatal(err)
	}
	text := loopir.Print(s.Func())
	if strings.Contains(text, "block Y") || strings.Contains(text, "alloc P") {
		t.Errorf("Y or P survived:\n%s", text)
	}
	golden(t, "chain_reverse_inlined.loopir", text)
	const rows = 3
	a, b := kerneltest.Random(25, rows*16), kerneltest.Random(26, 16)
	want := make([]float32, rows*16)
	for i := range want {
		want[i] = float32(math.Tanh(float64(a[i]*b[i%16] + 1)))
	}
	closeTo(t, "reverse inlined chain", kerneltest.Run(t, s.Func(), []int64{rows}, rows*16, a, b), want)
	replayed(t, s, chain(t))

	s = New(matmulBiasRelu(t))
	d, _ := s.GetBlock("D")
	if err := s.ReverseComputeInline(d); !errors.Is(err, ErrSchedule) {
		t.Errorf("into a reduction: got %v, want ErrSchedule", err)
	}
}

// TestCacheReadComputeAt copies the row of A each output row needs into a local buffer.
func TestCacheReadComputeAt(t *testing.T) {
	s := New(matmulBiasRelu(t))
	c, cl := mustLoops(t, s, "C")
	ar, err := s.CacheRead(c, 0, "local")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ComputeAt(ar, cl[0]); err != nil {
		t.Fatal(err)
	}
	if err := loopir.Verify(s.Func()); err != nil {
		t.Fatal(err)
	}
	text := loopir.Print(s.Func())
	if !strings.Contains(text, "A_local[") || !strings.Contains(text, "for A_local_c1 in [0, 5)") {
		t.Errorf("A is not cached per row:\n%s", text)
	}
	a, b, bias := kerneltest.Random(27, 30), kerneltest.Random(28, 40), kerneltest.Random(29, 8)
	closeTo(t, "cache_read", kerneltest.Run(t, s.Func(), nil, 48, a, b, bias), wantMatmulBiasRelu(a, b, bias))
	replayed(t, s, matmulBiasRelu(t))
}

// TestAnnotateAndStorageAlign: a pragma reaches the C code; a padded row stride shows in
// the buffer and the result is unchanged.
func TestAnnotateAndStorageAlign(t *testing.T) {
	s := New(matmulBiasRelu(t))
	c, cl := mustLoops(t, s, "C")
	if err := s.Annotate(cl[1], "c.pragma", "GCC unroll 4"); err != nil {
		t.Fatal(err)
	}
	if err := s.StorageAlign(c, 0, 0, 16, 4); err != nil {
		t.Fatal(err)
	}
	if err := s.StorageAlign(c, 0, 1, 16, 4); !errors.Is(err, ErrSchedule) {
		t.Errorf("innermost axis: got %v, want ErrSchedule", err)
	}
	d, _ := s.GetBlock("D")
	if err := s.StorageAlign(d, 0, 0, 16, 4); !errors.Is(err, ErrSchedule) {
		t.Errorf("a parameter: got %v, want ErrSchedule", err)
	}
	text := loopir.Print(s.Func())
	if !strings.Contains(text, `c.pragma="GCC unroll 4"`) || !strings.Contains(text, "strides[20, 1]") {
		t.Errorf("annotation or strides missing:\n%s", text)
	}
	if !strings.Contains(emit(t, s.Func()), "#pragma GCC unroll 4") {
		t.Error("the pragma is not in the C code")
	}
	if strings.Contains(loopir.Print(matmulBiasRelu(t)), "strides") {
		t.Error("storage_align changed the original function")
	}
	a, b, bias := kerneltest.Random(32, 30), kerneltest.Random(33, 40), kerneltest.Random(34, 8)
	closeTo(t, "aligned", kerneltest.Run(t, s.Func(), nil, 48, a, b, bias), wantMatmulBiasRelu(a, b, bias))
	replayed(t, s, matmulBiasRelu(t))
}

// TestReverseComputeAtTransposingConsumerThenCompactAt moves a consumer that reads the
// product transposed, E[j, i] = max(C[i, j] + bias[j], 0), under C's row loop (it then
// writes a column of E per row), and compact_at shrinks C to one row allocated in that
// loop; the result is unchanged and the trace replays.
func TestReverseComputeAtTransposingConsumerThenCompactAt(t *testing.T) {
	build := func(t *testing.T) *loopir.PrimFunc {
		a := te.Placeholder("A", tensor.Float32, loopir.Int(6), loopir.Int(5))
		b := te.Placeholder("B", tensor.Float32, loopir.Int(5), loopir.Int(8))
		bias := te.Placeholder("bias", tensor.Float32, loopir.Int(8))
		r := te.RAxis("k", loopir.Int(5))
		c := te.Compute("C", []loopir.Expr{loopir.Int(6), loopir.Int(8)}, func(i []loopir.Expr) loopir.Expr {
			return te.Sum(te.Mul(a.At(i[0], r.Var), b.At(r.Var, i[1])), r)
		})
		e := te.Compute("E", []loopir.Expr{loopir.Int(8), loopir.Int(6)}, func(i []loopir.Expr) loopir.Expr {
			return te.MaxOf(te.Add(c.At(i[1], i[0]), bias.At(i[0])), loopir.Float(0, tensor.Float32))
		})
		f, err := te.Lower("mm_t", []*te.Tensor{a, b, bias}, []*te.Tensor{e})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	s := New(build(t))
	c, cl := mustLoops(t, s, "C")
	e, _ := s.GetBlock("E")
	if err := s.CompactAt(c, cl[0]); !errors.Is(err, ErrSchedule) {
		t.Errorf("compact_at while E reads C outside the row loop: got %v, want ErrSchedule", err)
	}
	if err := s.ReverseComputeAt(e, cl[0]); err != nil {
		t.Fatal(err)
	}
	if err := s.CompactAt(c, cl[0]); err != nil {
		t.Fatal(err)
	}
	if err := loopir.Verify(s.Func()); err != nil {
		t.Fatal(err)
	}
	text := loopir.Print(s.Func())
	if !strings.Contains(text, "alloc C: f32[1, 8]") {
		t.Errorf("C is not one row:\n%s", text)
	}
	a, b, bias := kerneltest.Random(32, 30), kerneltest.Random(33, 40), kerneltest.Random(34, 8)
	rows := wantMatmulBiasRelu(a, b, bias)
	want := make([]float32, 48)
	for i := 0; i < 6; i++ {
		for j := 0; j < 8; j++ {
			want[j*6+i] = rows[i*8+j]
		}
	}
	closeTo(t, "transposed matmul+bias+relu", kerneltest.Run(t, s.Func(), nil, 48, a, b, bias), want)
	replayed(t, s, build(t))
}
