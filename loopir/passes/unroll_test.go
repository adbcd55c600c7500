package passes

import (
	"strings"
	"testing"

	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/tensor"
)

// TestUnrollLoops: an unrolled loop of 2 becomes two copies with the variable replaced
// by 0 and 1; after the simplifier, the selects over it are decided and the loop inside
// each copy has a variable of its own; a symbolic or long unrolled loop stays a loop.
func TestUnrollLoops(t *testing.T) {
	n := loopir.NewVar("n")
	y := &loopir.Buffer{Name: "y", DT: tensor.Float32, Shape: []loopir.Expr{loopir.Int(2), loopir.Int(8)}}
	r, j := loopir.NewVar("r"), loopir.NewVar("j")
	even := loopir.Bin(loopir.EQ, loopir.Bin(loopir.Mod, r, loopir.Int(2)), loopir.Int(0))
	val := &loopir.Select{Cond: even, T: loopir.Float(1, tensor.Float32), F: loopir.Float(-1, tensor.Float32)}
	store := &loopir.Store{Buf: y, Index: []loopir.Expr{loopir.Bin(loopir.Add, loopir.Bin(loopir.Mul, r, loopir.Int(8)), j)}, Value: val}
	f := &loopir.PrimFunc{Name: "signs", Params: []*loopir.Buffer{y}, Dims: []*loopir.Var{n},
		Body: &loopir.For{Var: r, Min: loopir.Int(0), Extent: loopir.Int(2), Kind: loopir.Unrolled,
			Body: &loopir.For{Var: j, Min: loopir.Int(0), Extent: loopir.Int(8), Kind: loopir.Vectorized, Body: store}}}
	got := Simplify(UnrollLoops(f))
	want := `primfunc signs(y: f32[2, 8]) dims(n) {
  for j in [0, 8) vectorized {
    y[j] = 1f
  }
  for j in [0, 8) vectorized {
    y[(j + 8)] = -1f
  }
}
`
	if p := loopir.Print(got); p != want {
		t.Errorf("got\n%s\nwant\n%s", p, want)
	}
	if err := loopir.Verify(got); err != nil {
		t.Errorf("unrolled function does not verify: %v", err)
	}
	inner := got.Body.(loopir.Seq)
	if inner[0].(*loopir.For).Var == inner[1].(*loopir.For).Var {
		t.Error("the copies share their inner loop variable")
	}
	for _, ext := range []loopir.Expr{n, loopir.Int(maxUnroll + 1)} {
		g := &loopir.PrimFunc{Name: "signs", Params: []*loopir.Buffer{y}, Dims: []*loopir.Var{n},
			Body: &loopir.For{Var: r, Min: loopir.Int(0), Extent: ext, Kind: loopir.Unrolled, Body: store}}
		if p := loopir.Print(UnrollLoops(g)); !strings.Contains(p, "unrolled") {
			t.Errorf("extent %v: unrolled anyway:\n%s", ext, p)
		}
	}
}
