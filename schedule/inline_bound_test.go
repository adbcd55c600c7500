package schedule

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// squares lowers S0 = A·A, S1 = S0·S0, ..., Y = S(n-1)·S(n-1): inlining every stage
// would make Y's expression 2^n loads of A.
func squares(t *testing.T, n int) *loopir.PrimFunc {
	t.Helper()
	a := te.Placeholder("A", tensor.Float32, loopir.Int(16))
	cur := a
	for i := 0; i < n; i++ {
		prev := cur
		name := fmt.Sprintf("S%d", i)
		if i == n-1 {
			name = "Y"
		}
		cur = te.Compute(name, []loopir.Expr{loopir.Int(16)}, func(x []loopir.Expr) loopir.Expr {
			return te.Mul(prev.At(x[0]), prev.At(x[0]))
		})
	}
	f, err := te.Lower("squares", []*te.Tensor{a}, []*te.Tensor{cur})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestComputeInlineRefusesExponentialCopies: inlining stages read twice doubles the
// expression each time; compute_inline refuses once a copy would pass maxInlineCopy
// nodes, so 40 stages end in a bounded function instead of 2^40 loads.
func TestComputeInlineRefusesExponentialCopies(t *testing.T) {
	s := New(squares(t, 40))
	refused := 0
	for i := 0; i < 39; i++ {
		b, err := s.GetBlock(fmt.Sprintf("S%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.ComputeInline(b); errors.Is(err, ErrSchedule) && strings.Contains(err.Error(), "would copy") {
			refused++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if refused == 0 {
		t.Fatal("every stage was inlined")
	}
	if err := loopir.Verify(s.Func()); err != nil {
		t.Fatal(err)
	}
	if size := len(loopir.Print(s.Func())); size > 1<<20 {
		t.Fatalf("the function prints to %d bytes", size)
	}
	t.Logf("%d of 39 inlines refused", refused)
}
