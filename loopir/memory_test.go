package loopir

import (
	"errors"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/tensor"
)

// stagedCopy is y[b*8 + t] = s[7 - t] with s[t] = x[b*8 + t] a shared buffer of the
// block: blocks b bound to blockIdx.x, threads t to threadIdx.x, and between the write
// and the read of s (by another thread) the statement sync (a Barrier, or a variant).
func stagedCopy(sync func(t *Var) Stmt) *PrimFunc {
	x := &Buffer{Name: "x", DT: tensor.Float32, Shape: []Expr{Int(32)}, Scope: ScopeGlobal}
	y := &Buffer{Name: "y", DT: tensor.Float32, Shape: []Expr{Int(32)}, Scope: ScopeGlobal}
	s := &Buffer{Name: "s", DT: tensor.Float32, Shape: []Expr{Int(8)}, Scope: ScopeShared}
	b, t := NewVar("b"), NewVar("t")
	g := Bin(Add, Bin(Mul, b, Int(8)), t)
	body := Seq{
		&Store{Buf: s, Index: []Expr{t}, Value: &Load{Buf: x, Index: []Expr{g}}},
		sync(t),
		&Store{Buf: y, Index: []Expr{g}, Value: &Load{Buf: s, Index: []Expr{Bin(Sub, Int(7), t)}}},
	}
	return &PrimFunc{Name: "staged", Params: []*Buffer{x, y},
		Body: &Allocate{Buf: s, Body: &For{Var: b, Min: Int(0), Extent: Int(4), Kind: Bound(BlockIdxX),
			Body: &For{Var: t, Min: Int(0), Extent: Int(8), Kind: Bound(ThreadIdxX), Body: body}}}}
}

func TestSharedBufferAndBarrierPrintAndVerify(t *testing.T) {
	f := stagedCopy(func(*Var) Stmt { return &Barrier{} })
	if err := Verify(f); err != nil {
		t.Fatalf("a barrier every thread reaches is refused: %v", err)
	}
	want := `primfunc staged(x: f32[32], y: f32[32]) dims() {
  alloc s: f32[8] shared {
    for b in [0, 4) bind(blockIdx.x) {
      for t in [0, 8) bind(threadIdx.x) {
        s[t] = x[((b * 8) + t)]
        barrier
        y[((b * 8) + t)] = s[(7 - t)]
      }
    }
  }
}
`
	if got := Print(f); got != want {
		t.Errorf("text:\n%s\nwant:\n%s", got, want)
	}
	uniform := stagedCopy(func(*Var) Stmt {
		// a loop and a condition over block indices and constants: every thread runs them
		k := NewVar("k")
		return &For{Var: k, Min: Int(0), Extent: Int(2), Body: &IfThenElse{Cond: Bin(LT, k, Int(1)), Then: &Barrier{}}}
	})
	if err := Verify(uniform); err != nil {
		t.Errorf("a barrier under a uniform loop and condition is refused: %v", err)
	}
}

func TestVerifyRefusesABarrierNotEveryThreadReaches(t *testing.T) {
	k := NewVar("k")
	cases := map[string]struct {
		f    *PrimFunc
		want string
	}{
		"under a thread condition": {stagedCopy(func(t *Var) Stmt {
			return &IfThenElse{Cond: Bin(LT, t, Int(4)), Then: &Barrier{}}
		}), "condition (t < 4)"},
		"in a loop whose trip count depends on the thread": {stagedCopy(func(t *Var) Stmt {
			return &For{Var: k, Min: Int(0), Extent: t, Body: &Barrier{}}
		}), "the bounds of loop k"},
		"under a vectorized loop": {stagedCopy(func(*Var) Stmt {
			return &For{Var: k, Min: Int(0), Extent: Int(2), Kind: Vectorized, Body: &Barrier{}}
		}), "vectorized loop k"},
		"inside a block": {stagedCopy(func(*Var) Stmt {
			return &Block{Name: "B", Body: &Barrier{}}
		}), "inside block B"},
	}
	for name, c := range cases {
		if err := Verify(c.f); !errors.Is(err, ErrVerify) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want ErrVerify naming %q", name, err, c.want)
		}
	}
}

func TestVerifyRefusesASharedBufferPerThreadAndUnknownScopes(t *testing.T) {
	f := stagedCopy(func(*Var) Stmt { return &Barrier{} })
	s := f.Body.(*Allocate).Buf
	// the shared buffer moved under the thread loop
	blocks := f.Body.(*Allocate).Body.(*For)
	threads := blocks.Body.(*For)
	inner := &PrimFunc{Name: "per_thread", Params: f.Params, Body: &For{Var: blocks.Var, Min: blocks.Min, Extent: blocks.Extent, Kind: blocks.Kind,
		Body: &For{Var: threads.Var, Min: threads.Min, Extent: threads.Extent, Kind: threads.Kind, Body: &Allocate{Buf: s, Body: threads.Body}}}}
	if err := Verify(inner); !errors.Is(err, ErrVerify) || !strings.Contains(err.Error(), "shared buffer s is allocated under loop t bound to threadIdx.x") {
		t.Errorf("err = %v, want ErrVerify for a shared buffer under a thread loop", err)
	}
	odd := &Buffer{Name: "s", DT: tensor.Float32, Shape: []Expr{Int(8)}, Scope: "texture"}
	bad := &PrimFunc{Name: "odd", Params: f.Params, Body: &Allocate{Buf: odd, Body: Seq{}}}
	if err := Verify(bad); !errors.Is(err, ErrVerify) || !strings.Contains(err.Error(), `scope "texture"`) {
		t.Errorf("err = %v, want ErrVerify naming the scope", err)
	}
}
