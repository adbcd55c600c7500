package passes

import (
	"testing"

	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/tensor"
)

// TestHoistInvariantIf: the tail predicate of a split row loop moves above the column
// loop; the column-dependent conjunct stays inside; a loop whose guard depends on its own
// variable is left alone.
func TestHoistInvariantIf(t *testing.T) {
	n := loopir.NewVar("n")
	y := &loopir.Buffer{Name: "y", DT: tensor.Float32, Shape: []loopir.Expr{loopir.Int(64)}}
	io, ii, j := loopir.NewVar("io"), loopir.NewVar("ii"), loopir.NewVar("j")
	row := loopir.Bin(loopir.Add, loopir.Bin(loopir.Mul, io, loopir.Int(4)), ii)
	store := &loopir.Store{Buf: y, Index: []loopir.Expr{loopir.Bin(loopir.Add, loopir.Bin(loopir.Mul, row, loopir.Int(8)), j)}, Value: loopir.Float(0, tensor.Float32)}
	cond := loopir.Bin(loopir.And, loopir.Bin(loopir.LT, row, n), loopir.Bin(loopir.LT, j, loopir.Int(5)))
	f := &loopir.PrimFunc{Name: "zero", Params: []*loopir.Buffer{y}, Dims: []*loopir.Var{n},
		Body: &loopir.For{Var: io, Min: loopir.Int(0), Extent: loopir.Int(2), Body: &loopir.For{Var: ii, Min: loopir.Int(0), Extent: loopir.Int(4),
			Body: &loopir.For{Var: j, Min: loopir.Int(0), Extent: loopir.Int(8), Kind: loopir.Vectorized, Body: &loopir.IfThenElse{Cond: cond, Then: store}}}}}
	want := `primfunc zero(y: f32[64]) dims(n) {
  for io in [0, 2) {
    for ii in [0, 4) {
      if (((io * 4) + ii) < n) {
        for j in [0, 8) vectorized {
          if (j < 5) {
            y[((((io * 4) + ii) * 8) + j)] = 0f
          }
        }
      }
    }
  }
}
`
	if got := loopir.Print(HoistInvariantIf(f)); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if err := loopir.Verify(HoistInvariantIf(f)); err != nil {
		t.Error(err)
	}
}
