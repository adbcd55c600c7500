package loopir

import (
	"testing"

	"github.com/kilnrt/kiln/tensor"
)

func TestSimplify(t *testing.T) {
	n := NewVar("n")
	x, y := NewVar("x"), NewVar("y")
	a := NewAnalyzer([]*Var{n})
	a.Bind(x, Bounds{0, 99})
	a.Bind(y, Bounds{0, 7})
	eight := Int(8)
	cases := []struct {
		in   Expr
		want string
	}{
		{Bin(Div, Bin(Add, Bin(Mul, x, eight), y), eight), "x"},
		{Bin(Mod, Bin(Add, Bin(Mul, x, eight), y), eight), "y"},
		{Bin(Div, y, eight), "0"},
		{Bin(Mod, y, eight), "y"},
		{Bin(Add, Bin(Add, x, Int(1)), Bin(Mul, x, Int(2))), "((x * 3) + 1)"},
		{Bin(Sub, Bin(Add, x, y), x), "y"},
		{Bin(LT, y, eight), "1"},
		{Bin(GE, n, Int(0)), "1"},
		{Bin(LT, x, n), "(x < n)"},
		{Bin(Div, Bin(Add, Bin(Mul, x, eight), n), eight), "((n / 8) + x)"}, // floor division splits exactly
		{Bin(Mod, Bin(Add, Bin(Mul, x, Int(16)), Bin(Add, n, Int(3))), eight), "((n + 3) % 8)"},
		// clamps and conjunctions the bounds decide
		{Bin(Max, Bin(Min, y, Int(7)), Int(0)), "y"},
		{Bin(Min, Int(100), x), "x"},
		{Bin(Min, x, Int(7)), "min(x, 7)"},
		{Bin(And, Bin(GE, y, Int(0)), Bin(LT, x, n)), "(x < n)"},
		{Bin(And, Bin(LT, x, n), Bin(GT, y, Int(7))), "0"},
		{Bin(Or, Bin(LT, x, n), Bin(LT, y, eight)), "1"},
		{Bin(And, Bin(LT, y, eight), x), "(1 && x)"}, // an integer's truth is not its value
	}
	for _, c := range cases {
		if got := ExprString(a.Simplify(c.in)); got != c.want {
			t.Errorf("Simplify(%s) = %s, want %s", ExprString(c.in), got, c.want)
		}
	}
	// a fused loop's index: (f/14 % 14)·112 + (f % 14)·8 + (f/196)·1568 is f·8
	fused := NewVar("f")
	a.Bind(fused, Bounds{0, 5095})
	c14, c196 := Int(14), Int(196)
	join := []struct {
		in   Expr
		want string
	}{
		{Bin(Add, Bin(Add, Bin(Mul, Bin(Mod, Bin(Div, fused, c14), c14), Int(112)), Bin(Mul, Bin(Mod, fused, c14), eight)),
			Bin(Mul, Bin(Div, fused, c196), Int(1568))), "(f * 8)"},
		{Bin(Add, Bin(Mod, n, c14), Bin(Mul, Bin(Div, n, c14), c14)), "n"},
		{Bin(Add, Bin(Mul, Bin(Mod, Bin(Div, n, c14), Int(3)), c14), Bin(Mod, n, c14)), "(n % 42)"},
		// coefficients that do not line up stay apart
		{Bin(Add, Bin(Mod, n, c14), Bin(Mul, Bin(Div, n, c14), Int(15))), "((n % 14) + ((n / 14) * 15))"},
		{Bin(Add, Bin(Mod, n, c14), Bin(Mul, Bin(Mod, Bin(Div, n, Int(7)), Int(3)), c14)), "((((n / 7) % 3) * 14) + (n % 14))"},
	}
	for _, c := range join {
		if got := ExprString(a.Simplify(c.in)); got != c.want {
			t.Errorf("Simplify(%s) = %s, want %s", ExprString(c.in), got, c.want)
		}
	}
	f := Bin(Add, Float(1, tensor.Float32), Float(2, tensor.Float32))
	if got := ExprString(a.Simplify(f)); got != "(1f + 2f)" {
		t.Errorf("floats must be left alone, got %s", got)
	}
	if b := a.Bound(Bin(Add, Bin(Mul, x, eight), y)); b.Min != 0 || b.Max != 99*8+7 {
		t.Errorf("bound = %+v", b)
	}
}
