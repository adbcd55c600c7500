package schedule

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/internal/kerneltest"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/loopir/passes"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// rowSoftmax lowers a softmax over the rows of an n × 7 X: M = max over the row, E = Σ
// exp(X - M), Y = exp(X - M) / E, with M and E local.
func rowSoftmax(t *testing.T) *loopir.PrimFunc {
	t.Helper()
	n, k := te.Dim("n"), loopir.Int(7)
	x := te.Placeholder("X", tensor.Float32, n, k)
	r1, r2 := te.RAxis("r1", k), te.RAxis("r2", k)
	m := te.Compute("M", []loopir.Expr{n}, func(i []loopir.Expr) loopir.Expr { return te.Max(x.At(i[0], r1.Var), r1) })
	e := te.Compute("E", []loopir.Expr{n}, func(i []loopir.Expr) loopir.Expr {
		return te.Sum(te.Exp(te.Sub(x.At(i[0], r2.Var), m.At(i[0]))), r2)
	})
	y := te.Compute("Y", []loopir.Expr{n, k}, func(i []loopir.Expr) loopir.Expr {
		return te.Div(te.Exp(te.Sub(x.At(i[0], i[1]), m.At(i[0]))), e.At(i[0]))
	})
	f, err := te.Lower("row_softmax", []*te.Tensor{x}, []*te.Tensor{y})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func wantRowSoftmax(x []float32, rows int) []float32 {
	out := make([]float32, len(x))
	for i := range rows {
		row := x[i*7 : i*7+7]
		mx := math.Inf(-1)
		for _, v := range row {
			mx = math.Max(mx, float64(v))
		}
		var sum float64
		for _, v := range row {
			sum += math.Exp(float64(v) - mx)
		}
		for j, v := range row {
			out[i*7+j] = float32(math.Exp(float64(v)-mx) / sum)
		}
	}
	return out
}

// rowsAt splits Y's row loop by 4 and moves E, then M, under the inner part, which is
// bound to threadIdx.x (the outer to blockIdx.x) when bind is set.
func rowsAt(t *testing.T, s *Schedule, bind bool) {
	t.Helper()
	_, yl := mustLoops(t, s, "Y")
	parts, err := s.Split(yl[0], []int64{-1, 4})
	if err != nil {
		t.Fatal(err)
	}
	if bind {
		if err := s.Bind(parts[0], loopir.BlockIdxX); err != nil {
			t.Fatal(err)
		}
		if err := s.Bind(parts[1], loopir.ThreadIdxX); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"E", "M"} {
		b, _ := s.GetBlock(name)
		if err := s.ComputeAt(b, parts[1]); err != nil {
			t.Fatalf("compute_at %s: %v", name, err)
		}
	}
	if err := loopir.Verify(s.Func()); err != nil {
		t.Fatal(err)
	}
}

// TestComputeAtAllocatesEachRowsStatisticsUnderTheLoop: reductions move under a row
// loop (their accumulator read is their own), and their local buffers shrink to the one
// element of that row, allocated under the loop; the result is unchanged.
func TestComputeAtAllocatesEachRowsStatisticsUnderTheLoop(t *testing.T) {
	s := New(rowSoftmax(t))
	rowsAt(t, s, false)
	golden(t, "row_softmax_compute_at.loopir", loopir.Print(s.Func()))
	const rows = 10 // a tail: 4 does not divide it
	x := kerneltest.Random(31, rows*7)
	closeTo(t, "row softmax", kerneltest.Run(t, s.Func(), []int64{rows}, rows*7, x), wantRowSoftmax(x, rows))
	replayed(t, s, rowSoftmax(t))
}

// TestComputeAtUnderAThreadLoopGivesEachThreadItsOwnStatistics: under a loop bound to
// threadIdx.x the statistics are per-thread buffers, which a launch accepts (a buffer
// allocated around the bound loops would be shared by every thread and is refused).
func TestComputeAtUnderAThreadLoopGivesEachThreadItsOwnStatistics(t *testing.T) {
	s := New(rowSoftmax(t))
	rowsAt(t, s, true)
	text := loopir.Print(s.Func())
	thread := strings.Index(text, "bind(threadIdx.x)")
	for _, buf := range []string{"alloc M: f32[1] local", "alloc E: f32[1] local"} {
		if at := strings.Index(text, buf); thread < 0 || at < thread {
			t.Errorf("%q is not under the thread loop:\n%s", buf, text)
		}
	}
	low, err := passes.GPUPipeline().Run(s.Func())
	if err != nil {
		t.Fatal(err)
	}
	if _, launch, err := passes.DeriveLaunch(low); err != nil {
		t.Fatalf("the launch is refused: %v\n%s", err, text)
	} else if got, want := launch.String(), "grid(((n + 3) / 4), 1, 1) block(4, 1, 1)"; got != want {
		t.Errorf("launch %s, want %s", got, want)
	}
}

// rowArgMax lowers Y[i, j] = (j == argmax of row i) for an n × 5 X: the arg-reduction
// block stores an index and a value.
func rowArgMax(t *testing.T) *loopir.PrimFunc {
	t.Helper()
	n, k := te.Dim("n"), loopir.Int(5)
	x := te.Placeholder("X", tensor.Float32, n, k)
	r := te.RAxis("r", k)
	best, _ := te.ArgMax("A", []loopir.Expr{n}, r, func(i []loopir.Expr) loopir.Expr { return x.At(i[0], r.Var) })
	y := te.Compute("Y", []loopir.Expr{n, k}, func(i []loopir.Expr) loopir.Expr {
		return te.Select(loopir.Bin(loopir.EQ, best.At(i[0]), i[1]), loopir.Float(1, tensor.Float32), loopir.Float(0, tensor.Float32))
	})
	f, err := te.Lower("row_argmax", []*te.Tensor{x}, []*te.Tensor{y})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestComputeAtMovesAnArgReductionWithBothItsBuffers: the index and the value of an
// arg-reduction move together, both shrunk to the row.
func TestComputeAtMovesAnArgReductionWithBothItsBuffers(t *testing.T) {
	s := New(rowArgMax(t))
	_, yl := mustLoops(t, s, "Y")
	a, _ := s.GetBlock("A")
	if err := s.ComputeAt(a, yl[0]); err != nil {
		t.Fatal(err)
	}
	if err := loopir.Verify(s.Func()); err != nil {
		t.Fatal(err)
	}
	text := loopir.Print(s.Func())
	for _, want := range []string{"alloc A: i64[1] local", "alloc A_value: f32[1] local"} {
		if !strings.Contains(text, want) {
			t.Errorf("the function lacks %q:\n%s", want, text)
		}
	}
	const rows = 6
	x := kerneltest.Random(32, rows*5)
	want := make([]float32, rows*5)
	for i := range rows {
		best := 0
		for j := 1; j < 5; j++ {
			if x[i*5+j] > x[i*5+best] {
				best = j
			}
		}
		want[i*5+best] = 1
	}
	closeTo(t, "row argmax", kerneltest.Run(t, s.Func(), []int64{rows}, rows*5, x), want)
	replayed(t, s, rowArgMax(t))
}

// TestComputeAtRefusesAStageReadOutsideTheLoopAndAnOutput: M is read by E, which is not
// under Y's loop yet; Y writes the function's output.
func TestComputeAtRefusesAStageReadOutsideTheLoopAndAnOutput(t *testing.T) {
	s := New(rowSoftmax(t))
	_, yl := mustLoops(t, s, "Y")
	m, _ := s.GetBlock("M")
	if err := s.ComputeAt(m, yl[0]); !errors.Is(err, ErrSchedule) {
		t.Errorf("M before E: err = %v, want ErrSchedule", err)
	}
	s = New(stencil(t))
	_, yl = mustLoops(t, s, "Y")
	p, _ := s.GetBlock("P")
	if err := s.ComputeAt(p, yl[0]); err != nil {
		t.Fatal(err)
	}
	_, pl := mustLoops(t, s, "P")
	y, _ := s.GetBlock("Y")
	if err := s.ComputeAt(y, pl[len(pl)-1]); !errors.Is(err, ErrSchedule) {
		t.Errorf("the output: err = %v, want ErrSchedule", err)
	}
}
