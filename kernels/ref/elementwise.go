package ref

// Elementwise ops: unary maps, broadcasting binary and variadic ops, Where, Clip, Cast,
// kiln.AttentionMask. Floats are computed in float64 and rounded to the output type;
// integers stay in int64.

import (
	"math"
	"reflect"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

func elementwiseKernels() map[graph.Op]Kernel {
	k := map[graph.Op]Kernel{
		graph.OpIdentity: func(_ *Ctx, _ *graph.Node, in []Value) ([]Value, error) { return []Value{in[0]}, nil },
		graph.OpCast: T(func(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			y, err := castTensor(in[0], tensor.DType(attrs[graph.CastAttrs](n).To))
			return []*tensor.Tensor{y}, err
		}),
		graph.OpCastLike: T(func(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			y, err := castTensor(in[0], in[1].DType)
			return []*tensor.Tensor{y}, err
		}),
		graph.OpAttentionMask: T(elemAttentionMask),
		graph.OpNot: T(func(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			b, ok := in[0].Data.([]bool)
			if !ok {
				return nil, Badf("Not takes bool, got %v", in[0].DType)
			}
			out := make([]bool, len(b))
			for i, v := range b {
				out[i] = !v
			}
			return []*tensor.Tensor{tensor.MustFromSlice(in[0].Shape, out)}, nil
		}),
		graph.OpIsNaN: T(floatPredicate(func(_ *graph.Node) func(float64) bool { return math.IsNaN })),
		graph.OpIsInf: T(floatPredicate(func(n *graph.Node) func(float64) bool {
			a := attrs[graph.IsInfAttrs](n)
			return func(x float64) bool {
				return (a.DetectPositive != 0 && math.IsInf(x, 1)) || (a.DetectNegative != 0 && math.IsInf(x, -1))
			}
		})),
		graph.OpClip:  T(elemClip),
		graph.OpPRelu: T(elemPRelu),
		graph.OpWhere: T(elemWhere),
		graph.OpMax:   T(elemVariadic(math.Max, func(a, b int64) int64 { return max(a, b) }, false)),
		graph.OpMin:   T(elemVariadic(math.Min, func(a, b int64) int64 { return min(a, b) }, false)),
		graph.OpSum:   T(elemVariadic(func(a, b float64) float64 { return a + b }, func(a, b int64) int64 { return a + b }, false)),
		graph.OpMean:  T(elemVariadic(func(a, b float64) float64 { return a + b }, func(a, b int64) int64 { return a + b }, true)),
	}
	for op, f := range unaryFloat {
		k[op] = T(elemUnary(op, f))
	}
	for op, f := range binaryOps {
		k[op] = T(elemBinary(f))
	}
	for op, f := range compareOps {
		k[op] = T(elemCompare(f))
	}
	return k
}

// unaryFloat maps an op to its float function (given the node for attributes). Ops that
// are also defined on integers list an integer function in unaryInt.
var unaryFloat = map[graph.Op]func(n *graph.Node) func(float64) float64{
	graph.OpAbs: fixed(math.Abs), graph.OpAcos: fixed(math.Acos), graph.OpAcosh: fixed(math.Acosh),
	graph.OpAsin: fixed(math.Asin), graph.OpAsinh: fixed(math.Asinh), graph.OpAtan: fixed(math.Atan),
	graph.OpAtanh: fixed(math.Atanh), graph.OpCeil: fixed(math.Ceil), graph.OpCos: fixed(math.Cos),
	graph.OpCosh: fixed(math.Cosh), graph.OpErf: fixed(math.Erf), graph.OpExp: fixed(math.Exp),
	graph.OpFloor: fixed(math.Floor), graph.OpLog: fixed(math.Log), graph.OpNeg: fixed(func(x float64) float64 { return -x }),
	graph.OpReciprocal: fixed(func(x float64) float64 { return 1 / x }), graph.OpRound: fixed(math.RoundToEven),
	graph.OpSigmoid: fixed(sigmoid), graph.OpSin: fixed(math.Sin), graph.OpSinh: fixed(math.Sinh),
	graph.OpSqrt: fixed(math.Sqrt), graph.OpTan: fixed(math.Tan), graph.OpTanh: fixed(math.Tanh),
	graph.OpRelu:     fixed(func(x float64) float64 { return math.Max(x, 0) }),
	graph.OpSoftplus: fixed(softplus),
	graph.OpSoftsign: fixed(func(x float64) float64 { return x / (1 + math.Abs(x)) }),
	graph.OpMish:     fixed(func(x float64) float64 { return x * math.Tanh(softplus(x)) }),
	graph.OpHardSwish: fixed(func(x float64) float64 {
		return x * math.Max(0, math.Min(1, x/6+0.5))
	}),
	graph.OpSign: fixed(func(x float64) float64 {
		switch {
		case x > 0:
			return 1
		case x < 0:
			return -1
		}
		return x
	}),
	graph.OpBitwiseNot: nil, // integers only
	graph.OpLeakyRelu: func(n *graph.Node) func(float64) float64 {
		a := float64(attrs[graph.LeakyReluAttrs](n).Alpha)
		return func(x float64) float64 {
			if x < 0 {
				return a * x
			}
			return x
		}
	},
	graph.OpElu: func(n *graph.Node) func(float64) float64 {
		a := float64(attrs[graph.AlphaAttrs](n).Alpha)
		return func(x float64) float64 {
			if x < 0 {
				return a * (math.Exp(x) - 1)
			}
			return x
		}
	},
	graph.OpCelu: func(n *graph.Node) func(float64) float64 {
		a := float64(attrs[graph.AlphaAttrs](n).Alpha)
		return func(x float64) float64 { return math.Max(0, x) + math.Min(0, a*(math.Exp(x/a)-1)) }
	},
	graph.OpThresholdedRelu: func(n *graph.Node) func(float64) float64 {
		a := float64(attrs[graph.AlphaAttrs](n).Alpha)
		return func(x float64) float64 {
			if x > a {
				return x
			}
			return 0
		}
	},
	graph.OpSelu: func(n *graph.Node) func(float64) float64 {
		at := attrs[graph.SeluAttrs](n)
		a, g := float64(at.Alpha), float64(at.Gamma)
		return func(x float64) float64 {
			if x <= 0 {
				return g * (a*math.Exp(x) - a)
			}
			return g * x
		}
	},
	graph.OpHardSigmoid: func(n *graph.Node) func(float64) float64 {
		at := attrs[graph.HardSigmoidAttrs](n)
		a, b := float64(at.Alpha), float64(at.Beta)
		return func(x float64) float64 { return math.Max(0, math.Min(1, a*x+b)) }
	},
	graph.OpGelu: func(n *graph.Node) func(float64) float64 {
		if attrs[graph.GeluAttrs](n).Approximate == "tanh" {
			c := math.Sqrt(2 / math.Pi)
			return func(x float64) float64 { return 0.5 * x * (1 + math.Tanh(c*(x+0.044715*x*x*x))) }
		}
		return func(x float64) float64 { return 0.5 * x * (1 + math.Erf(x/math.Sqrt2)) }
	},
	graph.OpShrink: func(n *graph.Node) func(float64) float64 {
		at := attrs[graph.ShrinkAttrs](n)
		bias, l := float64(at.Bias), float64(at.Lambd)
		return func(x float64) float64 {
			switch {
			case x < -l:
				return x + bias
			case x > l:
				return x - bias
			}
			return 0
		}
	},
}

// unaryInt are the integer versions of unary ops defined on integers.
var unaryInt = map[graph.Op]func(int64) int64{
	graph.OpAbs: func(x int64) int64 { return max(x, -x) },
	graph.OpNeg: func(x int64) int64 { return -x },
	graph.OpSign: func(x int64) int64 {
		switch {
		case x > 0:
			return 1
		case x < 0:
			return -1
		}
		return 0
	},
	graph.OpRelu:       func(x int64) int64 { return max(x, 0) },
	graph.OpBitwiseNot: func(x int64) int64 { return ^x },
	graph.OpShrink:     nil, // handled through floats (its attributes are floats)
}

func fixed(f func(float64) float64) func(*graph.Node) func(float64) float64 {
	return func(*graph.Node) func(float64) float64 { return f }
}

func sigmoid(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + math.Exp(-x))
	}
	e := math.Exp(x)
	return e / (1 + e)
}

func softplus(x float64) float64 {
	if x > 0 {
		return x + math.Log1p(math.Exp(-x))
	}
	return math.Log1p(math.Exp(x))
}

func elemUnary(op graph.Op, mk func(*graph.Node) func(float64) float64) TensorKernel {
	return func(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		x := in[0]
		if x.DType.IsInt() {
			if fi := unaryInt[op]; fi != nil {
				v := x.Int64s()
				for i := range v {
					v[i] = fi(v[i])
				}
				return []*tensor.Tensor{tensor.FromInt64s(x.DType, x.Shape, v)}, nil
			}
		}
		if mk == nil || !x.DType.IsNumeric() {
			return nil, Badf("%v is not defined on %v", op, x.DType)
		}
		f := mk(n)
		v := x.Float64s()
		for i := range v {
			v[i] = f(v[i])
		}
		return []*tensor.Tensor{tensor.FromFloat64s(x.DType, x.Shape, v)}, nil
	}
}

// elemAttentionMask is (1 − Cast(m, to))·value as the Cast → Sub → Mul chain computes it:
// each step rounded to the output dtype, so the two agree for every mask value.
func elemAttentionMask(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	a := attrs[graph.AttentionMaskAttrs](n)
	to, x := tensor.DType(a.To), in[0]
	if to != tensor.Float32 && to != tensor.Float64 {
		return nil, Badf("AttentionMask to %v, want f32 or f64", to)
	}
	if !x.DType.IsNumeric() && x.DType != tensor.Bool {
		return nil, Badf("AttentionMask of a %v mask", x.DType)
	}
	round := func(v float64) float64 {
		if to == tensor.Float32 {
			return float64(float32(v))
		}
		return v
	}
	k := float64(a.Value)
	c := x.Cast(to).Float64s()
	out := make([]float64, len(c))
	for i, v := range c {
		out[i] = round(round(1-v) * k)
	}
	return []*tensor.Tensor{tensor.FromFloat64s(to, x.Shape, out)}, nil
}

func floatPredicate(mk func(*graph.Node) func(float64) bool) TensorKernel {
	return func(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		f := mk(n)
		v := in[0].Float64s()
		out := make([]bool, len(v))
		for i, x := range v {
			out[i] = f(x)
		}
		return []*tensor.Tensor{tensor.MustFromSlice(in[0].Shape, out)}, nil
	}
}

// binaryFn is one binary op: a float form, an integer form (nil: undefined on ints), and
// for ops whose attributes matter, a constructor from the node.
type binaryFn struct {
	f  func(n *graph.Node) func(a, b float64) float64
	i  func(n *graph.Node) func(a, b int64) (int64, error)
	ok func(dt tensor.DType) bool // accepted input dtypes (nil: numeric)
}

var binaryOps = map[graph.Op]binaryFn{
	graph.OpAdd: {f: ff(func(a, b float64) float64 { return a + b }), i: fi(func(a, b int64) int64 { return a + b })},
	graph.OpSub: {f: ff(func(a, b float64) float64 { return a - b }), i: fi(func(a, b int64) int64 { return a - b })},
	graph.OpMul: {f: ff(func(a, b float64) float64 { return a * b }), i: fi(func(a, b int64) int64 { return a * b })},
	graph.OpDiv: {f: ff(func(a, b float64) float64 { return a / b }), i: func(*graph.Node) func(a, b int64) (int64, error) {
		return func(a, b int64) (int64, error) {
			if b == 0 {
				return 0, Badf("integer division by zero")
			}
			return a / b, nil
		}
	}},
	graph.OpPow: {f: ff(math.Pow)},
	graph.OpMod: {
		f: func(n *graph.Node) func(a, b float64) float64 {
			if attrs[graph.ModAttrs](n).Fmod != 0 {
				return math.Mod
			}
			return func(a, b float64) float64 {
				r := math.Mod(a, b)
				if r != 0 && (r < 0) != (b < 0) {
					r += b
				}
				return r
			}
		},
		i: func(n *graph.Node) func(a, b int64) (int64, error) {
			fmod := attrs[graph.ModAttrs](n).Fmod != 0
			return func(a, b int64) (int64, error) {
				if b == 0 {
					return 0, Badf("integer modulo by zero")
				}
				r := a % b
				if !fmod && r != 0 && (r < 0) != (b < 0) {
					r += b
				}
				return r, nil
			}
		},
	},
	graph.OpBitShift: {i: func(n *graph.Node) func(a, b int64) (int64, error) {
		left := attrs[graph.BitShiftAttrs](n).Direction == "LEFT"
		return func(a, b int64) (int64, error) {
			if b < 0 || b >= 64 {
				return 0, nil
			}
			if left {
				return int64(uint64(a) << uint(b)), nil
			}
			return int64(uint64(a) >> uint(b)), nil
		}
	}},
	graph.OpBitwiseAnd: {i: fi(func(a, b int64) int64 { return a & b })},
	graph.OpBitwiseOr:  {i: fi(func(a, b int64) int64 { return a | b })},
	graph.OpBitwiseXor: {i: fi(func(a, b int64) int64 { return a ^ b })},
}

func ff(f func(a, b float64) float64) func(*graph.Node) func(a, b float64) float64 {
	return func(*graph.Node) func(a, b float64) float64 { return f }
}

func fi(f func(a, b int64) int64) func(*graph.Node) func(a, b int64) (int64, error) {
	return func(*graph.Node) func(a, b int64) (int64, error) {
		return func(a, b int64) (int64, error) { return f(a, b), nil }
	}
}

func elemBinary(fn binaryFn) TensorKernel {
	return func(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		a, b := in[0], in[1]
		shape, maps, err := broadcastAll(a, b)
		if err != nil {
			return nil, err
		}
		size := shape.NumElements()
		if a.DType.IsInt() && fn.i != nil && (b.DType.IsInt() || n.Op != graph.OpPow) {
			f := fn.i(n)
			av, bv := a.Int64s(), b.Int64s()
			out := make([]int64, size)
			for i := range out {
				if out[i], err = f(av[maps[0][i]], bv[maps[1][i]]); err != nil {
					return nil, err
				}
			}
			return []*tensor.Tensor{tensor.FromInt64s(a.DType, shape, out)}, nil
		}
		if fn.f == nil || !a.DType.IsNumeric() || !b.DType.IsNumeric() {
			return nil, Badf("%v is not defined on %v and %v", n.Op, a.DType, b.DType)
		}
		f := fn.f(n)
		av, bv := a.Float64s(), b.Float64s()
		out := make([]float64, size)
		for i := range out {
			out[i] = f(av[maps[0][i]], bv[maps[1][i]])
		}
		return []*tensor.Tensor{tensor.FromFloat64s(a.DType, shape, out)}, nil
	}
}

// compareOps return bool; they compare ints as ints, floats as floats, bools as 0/1.
var compareOps = map[graph.Op]func(c int) bool{
	graph.OpEqual:          func(c int) bool { return c == 0 },
	graph.OpGreater:        func(c int) bool { return c > 0 },
	graph.OpGreaterOrEqual: func(c int) bool { return c >= 0 },
	graph.OpLess:           func(c int) bool { return c < 0 },
	graph.OpLessOrEqual:    func(c int) bool { return c <= 0 },
	graph.OpAnd:            nil,
	graph.OpOr:             nil,
	graph.OpXor:            nil,
}

func elemCompare(pred func(c int) bool) TensorKernel {
	return func(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		a, b := in[0], in[1]
		shape, maps, err := broadcastAll(a, b)
		if err != nil {
			return nil, err
		}
		out := make([]bool, shape.NumElements())
		switch {
		case pred == nil: // logical ops
			ab, ok1 := a.Data.([]bool)
			bb, ok2 := b.Data.([]bool)
			if !ok1 || !ok2 {
				return nil, Badf("%v takes bool inputs, got %v and %v", n.Op, a.DType, b.DType)
			}
			for i := range out {
				x, y := ab[maps[0][i]], bb[maps[1][i]]
				switch n.Op {
				case graph.OpAnd:
					out[i] = x && y
				case graph.OpOr:
					out[i] = x || y
				default:
					out[i] = x != y
				}
			}
		case a.DType == tensor.String:
			as, ok := b.Data.([]string)
			if !ok {
				return nil, Badf("comparing strings with %v", b.DType)
			}
			bs := a.Data.([]string)
			for i := range out {
				out[i] = pred(cmpOrdered(bs[maps[0][i]], as[maps[1][i]]))
			}
		case a.DType.IsFloat() || b.DType.IsFloat():
			av, bv := a.Float64s(), b.Float64s()
			for i := range out {
				x, y := av[maps[0][i]], bv[maps[1][i]]
				if math.IsNaN(x) || math.IsNaN(y) {
					continue // every comparison with NaN is false
				}
				out[i] = pred(cmpOrdered(x, y))
			}
		default:
			av, bv := a.Int64s(), b.Int64s()
			unsigned := a.DType == tensor.Uint64
			for i := range out {
				x, y := av[maps[0][i]], bv[maps[1][i]]
				if unsigned {
					out[i] = pred(cmpOrdered(uint64(x), uint64(y)))
				} else {
					out[i] = pred(cmpOrdered(x, y))
				}
			}
		}
		return []*tensor.Tensor{tensor.MustFromSlice(shape, out)}, nil
	}
}

func cmpOrdered[T int64 | uint64 | float64 | string](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func elemVariadic(f func(a, b float64) float64, g func(a, b int64) int64, mean bool) TensorKernel {
	return func(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		shape, maps, err := broadcastAll(in...)
		if err != nil {
			return nil, err
		}
		dt := in[0].DType
		size := shape.NumElements()
		if dt.IsInt() && !mean {
			acc := make([]int64, size)
			for k, t := range in {
				v := t.Int64s()
				for i := range acc {
					if k == 0 {
						acc[i] = v[maps[k][i]]
					} else {
						acc[i] = g(acc[i], v[maps[k][i]])
					}
				}
			}
			return []*tensor.Tensor{tensor.FromInt64s(dt, shape, acc)}, nil
		}
		acc := make([]float64, size)
		for k, t := range in {
			v := t.Float64s()
			for i := range acc {
				x := v[maps[k][i]]
				switch {
				case k == 0:
					acc[i] = x
				case math.IsNaN(x) || math.IsNaN(acc[i]):
					acc[i] = math.NaN()
				default:
					acc[i] = f(acc[i], x)
				}
			}
		}
		if mean {
			for i := range acc {
				acc[i] /= float64(len(in))
			}
		}
		return []*tensor.Tensor{tensor.FromFloat64s(dt, shape, acc)}, nil
	}
}

func elemClip(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := in[0]
	bound := func(i int) (*tensor.Tensor, error) {
		if i >= len(in) || in[i] == nil {
			return nil, nil
		}
		if in[i].Len() != 1 {
			return nil, Badf("Clip bound %d has %d elements, want 1", i, in[i].Len())
		}
		return in[i], nil
	}
	lo, err := bound(1)
	if err != nil {
		return nil, err
	}
	hi, err := bound(2)
	if err != nil {
		return nil, err
	}
	if x.DType.IsInt() {
		lov, hiv := int64(math.MinInt64), int64(math.MaxInt64)
		if lo != nil {
			lov = lo.Int64s()[0]
		}
		if hi != nil {
			hiv = hi.Int64s()[0]
		}
		v := x.Int64s()
		for i := range v {
			v[i] = min(max(v[i], lov), hiv)
		}
		return []*tensor.Tensor{tensor.FromInt64s(x.DType, x.Shape, v)}, nil
	}
	lov, hiv := math.Inf(-1), math.Inf(1)
	if lo != nil {
		lov = lo.Float64s()[0]
	}
	if hi != nil {
		hiv = hi.Float64s()[0]
	}
	v := x.Float64s()
	for i := range v {
		// comparisons keep NaN as it is
		if v[i] < lov {
			v[i] = lov
		}
		if v[i] > hiv {
			v[i] = hiv
		}
	}
	return []*tensor.Tensor{tensor.FromFloat64s(x.DType, x.Shape, v)}, nil
}

func elemPRelu(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, s := in[0], in[1]
	shape, maps, err := broadcastAll(x, s)
	if err != nil {
		return nil, err
	}
	xv, sv := x.Float64s(), s.Float64s()
	out := make([]float64, shape.NumElements())
	for i := range out {
		v := xv[maps[0][i]]
		if v < 0 {
			v *= sv[maps[1][i]]
		}
		out[i] = v
	}
	return []*tensor.Tensor{tensor.FromFloat64s(x.DType, shape, out)}, nil
}

func elemWhere(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	c, ok := in[0].Data.([]bool)
	if !ok {
		return nil, Badf("Where condition is %v, want bool", in[0].DType)
	}
	x, y := in[1], in[2]
	if x.DType != y.DType {
		return nil, Badf("Where branches are %v and %v", x.DType, y.DType)
	}
	shape, maps, err := broadcastAll(in[0], x, y)
	if err != nil {
		return nil, err
	}
	out := tensor.New(x.DType, shape)
	dst, xs, ys := reflect.ValueOf(out.Data), reflect.ValueOf(x.Data), reflect.ValueOf(y.Data)
	for i := 0; i < dst.Len(); i++ {
		if c[maps[0][i]] {
			dst.Index(i).Set(xs.Index(maps[1][i]))
		} else {
			dst.Index(i).Set(ys.Index(maps[2][i]))
		}
	}
	return []*tensor.Tensor{out}, nil
}
