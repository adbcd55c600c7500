package passes

import (
	"errors"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/tensor"
)

// tiledSum is y[b*4 + t] = Σk Σj x[(k*2 + b)*4 + j]: per round k, the block's 4 threads
// copy a tile of x into the shared s (thread t element t), then each thread sums the
// whole tile into its register acc; threadExtent is the thread loop's extent (4, or an
// expression for a tail).
func tiledSum(threadExtent func(b *loopir.Var) loopir.Expr) *loopir.PrimFunc {
	x := &loopir.Buffer{Name: "x", DT: tensor.Float32, Shape: []loopir.Expr{loopir.Int(24)}, Scope: loopir.ScopeGlobal}
	y := &loopir.Buffer{Name: "y", DT: tensor.Float32, Shape: []loopir.Expr{loopir.Int(8)}, Scope: loopir.ScopeGlobal}
	s := &loopir.Buffer{Name: "s", DT: tensor.Float32, Shape: []loopir.Expr{loopir.Int(4)}, Scope: loopir.ScopeShared}
	acc := &loopir.Buffer{Name: "acc", DT: tensor.Float32, Shape: []loopir.Expr{loopir.Int(1)}, Scope: loopir.ScopeLocal}
	b, t, k, j := loopir.NewVar("b"), loopir.NewVar("t"), loopir.NewVar("k"), loopir.NewVar("j")
	zero := []loopir.Expr{loopir.Int(0)}
	add, mul := func(a, b loopir.Expr) loopir.Expr { return loopir.Bin(loopir.Add, a, b) }, func(a, b loopir.Expr) loopir.Expr { return loopir.Bin(loopir.Mul, a, b) }
	round := &loopir.For{Var: k, Min: loopir.Int(0), Extent: loopir.Int(3), Body: loopir.Seq{
		&loopir.Store{Buf: s, Index: []loopir.Expr{t}, Value: &loopir.Load{Buf: x, Index: []loopir.Expr{add(mul(add(mul(k, loopir.Int(2)), b), loopir.Int(4)), t)}}},
		&loopir.For{Var: j, Min: loopir.Int(0), Extent: loopir.Int(4), Body: &loopir.Store{Buf: acc, Index: zero,
			Value: add(&loopir.Load{Buf: acc, Index: zero}, &loopir.Load{Buf: s, Index: []loopir.Expr{j}})}},
	}}
	thread := &loopir.For{Var: t, Min: loopir.Int(0), Extent: threadExtent(b), Kind: loopir.Bound(loopir.ThreadIdxX),
		Body: &loopir.Allocate{Buf: acc, Body: loopir.Seq{
			&loopir.Store{Buf: acc, Index: zero, Value: loopir.Float(0, tensor.Float32)},
			round,
			&loopir.Store{Buf: y, Index: []loopir.Expr{add(mul(b, loopir.Int(4)), t)}, Value: &loopir.Load{Buf: acc, Index: zero}},
		}}}
	return &loopir.PrimFunc{Name: "tiled_sum", Params: []*loopir.Buffer{x, y},
		Body: &loopir.Allocate{Buf: s, Body: &loopir.For{Var: b, Min: loopir.Int(0), Extent: loopir.Int(2), Kind: loopir.Bound(loopir.BlockIdxX), Body: thread}}}
}

func four(*loopir.Var) loopir.Expr { return loopir.Int(4) }

// TestBarriersFollowTheCopyAndPrecedeTheNextOverwrite: the round loop gets the barrier
// between the copy and the reads, and the one before the next round's copy overwrites
// what the previous round's readers use.
func TestBarriersFollowTheCopyAndPrecedeTheNextOverwrite(t *testing.T) {
	f := tiledSum(four)
	before := loopir.Print(f)
	got := InsertBarriers(f)
	want := `primfunc tiled_sum(x: f32[24], y: f32[8]) dims() {
  alloc s: f32[4] shared {
    for b in [0, 2) bind(blockIdx.x) {
      for t in [0, 4) bind(threadIdx.x) {
        alloc acc: f32[1] local {
          acc[0] = 0f
          for k in [0, 3) {
            barrier
            s[t] = x[((((k * 2) + b) * 4) + t)]
            barrier
            for j in [0, 4) {
              acc[0] = (acc[0] + s[j])
            }
          }
          y[((b * 4) + t)] = acc[0]
        }
      }
    }
  }
}
`
	if text := loopir.Print(got); text != want {
		t.Errorf("after InsertBarriers:\n%s\nwant:\n%s", text, want)
	}
	if err := loopir.Verify(got); err != nil {
		t.Fatal(err)
	}
	if loopir.Print(f) != before {
		t.Error("the pass modified its input")
	}
	if !strings.Contains(loopir.Print(mustRun(t, GPUPipeline(), f)), "barrier") {
		t.Error("the GPU pipeline inserts no barrier")
	}
	if strings.Contains(loopir.Print(mustRun(t, CPUPipeline(), rowSum())), "barrier") {
		t.Error("a function without shared buffers got a barrier")
	}
}

func mustRun(t *testing.T, p Pipeline, f *loopir.PrimFunc) *loopir.PrimFunc {
	t.Helper()
	g, err := p.Run(f)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestABarrierUnderAThreadConditionIsABug: a copy and its reads under a condition on the
// thread index cannot be separated by a barrier every thread reaches.
func TestABarrierUnderAThreadConditionIsABug(t *testing.T) {
	f := tiledSum(four)
	blocks := f.Body.(*loopir.Allocate).Body.(*loopir.For)
	thread := blocks.Body.(*loopir.For)
	round := thread.Body.(*loopir.Allocate).Body.(loopir.Seq)[1].(*loopir.For)
	guarded := &loopir.For{Var: round.Var, Min: round.Min, Extent: round.Extent,
		Body: &loopir.IfThenElse{Cond: loopir.Bin(loopir.LT, thread.Var, loopir.Int(3)), Then: round.Body}}
	g := loopir.MapStmt(f.Body, func(e loopir.Expr) loopir.Expr { return e }, func(s loopir.Stmt) loopir.Stmt {
		if l, ok := s.(*loopir.For); ok && l.Var == round.Var {
			return guarded
		}
		return nil
	})
	_, err := Pipeline{{Name: "insert-barriers", Run: InsertBarriers}}.Run(&loopir.PrimFunc{Name: f.Name, Params: f.Params, Body: g})
	if err == nil || !strings.Contains(err.Error(), "insert-barriers") || !strings.Contains(err.Error(), "condition (t < 3)") {
		t.Errorf("err = %v, want the pass to fail naming the condition", err)
	}
}

func TestLaunchWithSharedMemory(t *testing.T) {
	g, l, err := DeriveLaunch(InsertBarriers(tiledSum(four)))
	if err != nil {
		t.Fatalf("a shared buffer around the thread loops is refused: %v", err)
	}
	if err := VerifyLaunch(g, l, gpu); err != nil {
		t.Fatal(err)
	}
	tiny := gpu
	tiny.LocalMemBytes = 8
	err = VerifyLaunch(g, l, tiny)
	if !errors.Is(err, ErrLaunch) || !strings.Contains(err.Error(), "kernel tiled_sum: shared buffers s take 16 bytes of local memory, the target has 8") {
		t.Errorf("err = %v, want ErrLaunch naming the kernel, the buffer and the sizes", err)
	}
	// a tail-shaped thread loop would be guarded around the barriers
	tail := tiledSum(func(b *loopir.Var) loopir.Expr {
		return loopir.Bin(loopir.Min, loopir.Int(4), loopir.Bin(loopir.Sub, loopir.Int(7), loopir.Bin(loopir.Mul, b, loopir.Int(4))))
	})
	if _, _, err := DeriveLaunch(InsertBarriers(tail)); !errors.Is(err, ErrLaunch) || !strings.Contains(err.Error(), "barrier") {
		t.Errorf("err = %v, want ErrLaunch: a guard around a barrier", err)
	}
}
