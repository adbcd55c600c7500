package passes

import (
	"strings"
	"testing"

	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/tensor"
)

// rowSum builds, by hand, the block nest te would produce for out[i] = sum_j x[i, j].
func rowSum() *loopir.PrimFunc {
	n := loopir.NewVar("n")
	x := &loopir.Buffer{Name: "x", DT: tensor.Float32, Shape: []loopir.Expr{n, loopir.Int(8)}}
	out := &loopir.Buffer{Name: "out", DT: tensor.Float32, Shape: []loopir.Expr{n}}
	i, j := loopir.NewVar("i"), loopir.NewVar("j")
	li, lj := loopir.NewVar("li"), loopir.NewVar("lj")
	blk := &loopir.Block{
		Name:     "out",
		Iters:    []loopir.IterVar{{Var: i, Extent: n, Kind: loopir.Spatial}, {Var: j, Extent: loopir.Int(8), Kind: loopir.Reduction}},
		Bindings: []loopir.Expr{li, lj},
		Init:     &loopir.Store{Buf: out, Index: []loopir.Expr{i}, Value: loopir.Float(0, tensor.Float32)},
		Body: &loopir.Store{Buf: out, Index: []loopir.Expr{i}, Value: loopir.Bin(loopir.Add,
			&loopir.Load{Buf: out, Index: []loopir.Expr{i}}, &loopir.Load{Buf: x, Index: []loopir.Expr{i, j}})},
	}
	return &loopir.PrimFunc{Name: "rowsum", Params: []*loopir.Buffer{x, out}, Dims: []*loopir.Var{n},
		Body: &loopir.For{Var: li, Min: loopir.Int(0), Extent: n, Body: &loopir.For{Var: lj, Min: loopir.Int(0), Extent: loopir.Int(8), Body: blk}}}
}

func TestLowerBlocksAndFlatten(t *testing.T) {
	f := rowSum()
	before := loopir.Print(f)
	got, err := CPUPipeline().Run(f)
	if err != nil {
		t.Fatal(err)
	}
	want := `primfunc rowsum(x: f32[n, 8], out: f32[n]) dims(n) {
  for li in [0, n) {
    for lj in [0, 8) {
      if (lj == 0) {
        out[li] = 0f
      }
      out[li] = (out[li] + x[((li * 8) + lj)])
    }
  }
}
`
	if err := loopir.Verify(got); err != nil {
		t.Fatalf("lowered function does not verify: %v", err)
	}
	if text := loopir.Print(got); text != want {
		t.Errorf("after lowering:\n%s\nwant:\n%s", text, want)
	}
	if loopir.Print(f) != before {
		t.Error("the pipeline modified its input")
	}
}

func TestPanickingPassIsNamed(t *testing.T) {
	p := Pipeline{{Name: "explode", Run: func(*loopir.PrimFunc) *loopir.PrimFunc { panic("BUG: boom") }}}
	if _, err := p.Run(rowSum()); err == nil || !strings.Contains(err.Error(), "pass explode on rowsum") {
		t.Errorf("got %v", err)
	}
}
