package cpu

import (
	"errors"
	"math"
	"testing"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/graph"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/internal/testdata"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/tensor"
)

// withEdges is n random values in [lo, hi] followed by the edge values.
func withEdges(dt tensor.DType, seed uint64, n int, lo, hi float64, edges ...float64) *tensor.Tensor {
	r := f32(seed, n).Float64s()
	v := make([]float64, 0, n+len(edges))
	for _, x := range r {
		v = append(v, lo+(hi-lo)*(x+1)/2) // kt.Random is in [-1, 1)
	}
	v = append(v, edges...)
	return tensor.FromFloat64s(dt, tensor.Shape{len(v)}, v)
}

var nan, inf = math.NaN(), math.Inf(1)

// TestInverseTrigMatchesReference runs Asin … Atanh on float32 and float64 over their
// domains, the domain edges (±1 for asin, acos and atanh, where atanh is ±inf; 1 for
// acosh), just outside them (NaN), ±0, ±inf and NaN.
func TestInverseTrigMatchesReference(t *testing.T) {
	l := Strategies(kernels.Default())
	common := []float64{0, math.Copysign(0, -1), nan, inf, -inf}
	cases := []struct {
		op     graph.Op
		lo, hi float64
		edges  []float64
	}{
		{graph.OpAsin, -1, 1, []float64{1, -1, 1.0000001, -1.0000001}},
		{graph.OpAcos, -1, 1, []float64{1, -1, 1.0000001, -1.0000001}},
		{graph.OpAtan, -50, 50, []float64{1e30, -1e30}},
		{graph.OpAsinh, -50, 50, []float64{1e30, -1e30, 1e-30}},
		{graph.OpAcosh, 1, 50, []float64{1, 0.9999999, -1, 1e30}},
		{graph.OpAtanh, -1, 1, []float64{1, -1, 0.9999999, 1.0000001, -1.5}},
	}
	for _, c := range cases {
		for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64} {
			nt.CheckNode(t, l, c.op, nil, 1, nt.In(withEdges(dt, uint64(c.op), 300, c.lo, c.hi, append(c.edges, common...)...)))
		}
	}
}

func ints(dt tensor.DType, v ...int64) *tensor.Tensor {
	return tensor.FromInt64s(dt, tensor.Shape{len(v)}, v)
}

// TestBitShiftPastTheWidthGivesZero shifts each unsigned width left and right by every
// count from 0 to width+2 and by a huge count, as the reference does (0 past the width).
func TestBitShiftPastTheWidthGivesZero(t *testing.T) {
	l := Strategies(kernels.Default())
	for _, dt := range []tensor.DType{tensor.Uint8, tensor.Uint16, tensor.Uint32, tensor.Uint64} {
		w := int64(8 * dt.Size())
		var xs, ss []int64
		for s := int64(0); s <= w+2; s++ {
			xs = append(xs, int64(uint64(0xf0e1d2c3b4a59687)>>(s%5)), 1)
			ss = append(ss, s, s)
		}
		xs, ss = append(xs, -1), append(ss, -1) // all ones, shifted by the largest count
		for _, dir := range []string{"LEFT", "RIGHT"} {
			a := graph.OpBitShift.NewAttrs().(*graph.BitShiftAttrs)
			a.Direction = dir
			nt.CheckNode(t, l, graph.OpBitShift, a, 1, nt.In(ints(dt, xs...)), nt.In(ints(dt, ss...)))
		}
	}
}

// TestIntegerPowMatchesReference: integer bases with integer and float exponents,
// including 0^0, negative bases, negative exponents (truncated; 0^-1 is +inf, which
// converts to MinInt64 and wraps), results past 2^53 and past int64.
func TestIntegerPowMatchesReference(t *testing.T) {
	l := Strategies(kernels.Default())
	var base, exp []int64
	for b := int64(-3); b <= 3; b++ {
		for e := int64(-2); e <= 5; e++ {
			base, exp = append(base, b), append(exp, e)
		}
	}
	base, exp = append(base, 10, 10, -10, 3, 2), append(exp, 18, 19, 19, 39, 63)
	for _, dt := range []tensor.DType{tensor.Int32, tensor.Int64, tensor.Uint8} {
		b := ints(dt, base...)
		nt.CheckNode(t, l, graph.OpPow, nil, 1, nt.In(b), nt.In(ints(dt, exp...)))
		nt.CheckNode(t, l, graph.OpPow, nil, 1, nt.In(b), nt.In(ints(tensor.Int64, exp...)))
		fe := make([]float64, len(exp))
		for i, e := range exp {
			fe[i] = float64(e) / 2
		}
		nt.CheckNode(t, l, graph.OpPow, nil, 1, nt.In(b), nt.In(tensor.FromFloat64s(tensor.Float32, tensor.Shape{len(fe)}, fe)))
	}
}

// TestModSignRules: fmod=1 takes the dividend's sign (C), fmod=0 the divisor's
// (Python), on floats (with zero divisors and infinite dividends, NaN) and integers.
func TestModSignRules(t *testing.T) {
	l := Strategies(kernels.Default())
	a := []float64{7, -7, 7, -7, 7.5, -7.5, 0, 6, -6, 5, inf, nan, 5, 1e30}
	b := []float64{3, 3, -3, -3, 2, 2, 3, 3, -3, 0, 2, 2, inf, 7}
	for _, fmod := range []int64{0, 1} {
		at := &graph.ModAttrs{Fmod: fmod}
		for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64, tensor.Float16} {
			x := tensor.FromFloat64s(dt, tensor.Shape{len(a)}, a)
			y := tensor.FromFloat64s(dt, tensor.Shape{len(b)}, b)
			nt.CheckNode(t, l, graph.OpMod, at, 1, nt.In(x), nt.In(y))
		}
		for _, dt := range []tensor.DType{tensor.Int32, tensor.Int64, tensor.Int8} {
			nt.CheckNode(t, l, graph.OpMod, at, 1, nt.In(ints(dt, 7, -7, 7, -7, 0, 6, -6, 127, -128)), nt.In(ints(dt, 3, 3, -3, -3, 3, 3, -3, -2, 3)))
		}
	}
}

// TestCumSumAlongEveryAxis: each exclusive/reverse combination along every axis (and a
// negative one), the axis a constant and a run-time input, on float32 and int32.
func TestCumSumAlongEveryAxis(t *testing.T) {
	l := Strategies(kernels.Default())
	x := f32(7, 2, 3, 5)
	xi := tensor.FromFloat64s(tensor.Int32, x.Shape, func() []float64 {
		v := x.Float64s()
		for i := range v {
			v[i] = math.Round(v[i] * 100)
		}
		return v
	}())
	for _, ex := range []int64{0, 1} {
		for _, rev := range []int64{0, 1} {
			a := &graph.CumSumAttrs{Exclusive: ex, Reverse: rev}
			for _, axis := range []int64{0, 1, 2, -1} {
				ax := tensor.Scalar[int64](axis)
				for _, in := range []*tensor.Tensor{x, xi} {
					nt.CheckNode(t, l, graph.OpCumSum, a, 1, nt.In(in), nt.C(ax))
					nt.CheckNode(t, l, graph.OpCumSum, a, 1, nt.In(in), nt.In(ax))
				}
			}
		}
	}
}

// runErr runs one node and returns the kernel's error.
func runErr(t *testing.T, op graph.Op, attrs any, args ...nt.Arg) error {
	t.Helper()
	m, _ := nt.Build(t, op, attrs, 1, args...)
	_, _, err := nt.RunNode(Strategies(kernels.Default()), m.Main.Nodes[len(m.Main.Nodes)-1], args)
	if errors.Is(err, devices.ErrUnavailable) {
		testdata.NoCompiler(t, err)
	}
	return err
}

// TestCumSumRunTimeAxisOutOfRangeFailsTheKernel: an axis outside [-rank, rank) read at
// run time is an error, not a sum along a clamped axis.
func TestCumSumRunTimeAxisOutOfRangeFailsTheKernel(t *testing.T) {
	for _, axis := range []int64{3, -4} {
		if err := runErr(t, graph.OpCumSum, &graph.CumSumAttrs{}, nt.In(f32(1, 2, 3, 4)), nt.In(tensor.Scalar[int64](axis))); err == nil {
			t.Errorf("axis %d: the kernel ran", axis)
		}
	}
	if err := runErr(t, graph.OpCumSum, &graph.CumSumAttrs{}, nt.In(f32(1, 2, 3, 4)), nt.In(tensor.Scalar[int64](-3))); err != nil {
		t.Errorf("axis -3: %v", err)
	}
}

// TestEyeLikeDiagonalsAndTypes: diagonals above, on, below and outside a non-square
// matrix, in the input's type and in others.
func TestEyeLikeDiagonalsAndTypes(t *testing.T) {
	l := Strategies(kernels.Default())
	for _, k := range []int64{-4, -1, 0, 2, 7} {
		for _, dt := range []int64{0, int64(tensor.Int32), int64(tensor.Float64), int64(tensor.Uint8), int64(tensor.Bool)} {
			nt.CheckNode(t, l, graph.OpEyeLike, &graph.EyeLikeAttrs{K: k, DType: dt}, 1, nt.In(f32(3, 3, 5)))
		}
	}
}

// TestReverseSequenceLengths: lengths 0, 1, partial and full, with the batch on either
// axis; a length past the time axis or negative fails the kernel.
func TestReverseSequenceLengths(t *testing.T) {
	l := Strategies(kernels.Default())
	x := f32(4, 4, 3, 2)
	nt.CheckNode(t, l, graph.OpReverseSequence, &graph.ReverseSequenceAttrs{BatchAxis: 1, TimeAxis: 0}, 1, nt.In(x), nt.In(ints(tensor.Int64, 4, 1, 0)))
	y := f32(5, 3, 4, 2)
	nt.CheckNode(t, l, graph.OpReverseSequence, &graph.ReverseSequenceAttrs{BatchAxis: 0, TimeAxis: 1}, 1, nt.In(y), nt.In(ints(tensor.Int64, 2, 4, 3)))
	for _, bad := range []int64{5, -1} {
		err := runErr(t, graph.OpReverseSequence, &graph.ReverseSequenceAttrs{BatchAxis: 1, TimeAxis: 0}, nt.In(x), nt.In(ints(tensor.Int64, 4, bad, 0)))
		if err == nil {
			t.Errorf("length %d: the kernel ran", bad)
		}
	}
}

// TestWindowsPeriodicAndSymmetric: each window, periodic and symmetric, at sizes 1 (a
// symmetric window of one point is 0/0: NaN, as in the reference), 2 and 10, in float32
// and float64.
func TestWindowsPeriodicAndSymmetric(t *testing.T) {
	l := Strategies(kernels.Default())
	for _, op := range []graph.Op{graph.OpHannWindow, graph.OpHammingWindow, graph.OpBlackmanWindow} {
		for _, periodic := range []int64{0, 1} {
			for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64} {
				for _, n := range []int64{1, 2, 10} {
					a := &graph.WindowAttrs{OutputDatatype: int64(dt), Periodic: periodic}
					nt.CheckNode(t, l, op, a, 1, nt.C(tensor.Scalar[int64](n)))
				}
			}
		}
	}
}

// TestHalfFloatCastsAndArithmetic: Cast to and from float16 and bfloat16 from float32,
// float64 and integers (through float32), and elementwise ops on half floats computed
// in float32.
func TestHalfFloatCastsAndArithmetic(t *testing.T) {
	l := Strategies(kernels.Default())
	vals := []float64{0, -0.5, 1, 1 + 1.0/2048, 65504, 65520, -70000, 1e-7, 6e-8, inf, -inf, nan, 3.14159, -2.71828}
	for _, half := range []tensor.DType{tensor.Float16, tensor.BFloat16} {
		for _, from := range []tensor.DType{tensor.Float32, tensor.Float64, tensor.Int32} {
			v := vals
			if from == tensor.Int32 {
				v = []float64{0, 1, -7, 65504, 1 << 20, -(1 << 30)}
			}
			x := tensor.FromFloat64s(from, tensor.Shape{len(v)}, v)
			nt.CheckNode(t, l, graph.OpCast, &graph.CastAttrs{To: int64(half)}, 1, nt.In(x))
			h := tensor.FromFloat64s(half, tensor.Shape{len(v)}, v)
			nt.CheckNode(t, l, graph.OpCast, &graph.CastAttrs{To: int64(from)}, 1, nt.In(h))
			nt.CheckNode(t, l, graph.OpCastLike, nil, 1, nt.In(x), nt.In(tensor.FromFloat64s(half, tensor.Shape{1}, []float64{0})))
		}
		x := tensor.FromFloat64s(half, tensor.Shape{len(vals)}, vals)
		y := tensor.FromFloat64s(half, tensor.Shape{len(vals)}, f32(9, len(vals)).Float64s())
		for _, op := range []graph.Op{graph.OpAdd, graph.OpMul, graph.OpMax, graph.OpLess} {
			nt.CheckNode(t, l, op, nil, 1, nt.In(x), nt.In(y))
		}
		nt.CheckNode(t, l, graph.OpSqrt, nil, 1, nt.In(y))
	}
}

// TestWindowOverASymbolicSize: one window kernel whose size is a symbol (a
// kiln.ShapeExpr) serves every size.
func TestWindowOverASymbolicSize(t *testing.T) {
	l := Strategies(kernels.Default())
	for _, op := range []graph.Op{graph.OpHannWindow, graph.OpBlackmanWindow} {
		for _, periodic := range []int64{0, 1} {
			a := &graph.WindowAttrs{OutputDatatype: int64(tensor.Float32), Periodic: periodic}
			nt.CheckSymbolic(t, l, op, a, 1, []nt.SymArg{nt.ScalarOf("n")}, map[string]int64{"n": 1}, map[string]int64{"n": 4}, map[string]int64{"n": 9})
		}
	}
}

// TestMaxMinPropagateNaN: Max and Min of float32 and float64 give NaN when either
// operand is NaN, whichever side, as the reference evaluator does.
func TestMaxMinPropagateNaN(t *testing.T) {
	l := Strategies(kernels.Default())
	a := []float64{nan, 1, nan, -2, 0, inf}
	b := []float64{1, nan, nan, -3, -inf, nan}
	for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64} {
		x := tensor.FromFloat64s(dt, tensor.Shape{len(a)}, a)
		y := tensor.FromFloat64s(dt, tensor.Shape{len(b)}, b)
		for _, op := range []graph.Op{graph.OpMax, graph.OpMin} {
			nt.CheckNode(t, l, op, nil, 1, nt.In(x), nt.In(y))
			nt.CheckNode(t, l, op, nil, 1, nt.In(y), nt.In(x))
		}
		// relu is max(0, x): NaN stays NaN (it answered 0)
		nt.CheckNode(t, l, graph.OpRelu, nil, 1, nt.In(withEdges(dt, 3, 40, -1, 1, nan, inf, -inf, 0)))
	}
}

// TestLogicOnBoolTensors: And, Or and Xor of two bool tensors whose element counts are
// not whole vectors of bytes (72, 100, 48): GCC 12 at -O3 with AVX-512 vectorized a
// short-circuit || of two byte loads under the wrong lanes' mask and answered false
// where an input held true; both sides now combine bitwise as 0 or 1.
func TestLogicOnBoolTensors(t *testing.T) {
	l := Strategies(kernels.Default())
	for _, shape := range []tensor.Shape{{3, 4, 6}, {10, 10}, {4, 12}, {2, 3, 8}} {
		for _, op := range []graph.Op{graph.OpAnd, graph.OpOr, graph.OpXor} {
			a, b := f32(uint64(op), shape...).Float64s(), f32(uint64(op)+7, shape...).Float64s()
			x, y := make([]int64, len(a)), make([]int64, len(b))
			for i := range a {
				x[i], y[i] = int64(max(0, math.Ceil(a[i]))), int64(max(0, math.Ceil(b[i])))
			}
			nt.CheckNode(t, l, op, nil, 1, nt.In(tensor.FromInt64s(tensor.Bool, shape, x)), nt.In(tensor.FromInt64s(tensor.Bool, shape, y)))
		}
	}
}

// TestActivationsPastExpOverflow: Softplus, Mish, Sinh and Cosh on float32 past where
// e^x overflows (88.7) but their result does not, and at ±inf and NaN; Clip keeps NaN.
func TestActivationsPastExpOverflow(t *testing.T) {
	l := Strategies(kernels.Default())
	edges := []float64{88, 88.8, 89.3, 97.5, 1000, 1e5, -88.8, -89.3, -1000, 0, nan, inf, -inf}
	for _, op := range []graph.Op{graph.OpSoftplus, graph.OpMish, graph.OpSinh, graph.OpCosh} {
		nt.CheckNode(t, l, op, nil, 1, nt.In(withEdges(tensor.Float32, uint64(op), 100, -20, 20, edges...)))
	}
	lo, hi := tensor.FromFloat64s(tensor.Float32, tensor.Shape{}, []float64{-0.5}), tensor.FromFloat64s(tensor.Float32, tensor.Shape{}, []float64{0.5})
	nt.CheckNode(t, l, graph.OpClip, nil, 1, nt.In(withEdges(tensor.Float32, 5, 50, -2, 2, nan, inf, -inf)), nt.C(lo), nt.C(hi))
}
