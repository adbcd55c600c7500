package passes

import (
	"strings"
	"testing"

	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// stages lowers Y = (2X + 1)² − 1 through three local buffers P1 → P2 → P3.
func stages(t *testing.T) *loopir.PrimFunc {
	t.Helper()
	n := []loopir.Expr{loopir.Int(64)}
	x := te.Placeholder("X", tensor.Float32, n...)
	p1 := te.Compute("P1", n, func(i []loopir.Expr) loopir.Expr { return te.Mul(x.At(i[0]), loopir.Float(2, tensor.Float32)) })
	p2 := te.Compute("P2", n, func(i []loopir.Expr) loopir.Expr { return te.Add(p1.At(i[0]), loopir.Float(1, tensor.Float32)) })
	p3 := te.Compute("P3", n, func(i []loopir.Expr) loopir.Expr { return te.Mul(p2.At(i[0]), p2.At(i[0])) })
	y := te.Compute("Y", n, func(i []loopir.Expr) loopir.Expr { return te.Sub(p3.At(i[0]), loopir.Float(1, tensor.Float32)) })
	f, err := te.Lower("stages", []*te.Tensor{x}, []*te.Tensor{y})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestReuseLocalStorage: P3 starts after P1's last use and takes its storage; P2 overlaps
// both and keeps its own.
func TestReuseLocalStorage(t *testing.T) {
	f := Flatten(LowerBlocks(stages(t)))
	got := loopir.Print(ReuseLocalStorage(f))
	if n := strings.Count(got, "alloc "); n != 2 {
		t.Errorf("want 2 allocations, got %d:\n%s", n, got)
	}
	if strings.Contains(got, "P3[") || !strings.Contains(got, "Y[Y_l0] = (P1[Y_l0] - 1f)") {
		t.Errorf("P3 should live in P1's storage:\n%s", got)
	}
	if err := loopir.Verify(ReuseLocalStorage(f)); err != nil {
		t.Error(err)
	}
	if before := loopir.Print(f); strings.Count(before, "alloc ") != 3 {
		t.Errorf("the pass changed its input:\n%s", before)
	}
}
