package cpu

import (
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
)

// Vectorizable float32 tanh and sigmoid for the recurrent cells. The C compiler cannot
// vectorize calls of the C library's expf/tanhf (without -ffast-math), and a recurrent
// step evaluates a few hundred of them between two short matrix-vector products, so the
// cells use a rational approximation made only of multiply-adds, one division and a
// clamp, which the compiler vectorizes like any arithmetic.
//
// tanh(x) ≈ x·P(x²)/Q(x²) on [-9, 9] (clamped outside, where tanh rounds to ±1 in float32),
// P of degree 4 and Q of degree 4, fitted for this file (Lawson-weighted linearized least
// squares on Chebyshev nodes, minimizing the absolute error): 2e-8 in exact arithmetic,
// at most 3.4e-7 evaluated in float32 (2 to 3 units in the last place); the sigmoid,
// 0.5 + 0.5·tanh(x/2), is within 2e-7. NaN propagates (the clamp keeps it). Each comes
// in two stages (clamp, then the rational function) so that the cells store the clamped
// value and the rational function repeats a load.

// rnnTanhClamp is where the approximation saturates.
const rnnTanhClamp = 9.0

// rnnTanhClamped clamps x to where the rational tanh holds; x > c ? c : x keeps a NaN
// (the comparison is false), unlike min(x, c).
func rnnTanhClamped(x loopir.Expr) loopir.Expr {
	c := loopir.Float(rnnTanhClamp, x.DType())
	nc := loopir.Float(-rnnTanhClamp, x.DType())
	return te.Select(loopir.Bin(loopir.GT, x, c), c, te.Select(loopir.Bin(loopir.LT, x, nc), nc, x))
}

// rnnTanhRational is x·P(x²)/Q(x²) on an already clamped float32 x; x should be cheap to
// repeat (a load), since it appears several times in the result.
func rnnTanhRational(x loopir.Expr) loopir.Expr {
	dt := x.DType()
	lit := func(v float64) loopir.Expr { return loopir.Float(v, dt) }
	p := []float64{0.99999992743000751, 0.13375461198655995, 0.0034891776018761422, 2.0511008833827142e-5, 1.3232117651244451e-8}
	q := []float64{1.0, 0.4670876355828529, 0.025852090888834437, 0.00032754759903259083, 7.7236050292360934e-7}
	horner := func(c []float64) loopir.Expr {
		acc := lit(c[len(c)-1])
		for i := len(c) - 2; i >= 0; i-- {
			acc = te.Add(te.Mul(acc, te.Mul(x, x)), lit(c[i]))
		}
		return acc
	}
	return te.Div(te.Mul(x, horner(p)), horner(q))
}

// rnnFast is the two-stage rational sigmoid (0.5 + 0.5·tanh(x/2)) or tanh.
func rnnFast(name string) rnnAct {
	if name == "tanh" {
		return rnnAct{pre: rnnTanhClamped, post: rnnTanhRational}
	}
	return rnnAct{
		pre: func(x loopir.Expr) loopir.Expr { return rnnTanhClamped(te.Mul(loopir.Float(0.5, x.DType()), x)) },
		post: func(x loopir.Expr) loopir.Expr {
			half := loopir.Float(0.5, x.DType())
			return te.Add(half, te.Mul(half, rnnTanhRational(x)))
		},
	}
}
