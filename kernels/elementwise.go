package kernels

import (
	"math"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// unaryFunc is the element function of a unary op; x has the input's dtype.
type unaryFunc func(n *graph.Node, x loopir.Expr) (loopir.Expr, error)

func lit(v float64, like loopir.Expr) loopir.Expr {
	if dt := like.DType(); !dt.IsFloat() {
		return &loopir.IntImm{V: int64(v), DT: dt}
	}
	return loopir.Float(v, like.DType())
}

func bin(op loopir.BinOp) func(a, b loopir.Expr) loopir.Expr {
	return func(a, b loopir.Expr) loopir.Expr { return loopir.Bin(op, a, b) }
}

// nanPropagating is the Max or Min op of two elements as ONNX (numpy's maximum, the
// reference evaluator) defines it: NaN when either is NaN. The printed min/max helpers
// give the second operand when one is NaN (a compare and a blend, what relu, clip and
// pooling vectorize to), so a NaN first operand is selected explicitly.
func nanPropagating(op loopir.BinOp) func(a, b loopir.Expr) loopir.Expr {
	return func(a, b loopir.Expr) loopir.Expr {
		m := loopir.Bin(op, a, b)
		if !a.DType().IsFloat() {
			return m
		}
		return &loopir.Select{Cond: loopir.Bin(loopir.NE, a, a), T: a, F: m}
	}
}

// floatOnly wraps an element function that needs a floating-point input.
func floatOnly(f func(x loopir.Expr) loopir.Expr) unaryFunc {
	return func(n *graph.Node, x loopir.Expr) (loopir.Expr, error) {
		if !x.DType().IsFloat() || x.DType() == tensor.Float16 || x.DType() == tensor.BFloat16 {
			return nil, Unsupported("%v on %v", n.Op, x.DType())
		}
		return f(x), nil
	}
}

func anyType(f func(x loopir.Expr) loopir.Expr) unaryFunc {
	return func(_ *graph.Node, x loopir.Expr) (loopir.Expr, error) { return f(x), nil }
}

func call(fn loopir.Intrinsic) func(x loopir.Expr) loopir.Expr {
	return func(x loopir.Expr) loopir.Expr { return &loopir.Call{Fn: fn, Args: []loopir.Expr{x}} }
}

func absOf(x loopir.Expr) loopir.Expr {
	if x.DType().IsFloat() {
		return te.Abs(x)
	}
	return te.Select(loopir.Bin(loopir.LT, x, lit(0, x)), loopir.Bin(loopir.Sub, lit(0, x), x), x)
}

func attrs[T any](n *graph.Node) *T {
	if a, ok := n.Attrs.(*T); ok {
		return a
	}
	return new(T)
}

func unaryFuncs() map[graph.Op]unaryFunc {
	exp, log := call(loopir.Exp), call(loopir.Log)
	return map[graph.Op]unaryFunc{
		graph.OpAbs:      anyType(absOf),
		graph.OpNeg:      anyType(func(x loopir.Expr) loopir.Expr { return loopir.Bin(loopir.Sub, lit(0, x), x) }),
		graph.OpIdentity: anyType(func(x loopir.Expr) loopir.Expr { return x }),
		graph.OpRelu:     anyType(func(x loopir.Expr) loopir.Expr { return loopir.Bin(loopir.Max, lit(0, x), x) }), // x second: NaN stays NaN
		graph.OpNot:      anyType(func(x loopir.Expr) loopir.Expr { return &loopir.Not{X: x} }),
		graph.OpExp:      floatOnly(exp),
		graph.OpLog:      floatOnly(log),
		graph.OpSqrt:     floatOnly(call(loopir.Sqrt)),
		graph.OpTanh:     floatOnly(call(loopir.Tanh)),
		graph.OpSigmoid:  floatOnly(call(loopir.Sigmoid)),
		graph.OpErf:      floatOnly(call(loopir.Erf)),
		graph.OpCeil:     floatOnly(call(loopir.Ceil)),
		graph.OpFloor:    floatOnly(call(loopir.Floor)),
		graph.OpRound:    floatOnly(call(loopir.Round)),
		graph.OpSin:      floatOnly(call(loopir.Sin)),
		graph.OpCos:      floatOnly(call(loopir.Cos)),
		graph.OpTan:      floatOnly(func(x loopir.Expr) loopir.Expr { return te.Div(call(loopir.Sin)(x), call(loopir.Cos)(x)) }),
		graph.OpAsin:     floatOnly(call(loopir.Asin)),
		graph.OpAcos:     floatOnly(call(loopir.Acos)),
		graph.OpAtan:     floatOnly(call(loopir.Atan)),
		graph.OpAsinh:    floatOnly(call(loopir.Asinh)),
		graph.OpAcosh:    floatOnly(call(loopir.Acosh)),
		graph.OpAtanh:    floatOnly(call(loopir.Atanh)),
		// e^±x / 2 as e^(±x − ln 2): finite wherever the result is (to |x| ≈ 89.4 in
		// float32, where e^x alone overflows past 88.7)
		graph.OpSinh: floatOnly(func(x loopir.Expr) loopir.Expr {
			return te.Sub(exp(te.Sub(x, lit(math.Ln2, x))), exp(te.Sub(neg(x), lit(math.Ln2, x))))
		}),
		graph.OpCosh: floatOnly(func(x loopir.Expr) loopir.Expr {
			return te.Add(exp(te.Sub(x, lit(math.Ln2, x))), exp(te.Sub(neg(x), lit(math.Ln2, x))))
		}),
		graph.OpReciprocal: floatOnly(func(x loopir.Expr) loopir.Expr { return te.Div(lit(1, x), x) }),
		graph.OpSoftplus:   floatOnly(softplus),
		graph.OpSoftsign:   floatOnly(func(x loopir.Expr) loopir.Expr { return te.Div(x, te.Add(lit(1, x), te.Abs(x))) }),
		graph.OpMish: floatOnly(func(x loopir.Expr) loopir.Expr {
			return te.Mul(x, te.Tanh(softplus(x)))
		}),
		graph.OpHardSwish: floatOnly(func(x loopir.Expr) loopir.Expr {
			return te.Mul(x, clamp(te.Add(te.Mul(x, lit(1.0/6, x)), lit(0.5, x)), lit(0, x), lit(1, x)))
		}),
		graph.OpIsNaN: floatOnly(func(x loopir.Expr) loopir.Expr { return loopir.Bin(loopir.NE, x, x) }),
		graph.OpSign: anyType(func(x loopir.Expr) loopir.Expr {
			return te.Select(loopir.Bin(loopir.GT, x, lit(0, x)), lit(1, x),
				te.Select(loopir.Bin(loopir.LT, x, lit(0, x)), lit(-1, x), lit(0, x)))
		}),
		graph.OpBitwiseNot: computeBitwiseNot,
		graph.OpLeakyRelu: func(n *graph.Node, x loopir.Expr) (loopir.Expr, error) {
			a := float64(attrs[graph.LeakyReluAttrs](n).Alpha)
			return floatOnly(func(x loopir.Expr) loopir.Expr {
				return te.Select(loopir.Bin(loopir.LT, x, lit(0, x)), te.Mul(x, lit(a, x)), x)
			})(n, x)
		},
		graph.OpElu: func(n *graph.Node, x loopir.Expr) (loopir.Expr, error) {
			a := float64(attrs[graph.AlphaAttrs](n).Alpha)
			return floatOnly(func(x loopir.Expr) loopir.Expr {
				return te.Select(loopir.Bin(loopir.LT, x, lit(0, x)), te.Mul(lit(a, x), te.Sub(exp(x), lit(1, x))), x)
			})(n, x)
		},
		graph.OpCelu: func(n *graph.Node, x loopir.Expr) (loopir.Expr, error) {
			a := float64(attrs[graph.AlphaAttrs](n).Alpha)
			return floatOnly(func(x loopir.Expr) loopir.Expr {
				neg := te.Mul(lit(a, x), te.Sub(exp(te.Div(x, lit(a, x))), lit(1, x)))
				return te.Add(loopir.Bin(loopir.Max, x, lit(0, x)), loopir.Bin(loopir.Min, lit(0, x), neg))
			})(n, x)
		},
		graph.OpSelu: func(n *graph.Node, x loopir.Expr) (loopir.Expr, error) {
			at := attrs[graph.SeluAttrs](n)
			a, g := float64(at.Alpha), float64(at.Gamma)
			return floatOnly(func(x loopir.Expr) loopir.Expr {
				return te.Mul(lit(g, x), te.Select(loopir.Bin(loopir.LE, x, lit(0, x)), te.Mul(lit(a, x), te.Sub(exp(x), lit(1, x))), x))
			})(n, x)
		},
		graph.OpThresholdedRelu: func(n *graph.Node, x loopir.Expr) (loopir.Expr, error) {
			a := float64(attrs[graph.AlphaAttrs](n).Alpha)
			return floatOnly(func(x loopir.Expr) loopir.Expr {
				return te.Select(loopir.Bin(loopir.GT, x, lit(a, x)), x, lit(0, x))
			})(n, x)
		},
		graph.OpHardSigmoid: func(n *graph.Node, x loopir.Expr) (loopir.Expr, error) {
			at := attrs[graph.HardSigmoidAttrs](n)
			a, b := float64(at.Alpha), float64(at.Beta)
			return floatOnly(func(x loopir.Expr) loopir.Expr {
				return clamp(te.Add(te.Mul(x, lit(a, x)), lit(b, x)), lit(0, x), lit(1, x))
			})(n, x)
		},
		graph.OpShrink: func(n *graph.Node, x loopir.Expr) (loopir.Expr, error) {
			at := attrs[graph.ShrinkAttrs](n)
			b, l := float64(at.Bias), float64(at.Lambd)
			return floatOnly(func(x loopir.Expr) loopir.Expr {
				return te.Select(loopir.Bin(loopir.LT, x, lit(-l, x)), te.Add(x, lit(b, x)),
					te.Select(loopir.Bin(loopir.GT, x, lit(l, x)), te.Sub(x, lit(b, x)), lit(0, x)))
			})(n, x)
		},
		graph.OpGelu: func(n *graph.Node, x loopir.Expr) (loopir.Expr, error) {
			approx := attrs[graph.GeluAttrs](n).Approximate
			if approx != "none" && approx != "tanh" {
				return nil, Unsupported("Gelu with approximate=%q", approx)
			}
			return floatOnly(func(x loopir.Expr) loopir.Expr {
				var t loopir.Expr // erf(x/√2) or tanh(√(2/π)·(x + 0.044715·x³))
				if approx == "tanh" {
					inner := te.Add(x, te.Mul(lit(0.044715, x), te.Mul(x, te.Mul(x, x))))
					t = te.Tanh(te.Mul(lit(math.Sqrt(2/math.Pi), x), inner))
				} else {
					t = call(loopir.Erf)(te.Mul(x, lit(1/math.Sqrt2, x)))
				}
				return te.Mul(te.Mul(lit(0.5, x), x), te.Add(lit(1, x), t))
			})(n, x)
		},
		graph.OpIsInf: func(n *graph.Node, x loopir.Expr) (loopir.Expr, error) {
			at := attrs[graph.IsInfAttrs](n)
			return floatOnly(func(x loopir.Expr) loopir.Expr {
				pos := loopir.Bin(loopir.EQ, x, lit(math.Inf(1), x))
				ng := loopir.Bin(loopir.EQ, x, lit(math.Inf(-1), x))
				switch {
				case at.DetectPositive != 0 && at.DetectNegative != 0:
					return loopir.Bin(loopir.Or, pos, ng)
				case at.DetectPositive != 0:
					return pos
				case at.DetectNegative != 0:
					return ng
				}
				return loopir.Bin(loopir.NE, x, x) // never (no NaN is infinite)
			})(n, x)
		},
	}
}

// viaFloat32 computes an element function on half-float operands (float16, bfloat16,
// which have no arithmetic of their own in a kernel) in float32: each half operand
// widens, and a float32 result narrows back when the first operand is a half float (a
// comparison's bool stays bool). Other operands pass through unchanged.
func viaFloat32(f func(x []loopir.Expr) loopir.Expr) func(x []loopir.Expr) loopir.Expr {
	return func(x []loopir.Expr) loopir.Expr {
		xs := make([]loopir.Expr, len(x))
		for i, v := range x {
			xs[i] = v
			if halfFloat(v.DType()) {
				xs[i] = te.Cast(tensor.Float32, v)
			}
		}
		r := f(xs)
		if dt := x[0].DType(); halfFloat(dt) && r.DType() == tensor.Float32 {
			r = te.Cast(dt, r)
		}
		return r
	}
}

// softplus is log(1 + e^x) as max(x, 0) + log(1 + e^−|x|): no overflow for large x
// (e^x is +Inf past 88.7 in float32, where the answer is x), NaN stays NaN.
func softplus(x loopir.Expr) loopir.Expr {
	return te.Add(loopir.Bin(loopir.Max, lit(0, x), x), te.Log(te.Add(lit(1, x), te.Exp(neg(te.Abs(x))))))
}

func neg(x loopir.Expr) loopir.Expr { return loopir.Bin(loopir.Sub, lit(0, x), x) }

func clamp(x, lo, hi loopir.Expr) loopir.Expr {
	// x second: max and min answer their second operand when one is NaN, so NaN stays
	return loopir.Bin(loopir.Min, hi, loopir.Bin(loopir.Max, lo, x))
}

// binaryFuncs are the broadcasting binary ops on equal input dtypes.
func binaryFuncs() map[graph.Op]func(n *graph.Node, a, b loopir.Expr) (loopir.Expr, error) {
	plain := func(op loopir.BinOp) func(*graph.Node, loopir.Expr, loopir.Expr) (loopir.Expr, error) {
		return func(_ *graph.Node, a, b loopir.Expr) (loopir.Expr, error) { return loopir.Bin(op, a, b), nil }
	}
	return map[graph.Op]func(*graph.Node, loopir.Expr, loopir.Expr) (loopir.Expr, error){
		graph.OpAdd:            plain(loopir.Add),
		graph.OpSub:            plain(loopir.Sub),
		graph.OpMul:            plain(loopir.Mul),
		graph.OpAnd:            plain(loopir.And),
		graph.OpOr:             plain(loopir.Or),
		graph.OpXor:            plain(loopir.NE),
		graph.OpEqual:          plain(loopir.EQ),
		graph.OpGreater:        plain(loopir.GT),
		graph.OpGreaterOrEqual: plain(loopir.GE),
		graph.OpLess:           plain(loopir.LT),
		graph.OpLessOrEqual:    plain(loopir.LE),
		graph.OpDiv: func(_ *graph.Node, a, b loopir.Expr) (loopir.Expr, error) {
			if a.DType().IsFloat() {
				return te.Div(a, b), nil
			}
			// ONNX integer division truncates toward zero; loopir's rounds down
			q := loopir.Bin(loopir.Div, a, b)
			inexact := loopir.Bin(loopir.NE, loopir.Bin(loopir.Mod, a, b), lit(0, a))
			signs := loopir.Bin(loopir.NE, loopir.Bin(loopir.LT, a, lit(0, a)), loopir.Bin(loopir.LT, b, lit(0, b)))
			return te.Select(loopir.Bin(loopir.And, inexact, signs), loopir.Bin(loopir.Add, q, lit(1, a)), q), nil
		},
		graph.OpMod:      computeMod,
		graph.OpPow:      computePow,
		graph.OpBitShift: computeBitShift,
		graph.OpPRelu: func(_ *graph.Node, a, b loopir.Expr) (loopir.Expr, error) {
			return te.Select(loopir.Bin(loopir.LT, a, lit(0, a)), te.Mul(a, b), a), nil
		},
		graph.OpBitwiseAnd: computeBitwise,
		graph.OpBitwiseOr:  computeBitwise,
		graph.OpBitwiseXor: computeBitwise,
	}
}

func elementwiseComputes() map[graph.Op]ComputeFunc {
	m := map[graph.Op]ComputeFunc{}
	for op, f := range unaryFuncs() {
		m[op] = func(n *graph.Node, in []Input) ([]*te.Tensor, error) {
			var ferr error
			out, err := Map(op.String(), viaFloat32(func(x []loopir.Expr) loopir.Expr {
				v, err := f(n, x[0])
				if err != nil {
					ferr = err
					return x[0]
				}
				return v
			}), in[0].T)
			if err == nil {
				err = ferr
			}
			return []*te.Tensor{out}, err
		}
	}
	for op, f := range binaryFuncs() {
		m[op] = func(n *graph.Node, in []Input) ([]*te.Tensor, error) {
			if op == graph.OpPow {
				if e, ok := scalarConst(in, 1); ok && e == 2 {
					out, err := Map("square", func(x []loopir.Expr) loopir.Expr { return te.Mul(x[0], x[0]) }, in[0].T)
					return []*te.Tensor{out}, err
				}
			}
			var ferr error
			out, err := Map(op.String(), viaFloat32(func(x []loopir.Expr) loopir.Expr {
				v, err := f(n, x[0], x[1])
				if err != nil {
					ferr = err
					return x[0]
				}
				return v
			}), in[0].T, in[1].T)
			if err == nil {
				err = ferr
			}
			return []*te.Tensor{out}, err
		}
	}
	variadic := map[graph.Op]func(a, b loopir.Expr) loopir.Expr{
		graph.OpSum: te.Add, graph.OpMean: te.Add, graph.OpMax: nanPropagating(loopir.Max), graph.OpMin: nanPropagating(loopir.Min),
	}
	for op, f := range variadic {
		m[op] = func(n *graph.Node, in []Input) ([]*te.Tensor, error) {
			ts := make([]*te.Tensor, len(in))
			for i, x := range in {
				ts[i] = x.T
			}
			out, err := Map(op.String(), viaFloat32(func(x []loopir.Expr) loopir.Expr {
				acc := x[0]
				for _, y := range x[1:] {
					acc = f(acc, y)
				}
				if op == graph.OpMean {
					acc = te.Div(acc, lit(float64(len(x)), acc))
				}
				return acc
			}), ts...)
			return []*te.Tensor{out}, err
		}
	}
	m[graph.OpClip] = computeClip
	m[graph.OpWhere] = func(n *graph.Node, in []Input) ([]*te.Tensor, error) {
		out, err := Map("where", func(x []loopir.Expr) loopir.Expr {
			return te.Select(loopir.Bin(loopir.NE, x[0], &loopir.IntImm{V: 0, DT: x[0].DType()}), x[1], x[2])
		}, in[0].T, in[1].T, in[2].T)
		return []*te.Tensor{out}, err
	}
	m[graph.OpCast] = func(n *graph.Node, in []Input) ([]*te.Tensor, error) {
		to := tensor.DType(attrs[graph.CastAttrs](n).To)
		return castTo(in[0].T, to)
	}
	m[graph.OpCastLike] = func(n *graph.Node, in []Input) ([]*te.Tensor, error) {
		return castTo(in[0].T, in[1].T.DT)
	}
	m[graph.OpAttentionMask] = computeAttentionMask
	return m
}

// computeAttentionMask is (1 − Cast(m, to))·value in the output dtype, the Cast → Sub →
// Mul chain it replaces.
func computeAttentionMask(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	a := attrs[graph.AttentionMaskAttrs](n)
	to, x := tensor.DType(a.To), in[0].T
	if to != tensor.Float32 && to != tensor.Float64 {
		return nil, Unsupported("AttentionMask to %v", to)
	}
	if !x.DT.IsNumeric() && x.DT != tensor.Bool || x.DT == tensor.Float16 || x.DT == tensor.BFloat16 {
		return nil, Unsupported("AttentionMask of a %v mask", x.DT)
	}
	out, err := Map("attention_mask", func(v []loopir.Expr) loopir.Expr {
		c := v[0]
		if c.DType() != to {
			c = te.Cast(to, c)
		}
		return te.Mul(te.Sub(loopir.Float(1, to), c), loopir.Float(float64(a.Value), to))
	}, x)
	return []*te.Tensor{out}, err
}

// castTo converts x to another element type. Half floats (float16, bfloat16) convert
// through float32, the only type a kernel converts them to and from directly (float64
// narrows to float32 first, as package tensor does). Floats convert to integers with
// package tensor's rules (floatToInt), never C's undefined conversion of a value out of
// range.
func castTo(x *te.Tensor, to tensor.DType) ([]*te.Tensor, error) {
	ok := func(dt tensor.DType) bool { return dt.IsNumeric() || dt == tensor.Bool }
	if !ok(to) || !ok(x.DT) {
		return nil, Unsupported("Cast from %v to %v", x.DT, to)
	}
	out, err := Map("cast", func(v []loopir.Expr) loopir.Expr {
		e := v[0]
		if halfFloat(e.DType()) && to != e.DType() {
			e = te.Cast(tensor.Float32, e)
		}
		switch {
		case to == e.DType():
			return e
		case to == tensor.Bool:
			return loopir.Bin(loopir.NE, e, lit(0, e))
		case halfFloat(to) && e.DType() != tensor.Float32:
			e = te.Cast(tensor.Float32, e)
		case to.IsInt() && e.DType().IsFloat():
			return floatToInt(e, to)
		}
		return te.Cast(to, e)
	}, x)
	return []*te.Tensor{out}, err
}

// scalarConst reads a constant one-element input as a float.
func scalarConst(in []Input, i int) (float64, bool) {
	if i >= len(in) || in[i].Const == nil || in[i].Const.Len() != 1 || !in[i].Const.DType.IsNumeric() {
		return 0, false
	}
	return in[i].Const.Float64s()[0], true
}

// computeClip clamps to optional bounds; constant bounds become literals, others are
// read as scalar tensors.
func computeClip(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	bound := func(i int) (func() loopir.Expr, bool) {
		if i >= len(in) || !in[i].Present() {
			return nil, false
		}
		if v, ok := scalarConst(in, i); ok {
			return func() loopir.Expr { return lit(v, in[0].T.At(zeros(len(in[0].T.Shape))...)) }, true
		}
		t := in[i].T
		return func() loopir.Expr { return t.At(zeros(len(t.Shape))...) }, true
	}
	lo, hasLo := bound(1)
	hi, hasHi := bound(2)
	out, err := Map("clip", func(x []loopir.Expr) loopir.Expr {
		// the bound first: max and min answer their second operand when one is NaN
		// (a > b ? a : b), so a NaN input stays NaN as in ONNX Runtime
		v := x[0]
		if hasLo {
			v = loopir.Bin(loopir.Max, lo(), v)
		}
		if hasHi {
			v = loopir.Bin(loopir.Min, hi(), v)
		}
		return v
	}, in[0].T)
	return []*te.Tensor{out}, err
}

func zeros(n int) []loopir.Expr {
	out := make([]loopir.Expr, n)
	for i := range out {
		out[i] = loopir.Int(0)
	}
	return out
}
