package loopir

import (
	"math"

	"github.com/kilnrt/kiln/tensor"
)

// Casts through a narrow integer. A quantizer's result is a float clamped to the
// integer type's range and rounded, converted to that type (QuantizeLinear's
// Cast(uint8, min(255, max(0, rint(x/s) + z)))); a dequantizer reading it inline widens
// it to int32, subtracts the zero point and converts back to float. The narrow round
// trip costs C compilers their widest vectors (gcc 12 packs and unpacks bytes in
// 256-bit registers), so castRule drops it where the float's proven range makes it an
// identity:
//
//   - Cast(W, Cast(N, x)), x a float proven inside N's range, W an integer type that
//     holds N's range: Cast(W, x) (both truncate x to the same integer);
//   - the same with W a float type and x proven integral: x (in W's type);
//   - Cast(F, e), F a float type and e an integer sum of such casts, integer values of
//     small types and constants whose every partial sum is proven within F's exact
//     integers (2^24 for float32): the sum taken in F, exactly.
//
// The proofs hold for every value but NaN, whose conversion to an integer C leaves
// undefined: a NaN being quantized stays NaN where the rewrite removes the integer
// (ONNX defines no integer for it either; the reference evaluator gives its own).

// floatFacts is what the simplifier proves about a float expression's non-NaN values:
// they lie in [lo, hi] (infinite bounds when unknown) and, if integral, are integers.
type floatFacts struct {
	lo, hi   float64
	integral bool
}

var anyFloat = floatFacts{lo: math.Inf(-1), hi: math.Inf(1)}

// floatFactsOf proves what it can about e from constants, clamps (Min and Max),
// roundings and conversions of integers.
func (a *Analyzer) floatFactsOf(e Expr) floatFacts {
	switch e := e.(type) {
	case *FloatImm:
		return floatFacts{lo: e.V, hi: e.V, integral: e.V == math.Trunc(e.V)}
	case *Call:
		if (e.Fn == Round || e.Fn == Floor || e.Fn == Ceil) && len(e.Args) == 1 {
			f := a.floatFactsOf(e.Args[0])
			return floatFacts{lo: math.Floor(f.lo), hi: math.Ceil(f.hi), integral: true}
		}
	case *Cast:
		if b, ok := a.intBounds(e.X); ok {
			return floatFacts{lo: float64(b.Min), hi: float64(b.Max), integral: true}
		}
		if e.X.DType().IsFloat() && e.To.IsFloat() && e.X.DType().Size() <= e.To.Size() {
			return a.floatFactsOf(e.X) // widening is exact
		}
	case *Binary:
		x, y := a.floatFactsOf(e.A), a.floatFactsOf(e.B)
		both := x.integral && y.integral
		switch e.Op {
		case Min:
			return floatFacts{lo: math.Min(x.lo, y.lo), hi: math.Min(x.hi, y.hi), integral: both}
		case Max:
			return floatFacts{lo: math.Max(x.lo, y.lo), hi: math.Max(x.hi, y.hi), integral: both}
		case Add, Sub, Mul:
			// a rounded sum or product of integers is an integer (every float from
			// 2^24, 2^53 in float64, is one); its range is not tracked
			return floatFacts{lo: anyFloat.lo, hi: anyFloat.hi, integral: both}
		}
	}
	return anyFloat
}

// intRange is an integer type's range, for the types whose range float64 holds exactly.
func intRange(dt tensor.DType) (Bounds, bool) {
	switch dt {
	case tensor.Uint8:
		return Bounds{0, math.MaxUint8}, true
	case tensor.Int8:
		return Bounds{math.MinInt8, math.MaxInt8}, true
	case tensor.Uint16:
		return Bounds{0, math.MaxUint16}, true
	case tensor.Int16:
		return Bounds{math.MinInt16, math.MaxInt16}, true
	case tensor.Uint32:
		return Bounds{0, math.MaxUint32}, true
	case tensor.Int32:
		return Bounds{math.MinInt32, math.MaxInt32}, true
	}
	return Bounds{}, false
}

// intBounds bounds an integer expression by its type's range and the analyzer's facts.
func (a *Analyzer) intBounds(e Expr) (Bounds, bool) {
	r, ok := intRange(e.DType())
	if !ok {
		return Bounds{}, false
	}
	b := a.Bound(e)
	return Bounds{max(r.Min, b.Min), min(r.Max, b.Max)}, true
}

// exactInts is the largest magnitude up to which every integer is a value of the float
// type dt (0 for the others).
func exactInts(dt tensor.DType) float64 {
	switch dt {
	case tensor.Float32:
		return 1 << 24
	case tensor.Float64:
		return 1 << 53
	}
	return 0
}

// castRule applies the rules above to one Cast (its operand already simplified).
func (a *Analyzer) castRule(c *Cast) Expr {
	if in, ok := c.X.(*Cast); ok && in.X.DType().IsFloat() {
		if n, ok := intRange(in.To); ok {
			f := a.floatFactsOf(in.X)
			if f.lo >= float64(n.Min) && f.hi <= float64(n.Max) {
				if w, ok := intRange(c.To); ok && w.Min <= n.Min && w.Max >= n.Max {
					return &Cast{To: c.To, X: in.X}
				}
				if c.To.IsFloat() && f.integral && exactInts(c.To) > 0 {
					return castTo(c.To, in.X)
				}
			}
		}
	}
	if exactInts(c.To) > 0 && c.X.DType().IsInt() {
		if e, mag, fromFloat, ok := a.exactSum(c.X, c.To); ok && fromFloat && mag <= exactInts(c.To) {
			return e
		}
	}
	return c
}

// castTo is x converted to dt (x itself when it has that type).
func castTo(dt tensor.DType, x Expr) Expr {
	if x.DType() == dt {
		return x
	}
	return &Cast{To: dt, X: x}
}

// exactSum rewrites the integer expression e as the same sum in the float type f,
// with a bound on the magnitude of it and of every partial result; fromFloat reports
// that some term was a float converted to an integer (whose round trip the rewrite
// removes). ok is false where a term is not one of the forms castRule lists.
func (a *Analyzer) exactSum(e Expr, f tensor.DType) (out Expr, mag float64, fromFloat, ok bool) {
	switch e := e.(type) {
	case *IntImm:
		return &FloatImm{V: float64(e.V), DT: f}, math.Abs(float64(e.V)), false, true
	case *Cast:
		if e.X.DType().IsFloat() {
			n, ok := intRange(e.To)
			x := a.floatFactsOf(e.X)
			if !ok || !x.integral || x.lo < float64(n.Min) || x.hi > float64(n.Max) {
				return nil, 0, false, false
			}
			return castTo(f, e.X), math.Max(math.Abs(x.lo), math.Abs(x.hi)), true, true
		}
		b, ok := a.intBounds(e.X)
		if !ok {
			return nil, 0, false, false
		}
		if w, ok := intRange(e.To); !ok || w.Min > b.Min || w.Max < b.Max {
			return nil, 0, false, false // the cast would wrap
		}
		return castTo(f, e.X), math.Max(math.Abs(float64(b.Min)), math.Abs(float64(b.Max))), false, true
	case *Binary:
		switch e.Op {
		case Add, Sub, Mul:
		default:
			return nil, 0, false, false
		}
		if !e.DType().IsSigned() {
			return nil, 0, false, false // unsigned arithmetic wraps below 0
		}
		x, mx, fx, ok := a.exactSum(e.A, f)
		if !ok {
			return nil, 0, false, false
		}
		y, my, fy, ok := a.exactSum(e.B, f)
		if !ok {
			return nil, 0, false, false
		}
		if e.Op == Mul {
			// only a product by a constant keeps every partial result bounded
			_, ca := e.A.(*IntImm)
			_, cb := e.B.(*IntImm)
			if !ca && !cb {
				return nil, 0, false, false
			}
			return fits(e.DType(), Bin(Mul, x, y), mx*my, fx || fy)
		}
		return fits(e.DType(), Bin(e.Op, x, y), mx+my, fx || fy)
	}
	return nil, 0, false, false
}

// fits is exactSum's answer for a result of the signed type dt: refused where the
// magnitude bound leaves dt's range (the integer arithmetic would wrap there).
func fits(dt tensor.DType, e Expr, mag float64, fromFloat bool) (Expr, float64, bool, bool) {
	if r, ok := intRange(dt); ok && (mag > float64(r.Max) || -mag < float64(r.Min)) {
		return nil, 0, false, false
	}
	return e, mag, fromFloat, true
}
