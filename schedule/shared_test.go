package schedule

import (
	"errors"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// gpuMatmul lowers matmul[i, j] = Σk A[i, k]·B[k, j] with symbolic rows n, 30 columns
// and k = 20.
func gpuMatmul(t *testing.T) *loopir.PrimFunc {
	t.Helper()
	n := te.Dim("n")
	a := te.Placeholder("A", tensor.Float32, n, loopir.Int(20))
	b := te.Placeholder("B", tensor.Float32, loopir.Int(20), loopir.Int(30))
	r := te.RAxis("k", loopir.Int(20))
	c := te.Compute("C", []loopir.Expr{n, loopir.Int(30)}, func(i []loopir.Expr) loopir.Expr {
		return te.Sum(te.Mul(a.At(i[0], r.Var), b.At(r.Var, i[1])), r)
	})
	f, err := te.Lower("mm", []*te.Tensor{a, b}, []*te.Tensor{c})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// threadTiles schedules block C as 8×8 output tiles per GPU block (blockIdx.y, .x) of
// 4×4 threads (threadIdx.y, .x), each thread a 2×2 register tile accumulated in a local
// cache written back under the thread loops, k in steps of 4; it returns the block
// and the loop over the k steps.
func threadTiles(t *testing.T, s *Schedule) (BlockRV, LoopRV) {
	t.Helper()
	c, l := mustLoops(t, s, "C")
	wb, err := s.CacheWrite(c, 0, loopir.ScopeLocal)
	if err != nil {
		t.Fatal(err)
	}
	i, err := s.Split(l[0], []int64{-1, 4, 2})
	if err != nil {
		t.Fatal(err)
	}
	j, err := s.Split(l[1], []int64{-1, 4, 2})
	if err != nil {
		t.Fatal(err)
	}
	k, err := s.Split(l[2], []int64{-1, 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Reorder(i[0], j[0], i[1], j[1], k[0], k[1], i[2], j[2]); err != nil {
		t.Fatal(err)
	}
	for rv, axis := range map[LoopRV]loopir.ThreadAxis{i[0]: loopir.BlockIdxY, j[0]: loopir.BlockIdxX, i[1]: loopir.ThreadIdxY, j[1]: loopir.ThreadIdxX} {
		if err := s.Bind(rv, axis); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.DecomposeReduction(c, k[0]); err != nil {
		t.Fatal(err)
	}
	if err := s.ReverseComputeAt(wb, j[1]); err != nil {
		t.Fatal(err)
	}
	return c, k[0]
}

// TestSharedCacheReadIsACooperativeCopyUnderTheThreadLoops: under the thread loops, the
// A and B tiles of a k step are copied into shared buffers of the tile's size by all 16
// threads of a block (A's 8×4 tile in 2 rounds, B's 4×8 tile in 2), the register tile is
// a 2×2 local buffer per thread, and the trace replays to the same function.
func TestSharedCacheReadIsACooperativeCopyUnderTheThreadLoops(t *testing.T) {
	s := New(gpuMatmul(t))
	c, ko := threadTiles(t, s)
	for read := range 2 {
		cp, err := s.CacheRead(c, read, loopir.ScopeShared)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.ComputeAt(cp, ko); err != nil {
			t.Fatal(err)
		}
	}
	if err := loopir.Verify(s.Func()); err != nil {
		t.Fatal(err)
	}
	text := loopir.Print(s.Func())
	golden(t, "matmul_shared.loopir", text)
	for _, want := range []string{"alloc A_shared: f32[8, 4] shared", "alloc B_shared: f32[4, 8] shared", "alloc C_local: f32[2, 2] local",
		"for A_shared_round in [0, 2)", "S A_shared_i0[n] = ((C_l0_0 * 8) + (((A_shared_round * 16) + ((C_l0_1 * 4) + C_l1_1)) / 4))"} {
		if !strings.Contains(text, want) {
			t.Errorf("the schedule lacks %q", want)
		}
	}
	r, err := s.Trace().Replay(gpuMatmul(t))
	if err != nil {
		t.Fatalf("replay: %v\n%s", err, s.Trace())
	}
	if got := loopir.Print(r.Func()); got != text {
		t.Errorf("the replayed trace gives\n%s", got)
	}
}

// TestSharedAndRegisterTilesRefuseWhatThreadsCannotShareOrOwn: a shared copy outside
// every thread loop, a cache in an unknown scope, a register tile with holes.
func TestSharedAndRegisterTilesRefuseWhatThreadsCannotShareOrOwn(t *testing.T) {
	// no thread loops: nothing shares the copy
	s := New(gpuMatmul(t))
	c, l := mustLoops(t, s, "C")
	cp, err := s.CacheRead(c, 0, loopir.ScopeShared)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ComputeAt(cp, l[0]); !errors.Is(err, ErrSchedule) || !strings.Contains(err.Error(), "no loop bound to a threadIdx axis") {
		t.Errorf("err = %v, want ErrSchedule: no thread loop", err)
	}
	if _, err := s.CacheRead(c, 1, "texture"); !errors.Is(err, ErrSchedule) {
		t.Errorf("a cache in scope texture: err = %v, want ErrSchedule", err)
	}
	// a register tile whose rows are 4 apart (the thread index is the inner part of the
	// split): the write-back would copy rows other threads own
	s = New(gpuMatmul(t))
	c, l = mustLoops(t, s, "C")
	wb, err := s.CacheWrite(c, 0, loopir.ScopeLocal)
	if err != nil {
		t.Fatal(err)
	}
	i, err := s.Split(l[0], []int64{-1, 2, 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Reorder(i[0], i[2], i[1]); err != nil {
		t.Fatal(err)
	}
	if err := s.Bind(i[2], loopir.ThreadIdxX); err != nil {
		t.Fatal(err)
	}
	err = s.ReverseComputeAt(wb, i[2])
	if !errors.Is(err, ErrSchedule) || !strings.Contains(err.Error(), "leave holes") {
		t.Errorf("err = %v, want ErrSchedule: the strided register tile leaves holes", err)
	}
}
