package schedule

import (
	"errors"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// chain lowers Y = tanh(A * B + 1) with the product in a local buffer P.
func chain(t *testing.T) *loopir.PrimFunc {
	t.Helper()
	rows, cols := te.Dim("rows"), loopir.Int(16)
	a := te.Placeholder("A", tensor.Float32, rows, cols)
	b := te.Placeholder("B", tensor.Float32, cols)
	p := te.Compute("P", []loopir.Expr{rows, cols}, func(i []loopir.Expr) loopir.Expr {
		return te.Mul(a.At(i[0], i[1]), b.At(i[1]))
	})
	y := te.Compute("Y", []loopir.Expr{rows, cols}, func(i []loopir.Expr) loopir.Expr {
		return te.Tanh(te.Add(p.At(i[0], i[1]), loopir.Float(1, tensor.Float32)))
	})
	f, err := te.Lower("chain", []*te.Tensor{a, b}, []*te.Tensor{y})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestComputeInline(t *testing.T) {
	s := New(chain(t))
	p, err := s.GetBlock("P")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ComputeInline(p); err != nil {
		t.Fatal(err)
	}
	if err := loopir.Verify(s.Func()); err != nil {
		t.Fatal(err)
	}
	golden(t, "chain_inlined.loopir", loopir.Print(s.Func()))
	if text := loopir.Print(s.Func()); strings.Contains(text, "alloc") || strings.Contains(text, "P[") {
		t.Errorf("P is still there:\n%s", text)
	}
	replayed, err := s.Trace().Replay(chain(t))
	if err != nil {
		t.Fatal(err)
	}
	if emit(t, replayed.Func()) != emit(t, s.Func()) {
		t.Error("replay differs")
	}
}

func TestComputeInlineRefusesReductionsAndOutputs(t *testing.T) {
	s := New(matmul(t))
	c, _ := s.GetBlock("C")
	if err := s.ComputeInline(c); !errors.Is(err, ErrSchedule) {
		t.Errorf("inlining a reduction: %v", err)
	}
	s = New(chain(t))
	y, _ := s.GetBlock("Y")
	if err := s.ComputeInline(y); !errors.Is(err, ErrSchedule) {
		t.Errorf("inlining the output: %v", err)
	}
}
