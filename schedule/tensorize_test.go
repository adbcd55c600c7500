package schedule

import (
	"errors"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/internal/kerneltest"
	"github.com/kilnrt/kiln/intrin"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/tensor"
)

// generic4x8 is the portable micro-kernel (128-bit vectors: any x86-64 or arm64 host).
var generic4x8 = intrin.GemmF32("generic", 4, 4, 2)

// tileForGemm splits the matmul into mr × nr tiles with the whole k inside, optionally
// decomposing the reduction first; it returns the block and the tile's first loop.
func tileForGemm(t *testing.T, s *Schedule, decompose bool) (BlockRV, LoopRV) {
	t.Helper()
	b, _ := s.GetBlock("C")
	l, _ := s.GetLoops(b)
	i, err := s.Split(l[0], []int64{-1, generic4x8.MR})
	if err != nil {
		t.Fatal(err)
	}
	j, err := s.Split(l[1], []int64{-1, generic4x8.NR})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Reorder(i[0], j[0], i[1], j[1], l[2]); err != nil {
		t.Fatal(err)
	}
	if decompose {
		if _, err := s.DecomposeReduction(b, i[1]); err != nil {
			t.Fatal(err)
		}
	}
	return b, i[1]
}

// TestTensorizeBeforeAfter: both forms of the micro-kernel replace the tile nest; tails
// of the symbolic m and n become run-time extents (min(4, m - 4·io)); the result runs
// and matches the reference.
func TestTensorizeBeforeAfter(t *testing.T) {
	for _, tc := range []struct {
		golden    string
		decompose bool
		in        *loopir.TensorIntrin
	}{
		{"matmul_tensorized.loopir", true, generic4x8.Update},
		{"matmul_tensorized_init.loopir", false, generic4x8.Init},
	} {
		t.Run(tc.in.Name, func(t *testing.T) {
			s := New(matmul(t))
			_, tileLoop := tileForGemm(t, s, tc.decompose)
			if err := s.Tensorize(tileLoop, tc.in); err != nil {
				t.Fatal(err)
			}
			if err := loopir.Verify(s.Func()); err != nil {
				t.Fatal(err)
			}
			golden(t, tc.golden, loopir.Print(s.Func()))
			const m, n = 9, 21
			a, bm := kerneltest.Random(5, m*64), kerneltest.Random(6, 64*n)
			got := kerneltest.Run(t, s.Func(), []int64{m, n}, m*n, a, bm)
			want := kerneltest.Ref(t, graph.OpMatMul, nil, []*tensor.Tensor{
				tensor.MustFromSlice(tensor.Shape{m, 64}, a), tensor.MustFromSlice(tensor.Shape{64, n}, bm)})
			kerneltest.Close(t, "tensorized matmul", got, want)
		})
	}
}

func TestTensorizeTraceReplay(t *testing.T) {
	s := New(matmul(t))
	_, tileLoop := tileForGemm(t, s, true)
	if err := s.Tensorize(tileLoop, generic4x8.Update); err != nil {
		t.Fatal(err)
	}
	text := s.Trace().String()
	if !strings.Contains(text, `tensorize(`+string(tileLoop)+`, "`+generic4x8.Update.Name+`")`) {
		t.Fatalf("trace lacks the tensorize instruction:\n%s", text)
	}
	parsed, err := ParseTrace(text)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parsed.Replay(matmul(t)); !errors.Is(err, ErrSchedule) {
		t.Errorf("replay without the intrinsic: got %v, want ErrSchedule", err)
	}
	replayed, err := parsed.Replay(matmul(t), intrin.Table()...)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := emit(t, s.Func()), emit(t, replayed.Func()); a != b {
		t.Errorf("replayed schedule gives different C:\n%s\nvs\n%s", a, b)
	}
}

// TestTensorizeRefuses lists nests the micro-kernel must not replace; each fails with
// ErrSchedule and leaves the function unchanged.
func TestTensorizeRefuses(t *testing.T) {
	type setup func(t *testing.T, s *Schedule) (LoopRV, *loopir.TensorIntrin)
	cases := map[string]setup{
		"init not decomposed": func(t *testing.T, s *Schedule) (LoopRV, *loopir.TensorIntrin) {
			_, l := tileForGemm(t, s, false)
			return l, generic4x8.Update
		},
		"init form on a decomposed block": func(t *testing.T, s *Schedule) (LoopRV, *loopir.TensorIntrin) {
			_, l := tileForGemm(t, s, true)
			return l, generic4x8.Init
		},
		"tile of the wrong width": func(t *testing.T, s *Schedule) (LoopRV, *loopir.TensorIntrin) {
			b, _ := s.GetBlock("C")
			l, _ := s.GetLoops(b)
			i, _ := s.Split(l[0], []int64{-1, 4})
			j, _ := s.Split(l[1], []int64{-1, 4})
			_ = s.Reorder(i[0], j[0], i[1], j[1], l[2])
			_, _ = s.DecomposeReduction(b, i[1])
			return i[1], generic4x8.Update
		},
		"rows and columns swapped": func(t *testing.T, s *Schedule) (LoopRV, *loopir.TensorIntrin) {
			// j outside i inside the tile: the loop in the intrinsic's row position
			// walks C's columns, which A does not depend on
			b, _ := s.GetBlock("C")
			l, _ := s.GetLoops(b)
			i, _ := s.Split(l[0], []int64{-1, 8})
			j, _ := s.Split(l[1], []int64{-1, 4})
			_ = s.Reorder(i[0], j[0], j[1], i[1], l[2])
			_, _ = s.DecomposeReduction(b, j[1])
			return j[1], generic4x8.Update
		},
		"reduction split outside the init form": func(t *testing.T, s *Schedule) (LoopRV, *loopir.TensorIntrin) {
			b, _ := s.GetBlock("C")
			l, _ := s.GetLoops(b)
			i, _ := s.Split(l[0], []int64{-1, 4})
			j, _ := s.Split(l[1], []int64{-1, 8})
			k, _ := s.Split(l[2], []int64{-1, 16})
			_ = s.Reorder(i[0], j[0], k[0], i[1], j[1], k[1])
			return i[1], generic4x8.Init
		},
		"a stride the intrinsic fixes": func(t *testing.T, s *Schedule) (LoopRV, *loopir.TensorIntrin) {
			// B's columns are 1 apart; this intrinsic takes them 2 apart (pairs)
			_, l := tileForGemm(t, s, true)
			in := *generic4x8.Update
			in.Strides = [][3]int{{2, 1, 2}}
			return l, &in
		},
		"symbolic extent": func(t *testing.T, s *Schedule) (LoopRV, *loopir.TensorIntrin) {
			b, _ := s.GetBlock("C")
			l, _ := s.GetLoops(b)
			_, _ = s.DecomposeReduction(b, l[0])
			return l[0], generic4x8.Update
		},
		"not a perfect nest": func(t *testing.T, s *Schedule) (LoopRV, *loopir.TensorIntrin) {
			b, _ := s.GetBlock("C")
			l, _ := s.GetLoops(b)
			_, _ = s.DecomposeReduction(b, l[1])
			return l[0], generic4x8.Update
		},
	}
	for name, prepare := range cases {
		t.Run(name, func(t *testing.T) {
			s := New(matmul(t))
			l, in := prepare(t, s)
			before := loopir.Print(s.Func())
			err := s.Tensorize(l, in)
			if !errors.Is(err, ErrSchedule) {
				t.Fatalf("got %v, want ErrSchedule", err)
			}
			if loopir.Print(s.Func()) != before {
				t.Error("a refused tensorize changed the function")
			}
			t.Log(err)
		})
	}
}
