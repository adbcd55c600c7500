package schedule

import (
	"errors"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/loopir/passes"
)

// blockPerRow binds Y's row loop to blockIdx.x, splits its column loop by threads and
// binds the thread part to threadIdx.x (outside the rest of the split), and moves E,
// then M, under it: every thread of a row's block computes the whole row's statistics.
func blockPerRow(t *testing.T, s *Schedule, threads int64) LoopRV {
	t.Helper()
	_, yl := mustLoops(t, s, "Y")
	if err := s.Bind(yl[0], loopir.BlockIdxX); err != nil {
		t.Fatal(err)
	}
	parts, err := s.Split(yl[1], []int64{-1, threads})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Reorder(parts[1], parts[0]); err != nil {
		t.Fatal(err)
	}
	if err := s.Bind(parts[1], loopir.ThreadIdxX); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"E", "M"} {
		b, _ := s.GetBlock(name)
		if err := s.ComputeAt(b, parts[1]); err != nil {
			t.Fatalf("compute_at %s: %v", name, err)
		}
	}
	return parts[1]
}

// replayedText checks that the trace, printed and parsed, replays on fresh to the same
// function (printed: a GPU kernel has no C of the CPU's).
func replayedText(t *testing.T, s *Schedule, fresh *loopir.PrimFunc) {
	t.Helper()
	parsed, err := ParseTrace(s.Trace().String())
	if err != nil {
		t.Fatal(err)
	}
	r, err := parsed.Replay(fresh)
	if err != nil {
		t.Fatalf("replay: %v\n%s", err, s.Trace())
	}
	if got, want := loopir.Print(r.Func()), loopir.Print(s.Func()); got != want {
		t.Errorf("the replayed trace gives\n%s\nwant\n%s", got, want)
	}
}

// TestAllReduceSharesARowsStatisticsAmongTheBlocksThreads: after all_reduce, each of the
// block's 4 threads reduces every 4th element of the row into a partial, the partials
// meet in a shared buffer of 4, a tree of two levels combines them, and every thread
// writes the result into its own copy of the statistic; the launch is one block of 4
// per row, with the barriers between the tree's levels; the trace replays.
func TestAllReduceSharesARowsStatisticsAmongTheBlocksThreads(t *testing.T) {
	s := New(rowSoftmax(t))
	thread := blockPerRow(t, s, 4)
	for _, name := range []string{"M", "E"} {
		b, _ := s.GetBlock(name)
		if err := s.AllReduce(b, thread, 4); err != nil {
			t.Fatalf("all_reduce %s: %v", name, err)
		}
	}
	if err := loopir.Verify(s.Func()); err != nil {
		t.Fatal(err)
	}
	golden(t, "row_softmax_all_reduce.loopir", loopir.Print(s.Func()))
	low, err := passes.GPUPipeline().Run(s.Func())
	if err != nil {
		t.Fatal(err)
	}
	_, launch, err := passes.DeriveLaunch(low)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := launch.String(), "grid(n, 1, 1) block(4, 1, 1)"; got != want {
		t.Errorf("launch %s, want %s", got, want)
	}
	// per statistic: after the partials, after the first level, after the second
	if n := strings.Count(loopir.Print(low), "barrier"); n != 6 {
		t.Errorf("%d barriers, want 6:\n%s", n, loopir.Print(low))
	}
	replayedText(t, s, rowSoftmax(t))
}

// TestAllReduceWidensAOneThreadLoopAndKeepsTheRestToThreadZero: under a thread loop of
// one iteration (a unit loop around the output), all_reduce runs the reduction on 8
// threads, and the output, which writes a function output, keeps to thread 0.
func TestAllReduceWidensAOneThreadLoopAndKeepsTheRestToThreadZero(t *testing.T) {
	s := New(rowSoftmax(t))
	y, yl := mustLoops(t, s, "Y")
	fused, err := s.Fuse(yl...)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Bind(fused, loopir.BlockIdxX); err != nil {
		t.Fatal(err)
	}
	unit, err := s.AddUnitLoop(y)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Bind(unit, loopir.ThreadIdxX); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"E", "M"} {
		b, _ := s.GetBlock(name)
		if err := s.ComputeAt(b, unit); err != nil {
			t.Fatalf("compute_at %s: %v", name, err)
		}
	}
	for _, name := range []string{"M", "E"} {
		b, _ := s.GetBlock(name)
		if err := s.AllReduce(b, unit, 8); err != nil {
			t.Fatalf("all_reduce %s: %v", name, err)
		}
	}
	text := loopir.Print(s.Func())
	if !strings.Contains(text, "in [0, 8) bind(threadIdx.x)") || !strings.Contains(text, "where (Y_unit < 1)") {
		t.Errorf("the thread loop is not widened to 8 with Y kept to thread 0:\n%s", text)
	}
	// M's and E's write-backs go to each thread's own copy: every thread runs them; the
	// last level of each tree and Y keep to thread 0
	if strings.Count(text, "where (Y_unit < 1)") != 3 {
		t.Errorf("a block besides Y keeps to thread 0:\n%s", text)
	}
	replayedText(t, s, rowSoftmax(t))
}

// TestAllReduceCarriesAnArgReductionsIndex: an arg-reduction's value and index go
// through the partials and the tree together (two shared buffers), the tree breaking
// ties by the smaller index (a NaN better than any number, two NaNs a tie); the trace
// replays.
func TestAllReduceCarriesAnArgReductionsIndex(t *testing.T) {
	s := New(rowArgMax(t))
	_, yl := mustLoops(t, s, "Y")
	if err := s.Bind(yl[0], loopir.BlockIdxX); err != nil {
		t.Fatal(err)
	}
	parts, err := s.Split(yl[1], []int64{-1, 8})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Reorder(parts[1], parts[0]); err != nil {
		t.Fatal(err)
	}
	if err := s.Bind(parts[1], loopir.ThreadIdxX); err != nil {
		t.Fatal(err)
	}
	a, _ := s.GetBlock("A")
	if err := s.ComputeAt(a, parts[1]); err != nil {
		t.Fatal(err)
	}
	if err := s.AllReduce(a, parts[1], 8); err != nil {
		t.Fatal(err)
	}
	if err := loopir.Verify(s.Func()); err != nil {
		t.Fatal(err)
	}
	text := loopir.Print(s.Func())
	for _, want := range []string{"alloc A_red: f32[8] shared", "alloc A_red_index: i64[8] shared",
		"(((A_red[(A_lane + 1)] > A_red[A_lane]) || ((A_red[(A_lane + 1)] != A_red[(A_lane + 1)]) && (A_red[A_lane] == A_red[A_lane]))) || " +
			"(((A_red[(A_lane + 1)] == A_red[A_lane]) || ((A_red[(A_lane + 1)] != A_red[(A_lane + 1)]) && (A_red[A_lane] != A_red[A_lane]))) && (A_red_index[(A_lane + 1)] < A_red_index[A_lane])))"} {
		if !strings.Contains(text, want) {
			t.Errorf("the function lacks %q:\n%s", want, text)
		}
	}
	replayedText(t, s, rowArgMax(t))
}

// TestAllReduceRefusesWhatTheThreadsCannotShare: a statistic computed per thread for
// the thread's own row (one thread per row), a loop not bound to a thread axis, a
// thread count that is no power of two or below the loop's extent, and an update that
// is no associative combination (a difference) are refused, the schedule unchanged.
func TestAllReduceRefusesWhatTheThreadsCannotShare(t *testing.T) {
	perRow := New(rowSoftmax(t))
	rowsAt(t, perRow, true) // one thread per row: M's row is the thread's
	m, ml := mustLoops(t, perRow, "M")
	tooFew := New(rowSoftmax(t))
	thread := blockPerRow(t, tooFew, 4)
	em, _ := tooFew.GetBlock("M")
	serial := New(rowSoftmax(t))
	rowsAt(t, serial, false)
	sm, sl := mustLoops(t, serial, "M")
	diff := New(rowSoftmax(t)) // M = M - X: no associative combiner
	dthread := blockPerRow(t, diff, 4)
	diff.f.Body = loopir.MapStmt(diff.f.Body, func(e loopir.Expr) loopir.Expr {
		if b, ok := e.(*loopir.Binary); ok && b.Op == loopir.Max {
			return loopir.Bin(loopir.Sub, b.A, b.B)
		}
		return e
	}, nil)
	dm, _ := diff.GetBlock("M")
	for _, c := range []struct {
		name    string
		s       *Schedule
		b       BlockRV
		l       LoopRV
		threads int64
		why     string
	}{
		{"one thread per row", perRow, m, ml[1], 4, "depends on loop"},
		{"a serial loop", serial, sm, sl[1], 4, "not bound to a threadIdx axis"},
		{"3 threads", tooFew, em, thread, 3, "power of two"},
		{"2 threads for 4", tooFew, em, thread, 2, "constant from 1 to 2"},
		{"a difference", diff, dm, dthread, 4, "is not a sum, product, max or min"},
	} {
		before := loopir.Print(c.s.Func())
		err := c.s.AllReduce(c.b, c.l, c.threads)
		if !errors.Is(err, ErrSchedule) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s: err = %v, want a refusal saying %q", c.name, err, c.why)
		}
		if loopir.Print(c.s.Func()) != before {
			t.Errorf("%s: the refusal changed the function", c.name)
		}
	}
}
