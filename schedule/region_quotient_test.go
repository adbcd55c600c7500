package schedule

import (
	"strings"
	"testing"

	"github.com/kilnrt/kiln/internal/kerneltest"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// halves lowers Y[r, j] = P[r, j/2] + P[r, j%2 + 4] with P = 2·X, X [rows, 8], Y [rows, 16]:
// P is read at a quotient and a remainder of Y's column.
func halves(t *testing.T, rows int64) *loopir.PrimFunc {
	t.Helper()
	x := te.Placeholder("X", tensor.Float32, loopir.Int(rows), loopir.Int(8))
	p := te.Compute("P", []loopir.Expr{loopir.Int(rows), loopir.Int(8)}, func(i []loopir.Expr) loopir.Expr {
		return te.Mul(x.At(i[0], i[1]), loopir.Float(2, tensor.Float32))
	})
	y := te.Compute("Y", []loopir.Expr{loopir.Int(rows), loopir.Int(16)}, func(i []loopir.Expr) loopir.Expr {
		half := loopir.Bin(loopir.Div, i[1], loopir.Int(2))
		odd := loopir.Bin(loopir.Add, loopir.Bin(loopir.Mod, i[1], loopir.Int(2)), loopir.Int(4))
		return te.Add(p.At(i[0], half), p.At(i[0], odd))
	})
	f, err := te.Lower("halves", []*te.Tensor{x}, []*te.Tensor{y})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestComputeAtBoundsQuotientsOfTheLoops: P moves under Y's row loop although Y reads
// it at j/2 and j%2 + 4, which are not affine in Y's column loop: the region per row is
// the interval those take over the loop, columns 0 to 7 (8 elements, a local buffer of
// one row), and the result is unchanged.
func TestComputeAtBoundsQuotientsOfTheLoops(t *testing.T) {
	const rows = 3
	s := New(halves(t, rows))
	_, yl := mustLoops(t, s, "Y")
	p, _ := s.GetBlock("P")
	if err := s.ComputeAt(p, yl[0]); err != nil {
		t.Fatal(err)
	}
	if err := loopir.Verify(s.Func()); err != nil {
		t.Fatal(err)
	}
	text := loopir.Print(s.Func())
	if !strings.Contains(text, "alloc P: f32[1, 8] local") {
		t.Errorf("P is not one row of 8 under Y's row loop:\n%s", text)
	}
	x := kerneltest.Random(31, rows*8)
	want := make([]float32, rows*16)
	for r := 0; r < rows; r++ {
		for j := 0; j < 16; j++ {
			want[r*16+j] = 2*x[r*8+j/2] + 2*x[r*8+j%2+4]
		}
	}
	closeTo(t, "halves", kerneltest.Run(t, s.Func(), nil, rows*16, x), want)

}
