package passes

import (
	"testing"

	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/tensor"
)

// TestPartitionBoundaryLoops: a 3-tap stride-2 convolution over a row of 13 read
// through its zero padding (one column each side) splits its tile loop at the first
// tile whose taps all lie inside and at the last tile, whose third tap falls off the
// row: the middle reads plainly, clamps gone, and each border (one tile) reads the taps
// inside and zero for the one outside. The lane loop inside (vectorized) and a loop of symbolic extent stay
// whole.
func TestPartitionBoundaryLoops(t *testing.T) {
	x := &loopir.Buffer{Name: "x", DT: tensor.Float32, Shape: []loopir.Expr{loopir.Int(13 * 4)}}
	y := &loopir.Buffer{Name: "y", DT: tensor.Float32, Shape: []loopir.Expr{loopir.Int(7 * 4)}}
	o, l := loopir.NewVar("o"), loopir.NewVar("l")
	var sum loopir.Expr = loopir.Float(0, tensor.Float32)
	for k := int64(0); k < 3; k++ {
		col := loopir.Bin(loopir.Add, loopir.Bin(loopir.Mul, o, loopir.Int(2)), loopir.Int(k-1))
		in := loopir.Bin(loopir.And, loopir.Bin(loopir.GE, col, loopir.Int(0)), loopir.Bin(loopir.LT, col, loopir.Int(13)))
		clamped := loopir.Bin(loopir.Max, loopir.Bin(loopir.Min, col, loopir.Int(12)), loopir.Int(0))
		read := &loopir.Load{Buf: x, Index: []loopir.Expr{loopir.Bin(loopir.Add, loopir.Bin(loopir.Mul, clamped, loopir.Int(4)), l)}}
		sum = loopir.Bin(loopir.Add, sum, &loopir.Select{Cond: in, T: read, F: loopir.Float(0, tensor.Float32)})
	}
	store := &loopir.Store{Buf: y, Index: []loopir.Expr{loopir.Bin(loopir.Add, loopir.Bin(loopir.Mul, o, loopir.Int(4)), l)}, Value: sum}
	f := &loopir.PrimFunc{Name: "conv", Params: []*loopir.Buffer{x, y},
		Body: &loopir.For{Var: o, Min: loopir.Int(0), Extent: loopir.Int(7), Kind: loopir.Serial,
			Body: &loopir.For{Var: l, Min: loopir.Int(0), Extent: loopir.Int(4), Kind: loopir.Vectorized, Body: store}}}
	want := `primfunc conv(x: f32[52], y: f32[28]) dims() {
  for o in [0, 1) {
    for l in [0, 4) vectorized {
      y[(l + (o * 4))] = (((0f + 0f) + x[l]) + x[((l + (o * 8)) + 4)])
    }
  }
  for o in [1, 6) {
    for l in [0, 4) vectorized {
      y[(l + (o * 4))] = (((0f + x[((l + (o * 8)) + -4)]) + x[(l + (o * 8))]) + x[((l + (o * 8)) + 4)])
    }
  }
  for o in [6, 7) {
    for l in [0, 4) vectorized {
      y[(l + (o * 4))] = (((0f + x[((l + (o * 8)) + -4)]) + x[(l + (o * 8))]) + 0f)
    }
  }
}
`
	got := PartitionBoundaryLoops(f)
	if s := loopir.Print(got); s != want {
		t.Errorf("got\n%s\nwant\n%s", s, want)
	}
	if err := loopir.Verify(got); err != nil {
		t.Error(err)
	}
	// a symbolic extent: no constant range to split
	n := loopir.NewVar("n")
	g := &loopir.PrimFunc{Name: "conv", Params: f.Params, Dims: []*loopir.Var{n},
		Body: &loopir.For{Var: o, Min: loopir.Int(0), Extent: n, Kind: loopir.Serial, Body: f.Body.(*loopir.For).Body}}
	if s, w := loopir.Print(PartitionBoundaryLoops(g)), loopir.Print(g); s != w {
		t.Errorf("a loop of symbolic extent was partitioned:\n%s", s)
	}
	// a test whose bound is a fused loop's remainder, decided for the first of eight
	// iterations only, in a select and in a branch: the loop stays whole
	fv, v := loopir.NewVar("f"), loopir.NewVar("v")
	row := loopir.Bin(loopir.Add, loopir.Bin(loopir.Mul, loopir.Bin(loopir.Mod, fv, loopir.Int(5)), loopir.Int(8)), v)
	cond := loopir.Bin(loopir.LT, row, loopir.Int(33))
	at := []loopir.Expr{loopir.Bin(loopir.Mod, row, loopir.Int(28))}
	for _, body := range []loopir.Stmt{
		&loopir.Store{Buf: y, Index: at, Value: &loopir.Select{Cond: cond, T: &loopir.Load{Buf: x, Index: at}, F: loopir.Float(0, tensor.Float32)}},
		&loopir.IfThenElse{Cond: cond, Then: &loopir.Store{Buf: y, Index: at, Value: loopir.Float(1, tensor.Float32)}},
	} {
		h := &loopir.PrimFunc{Name: "tiles", Params: f.Params,
			Body: &loopir.For{Var: fv, Min: loopir.Int(0), Extent: loopir.Int(10), Kind: loopir.Parallel,
				Body: &loopir.For{Var: v, Min: loopir.Int(0), Extent: loopir.Int(8), Kind: loopir.Serial, Body: body}}}
		if s, w := loopir.Print(PartitionBoundaryLoops(h)), loopir.Print(h); s != w {
			t.Errorf("a test decided for one iteration of eight split the loop:\n%s", s)
		}
	}
}
