package graph

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kilnrt/kiln/tensor"
)

// TestDimPolynomialsStayBounded: a sum of up to maxDimTerms symbols stays a
// polynomial, one more becomes a symbol of its own; so do products whose expansion
// has too many terms and monomials of too many symbols.
func TestDimPolynomialsStayBounded(t *testing.T) {
	sum := func(k int) Dim {
		d := Const(1)
		for i := 0; i < k; i++ {
			d = d.Add(Sym(fmt.Sprintf("s%d", i)))
		}
		return d
	}
	big := func(d Dim) bool {
		s, ok := d.IsSym()
		return ok && strings.HasPrefix(s, "_big")
	}
	if d := sum(maxDimTerms); big(d) || len(d.Symbols()) != maxDimTerms {
		t.Fatalf("a sum of %d symbols: %v", maxDimTerms, d)
	}
	if d := sum(maxDimTerms + 1); !big(d) {
		t.Fatalf("a sum of %d symbols: %v, want a symbol of its own", maxDimTerms+1, d)
	}
	k := 1 // the fewest terms whose square is past maxDimTerms
	for k*k <= maxDimTerms {
		k++
	}
	if d := sum(k).Mul(sum(k)); !big(d) {
		t.Fatalf("a product of two %d-term sums: %v, want a symbol of its own", k, d)
	}
	if d := sum(k - 1).Mul(sum(k - 1)); big(d) {
		t.Fatalf("a product of two %d-term sums: %v, want a polynomial", k-1, d)
	}
	p := Sym("b")
	for i := 1; i < maxTermSyms; i++ {
		p = p.Mul(Sym("b"))
	}
	if big(p) || big(p.Scale(2)) || !big(p.Mul(Sym("b"))) {
		t.Fatalf("b^%d: %v; b^%d: %v", maxTermSyms, p, maxTermSyms+1, p.Mul(Sym("b")))
	}
	if a, b := sum(maxDimTerms+1), sum(maxDimTerms+1); a.Equal(b) {
		t.Fatal("two extents too large to keep compare equal")
	}
}

// TestConcatOfManySymbolicExtentsBuildsInLinearTime: a chain of 20k Concats, each
// adding an input of its own symbolic extent. Kept exactly, the extent grows by a term
// per node and inference took minutes.
func TestConcatOfManySymbolicExtentsBuildsInLinearTime(t *testing.T) {
	if testing.Short() {
		t.Skip("large graph: run without -short")
	}
	const n = 20_000
	b := NewBuilder("main")
	y := b.Param("x0", TensorType(tensor.Float32, Sym("s0")))
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		for i := 1; i < n; i++ {
			x := b.Param(fmt.Sprintf("x%d", i), TensorType(tensor.Float32, Sym(fmt.Sprintf("s%d", i))))
			var err error
			if y, err = b.Op1(OpConcat, &AxisAttrs{Axis: 0}, y, x); err != nil {
				done <- err
				return
			}
		}
		_, err := b.Module(y)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("a chain of %d Concats was not built in a minute", n)
	}
	t.Logf("%d Concats of symbolic extents built in %v; the result is %v", n, time.Since(start).Round(time.Millisecond), y.Type)
}
