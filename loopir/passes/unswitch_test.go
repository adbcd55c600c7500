package passes

import (
	"testing"

	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/tensor"
)

// TestUnswitchInvariantSelect: a concatenation of three inputs along an outer axis (its
// select chain's conditions on the row only) becomes one lane loop per input; a select
// on the lane itself, or on a load, stays in the loop.
func TestUnswitchInvariantSelect(t *testing.T) {
	buf := func(name string, n int64) *loopir.Buffer {
		return &loopir.Buffer{Name: name, DT: tensor.Float32, Shape: []loopir.Expr{loopir.Int(n)}}
	}
	a, b, c, m, y := buf("a", 8), buf("b", 8), buf("c", 16), buf("m", 8), buf("y", 32)
	r, l := loopir.NewVar("r"), loopir.NewVar("l")
	at := func(x *loopir.Buffer, row loopir.Expr) loopir.Expr {
		return &loopir.Load{Buf: x, Index: []loopir.Expr{loopir.Bin(loopir.Add, loopir.Bin(loopir.Mul, row, loopir.Int(8)), l)}}
	}
	row := loopir.Bin(loopir.Div, r, loopir.Int(1))
	chain := &loopir.Select{Cond: loopir.Bin(loopir.LT, row, loopir.Int(1)), T: at(a, loopir.Int(0)),
		F: &loopir.Select{Cond: loopir.Bin(loopir.LT, row, loopir.Int(2)), T: at(b, loopir.Int(0)), F: at(c, loopir.Bin(loopir.Sub, r, loopir.Int(2)))}}
	// not moved: a condition on the lane, and one on a load
	lane := &loopir.Select{Cond: loopir.Bin(loopir.LT, l, loopir.Int(4)), T: chain, F: loopir.Float(0, tensor.Float32)}
	masked := &loopir.Select{Cond: loopir.Bin(loopir.GT, &loopir.Load{Buf: m, Index: []loopir.Expr{loopir.Int(0)}}, loopir.Float(0, tensor.Float32)), T: lane, F: lane}
	store := &loopir.Store{Buf: y, Index: []loopir.Expr{loopir.Bin(loopir.Add, loopir.Bin(loopir.Mul, r, loopir.Int(8)), l)}, Value: masked}
	f := &loopir.PrimFunc{Name: "concat", Params: []*loopir.Buffer{a, b, c, m, y},
		Body: &loopir.For{Var: r, Min: loopir.Int(0), Extent: loopir.Int(4), Kind: loopir.Parallel,
			Body: &loopir.For{Var: l, Min: loopir.Int(0), Extent: loopir.Int(8), Kind: loopir.Vectorized, Body: store}}}
	want := `primfunc concat(a: f32[8], b: f32[8], c: f32[16], m: f32[8], y: f32[32]) dims() {
  for r in [0, 4) parallel {
    if (r < 1) {
      for l in [0, 8) vectorized {
        y[((r * 8) + l)] = select((m[0] > 0f), select((l < 4), a[l], 0f), select((l < 4), a[l], 0f))
      }
    } else {
      if (r < 2) {
        for l in [0, 8) vectorized {
          y[((r * 8) + l)] = select((m[0] > 0f), select((l < 4), b[l], 0f), select((l < 4), b[l], 0f))
        }
      } else {
        for l in [0, 8) vectorized {
          y[((r * 8) + l)] = select((m[0] > 0f), select((l < 4), c[(((r - 2) * 8) + l)], 0f), select((l < 4), c[(((r - 2) * 8) + l)], 0f))
        }
      }
    }
  }
}
`
	got := UnswitchInvariantSelect(f)
	if s := loopir.Print(got); s != want {
		t.Errorf("got\n%s\nwant\n%s", s, want)
	}
	if err := loopir.Verify(got); err != nil {
		t.Error(err)
	}
}

// TestUnswitchInvariantSelectBudget: a chain of 40 conditions (a 41-input
// concatenation) makes at most maxUnswitch copies of the loop; the rest stay selects.
func TestUnswitchInvariantSelectBudget(t *testing.T) {
	x := &loopir.Buffer{Name: "x", DT: tensor.Float32, Shape: []loopir.Expr{loopir.Int(8)}}
	y := &loopir.Buffer{Name: "y", DT: tensor.Float32, Shape: []loopir.Expr{loopir.Int(41 * 8)}}
	r, l := loopir.NewVar("r"), loopir.NewVar("l")
	var v loopir.Expr = &loopir.Load{Buf: x, Index: []loopir.Expr{l}}
	for k := 39; k >= 0; k-- {
		v = &loopir.Select{Cond: loopir.Bin(loopir.LT, r, loopir.Int(int64(k+1))), T: loopir.Float(float64(k), tensor.Float32), F: v}
	}
	store := &loopir.Store{Buf: y, Index: []loopir.Expr{loopir.Bin(loopir.Add, loopir.Bin(loopir.Mul, r, loopir.Int(8)), l)}, Value: v}
	f := &loopir.PrimFunc{Name: "concat41", Params: []*loopir.Buffer{x, y},
		Body: &loopir.For{Var: r, Min: loopir.Int(0), Extent: loopir.Int(41), Body: &loopir.For{Var: l, Min: loopir.Int(0), Extent: loopir.Int(8), Body: store}}}
	got := UnswitchInvariantSelect(f)
	loops := 0
	loopir.MapStmt(got.Body, func(e loopir.Expr) loopir.Expr { return e }, func(s loopir.Stmt) loopir.Stmt {
		if f, ok := s.(*loopir.For); ok && f.Var == l {
			loops++
		}
		return nil
	})
	if loops < 2 || loops > maxUnswitch+1 {
		t.Errorf("%d copies of the lane loop, want 2 to %d", loops, maxUnswitch+1)
	}
	if err := loopir.Verify(got); err != nil {
		t.Error(err)
	}
}
