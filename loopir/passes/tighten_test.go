package passes

import (
	"testing"

	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/tensor"
)

// TestTightenLoopGuard: a split tail's guard on the loop's own variable (t·48 + p < 784)
// becomes the loop's extent, the other conjunct stays; a guard on p ≤ a bound works the
// same; a guard whose coefficient on the variable is not 1, one that mentions an inner
// loop, and a guarded parallel loop are left alone.
func TestTightenLoopGuard(t *testing.T) {
	n := loopir.NewVar("n")
	y := &loopir.Buffer{Name: "y", DT: tensor.Float32, Shape: []loopir.Expr{loopir.Int(1024)}}
	tv, p, q := loopir.NewVar("t"), loopir.NewVar("p"), loopir.NewVar("q")
	px := loopir.Bin(loopir.Add, loopir.Bin(loopir.Mul, tv, loopir.Int(48)), p)
	store := func(i loopir.Expr) loopir.Stmt {
		return &loopir.Store{Buf: y, Index: []loopir.Expr{i}, Value: loopir.Float(0, tensor.Float32)}
	}
	loop := func(v *loopir.Var, ext int64, kind loopir.ForKind, body loopir.Stmt) loopir.Stmt {
		return &loopir.For{Var: v, Min: loopir.Int(0), Extent: loopir.Int(ext), Kind: kind, Body: body}
	}
	guard := func(c loopir.Expr, s loopir.Stmt) loopir.Stmt { return &loopir.IfThenElse{Cond: c, Then: s} }
	body := loopir.Seq{
		loop(p, 48, loopir.Vectorized, guard(loopir.Bin(loopir.And, loopir.Bin(loopir.LT, px, loopir.Int(784)), loopir.Bin(loopir.LT, tv, n)), store(px))),
		loop(p, 48, loopir.Serial, guard(loopir.Bin(loopir.LE, loopir.Bin(loopir.Add, p, n), loopir.Int(100)), store(p))),
		loop(p, 48, loopir.Serial, guard(loopir.Bin(loopir.LT, loopir.Bin(loopir.Mul, p, loopir.Int(2)), loopir.Int(50)), store(p))),
		loop(p, 48, loopir.Serial, guard(loopir.Bin(loopir.LT, loopir.Bin(loopir.Add, p, q), loopir.Int(50)), loop(q, 4, loopir.Serial, store(p)))),
		loop(p, 48, loopir.Parallel, guard(loopir.Bin(loopir.LT, p, loopir.Int(30)), store(p))),
	}
	f := &loopir.PrimFunc{Name: "zero", Params: []*loopir.Buffer{y}, Dims: []*loopir.Var{n}, Body: loop(tv, 17, loopir.Serial, body)}
	want := `primfunc zero(y: f32[1024]) dims(n) {
  for t in [0, 17) {
    for p in [0, min(48, (784 - (t * 48)))) vectorized {
      if (t < n) {
        y[((t * 48) + p)] = 0f
      }
    }
    for p in [0, min(48, ((100 - n) + 1))) {
      y[p] = 0f
    }
    for p in [0, 48) {
      if ((p * 2) < 50) {
        y[p] = 0f
      }
    }
    for p in [0, 48) {
      if ((p + q) < 50) {
        for q in [0, 4) {
          y[p] = 0f
        }
      }
    }
    for p in [0, 48) parallel {
      if (p < 30) {
        y[p] = 0f
      }
    }
  }
}
`
	got := TightenLoopGuard(f)
	if s := loopir.Print(got); s != want {
		t.Errorf("got\n%s\nwant\n%s", s, want)
	}
	if loopir.Print(f) == loopir.Print(got) {
		t.Error("the input was changed in place")
	}
}
