package kernels

import (
	"math"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// The binary ops whose meaning differs between integers and floats: Mod (the sign rule
// of fmod), Pow (integer results) and BitShift.

func halfFloat(dt tensor.DType) bool { return dt == tensor.Float16 || dt == tensor.BFloat16 }

// computeMod is ONNX Mod: with fmod=1 the remainder of truncated division (C's % and
// fmod: the sign of a), with fmod=0 the remainder of floored division (Python's %: the
// sign of b). An integer modulo by zero is the division's.
func computeMod(n *graph.Node, a, b loopir.Expr) (loopir.Expr, error) {
	fmod := attrs[graph.ModAttrs](n).Fmod != 0
	dt := a.DType()
	if halfFloat(dt) || !dt.IsNumeric() {
		return nil, Unsupported("Mod on %v", dt)
	}
	lt0 := func(x loopir.Expr) loopir.Expr { return loopir.Bin(loopir.LT, x, lit(0, x)) }
	signsDiffer := func(x, y loopir.Expr) loopir.Expr { return loopir.Bin(loopir.NE, lt0(x), lt0(y)) }
	if dt.IsFloat() {
		r := &loopir.Call{Fn: loopir.Fmod, Args: []loopir.Expr{a, b}}
		if fmod {
			return r, nil
		}
		adjust := loopir.Bin(loopir.And, loopir.Bin(loopir.NE, r, lit(0, r)), signsDiffer(r, b))
		return te.Select(adjust, te.Add(r, b), r), nil
	}
	m := loopir.Bin(loopir.Mod, a, b) // floored
	if !fmod {
		return m, nil
	}
	adjust := loopir.Bin(loopir.And, loopir.Bin(loopir.NE, m, lit(0, m)), signsDiffer(a, b))
	return te.Select(adjust, te.Sub(m, b), m), nil
}

// computePow is ONNX Pow. On a float base the exponent is converted to the base's
// type. On an integer base the power is taken in float64 and converted to the base's
// type the way the reference does (tensor.FromFloat64s): NaN and values outside int64
// give math.MinInt64 (values from 2^63 to 2^64 stay exact for uint64), then integers
// wrap to the narrower type. Results up to 2^53 are exact integers.
func computePow(_ *graph.Node, a, b loopir.Expr) (loopir.Expr, error) {
	dt := a.DType()
	if halfFloat(dt) || halfFloat(b.DType()) || !dt.IsNumeric() || !b.DType().IsNumeric() {
		return nil, Unsupported("Pow on %v and %v", dt, b.DType())
	}
	if dt.IsFloat() {
		if b.DType() != dt {
			b = te.Cast(dt, b)
		}
		return te.Pow(a, b), nil
	}
	f64 := func(x loopir.Expr) loopir.Expr {
		if x.DType() == tensor.Float64 {
			return x
		}
		return te.Cast(tensor.Float64, x)
	}
	p := te.Pow(f64(a), f64(b))
	return floatToInt(p, dt), nil
}

// floatToInt converts a float32 or float64 expression to an integer type with
// tensor.FromFloat64s's rules and no undefined conversion in C: every Cast from float
// sees a value in range (the Select around it is evaluated on both sides). The bounds
// ±2^63 and 2^64 are exact in either float type, so the checks are in p's own type.
func floatToInt(p loopir.Expr, dt tensor.DType) loopir.Expr {
	f := func(v float64) loopir.Expr { return loopir.Float(v, p.DType()) }
	inI64 := loopir.Bin(loopir.And, loopir.Bin(loopir.GE, p, f(-0x1p63)), loopir.Bin(loopir.LT, p, f(0x1p63)))
	i := te.Select(inI64, te.Cast(tensor.Int64, te.Select(inI64, p, f(0))), &loopir.IntImm{V: math.MinInt64, DT: tensor.Int64})
	if dt == tensor.Uint64 {
		high := loopir.Bin(loopir.And, loopir.Bin(loopir.GE, p, f(0x1p63)), loopir.Bin(loopir.LT, p, f(0x1p64)))
		return te.Select(high, te.Cast(tensor.Uint64, te.Select(high, p, f(0))), te.Cast(tensor.Uint64, i))
	}
	if dt == tensor.Int64 {
		return i
	}
	return te.Cast(dt, i)
}

// computeBitShift is ONNX BitShift on unsigned integers; a shift by the bit width or
// more gives 0, as in the reference.
func computeBitShift(n *graph.Node, a, b loopir.Expr) (loopir.Expr, error) {
	if !a.DType().IsUnsigned() || b.DType() != a.DType() {
		return nil, Unsupported("BitShift on %v and %v", a.DType(), b.DType())
	}
	switch dir := attrs[graph.BitShiftAttrs](n).Direction; dir {
	case "LEFT":
		return loopir.Bin(loopir.Shl, a, b), nil
	case "RIGHT":
		return loopir.Bin(loopir.Shr, a, b), nil
	default:
		return nil, Unsupported("BitShift with direction=%q", dir)
	}
}

// bitwiseOps are ONNX's BitwiseAnd, BitwiseOr and BitwiseXor as loopir operators.
var bitwiseOps = map[graph.Op]loopir.BinOp{
	graph.OpBitwiseAnd: loopir.BitAnd, graph.OpBitwiseOr: loopir.BitOr, graph.OpBitwiseXor: loopir.BitXor,
}

// computeBitwise is BitwiseAnd, BitwiseOr or BitwiseXor of two integers of one type.
func computeBitwise(n *graph.Node, a, b loopir.Expr) (loopir.Expr, error) {
	if !a.DType().IsInt() || b.DType() != a.DType() {
		return nil, Unsupported("%v on %v and %v (integers of one type only)", n.Op, a.DType(), b.DType())
	}
	return loopir.Bin(bitwiseOps[n.Op], a, b), nil
}

// computeBitwiseNot is BitwiseNot: x ^ all ones of x's type, the ones written as the
// type's value (255 for uint8, -1 for the signed types and, as bits, for uint64), so
// the result stays in the type where C promotes the operands.
func computeBitwiseNot(n *graph.Node, x loopir.Expr) (loopir.Expr, error) {
	dt := x.DType()
	if !dt.IsInt() {
		return nil, Unsupported("%v on %v (integers only)", n.Op, dt)
	}
	ones := int64(-1)
	if dt.IsUnsigned() && dt.Size() < 8 {
		ones = int64(1)<<(8*dt.Size()) - 1
	}
	return loopir.Bin(loopir.BitXor, x, &loopir.IntImm{V: ones, DT: dt}), nil
}
