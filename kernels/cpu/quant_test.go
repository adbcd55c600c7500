package cpu

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/graph"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/internal/testdata"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// quantTensor is a tensor of dt and shape with values drawn uniformly from [lo, hi]
// (integers for integer types).
func quantTensor(seed uint64, dt tensor.DType, lo, hi float64, shape ...int) *tensor.Tensor {
	r := rand.New(rand.NewPCG(seed, 7))
	v := make([]float64, tensor.Shape(shape).NumElements())
	for i := range v {
		v[i] = lo + r.Float64()*(hi-lo)
		if dt.IsInt() {
			v[i] = math.Floor(lo + r.Float64()*(hi-lo+1))
		}
	}
	return tensor.FromFloat64s(dt, tensor.Shape(shape), v)
}

// exactAgainstRef runs op over args through the CPU strategies and fails unless every
// output equals the reference evaluator's element for element (floats included).
func exactAgainstRef(t *testing.T, what string, op graph.Op, attrs any, numOut int, args ...nt.Arg) {
	t.Helper()
	mod, in := nt.Build(t, op, attrs, numOut, args...)
	want, err := ref.Eval(mod, in, ref.Options{})
	if err != nil {
		t.Fatalf("%s: reference: %v", what, err)
	}
	got, _, err := nt.RunNode(Strategies(kernels.Default()), mod.Main.Nodes[len(mod.Main.Nodes)-1], args)
	if errors.Is(err, devices.ErrUnavailable) {
		testdata.NoCompiler(t, err)
	}
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	for o := range want {
		wt := want[o].(*tensor.Tensor)
		if got[o].DType != wt.DType || !got[o].Shape.Equal(wt.Shape) {
			t.Fatalf("%s: output %d is %v%v, want %v%v", what, o, got[o].DType, got[o].Shape, wt.DType, wt.Shape)
		}
		g, w := got[o].Float64s(), wt.Float64s()
		for i := range w {
			if g[i] != w[i] {
				t.Fatalf("%s: output %d element %d = %v, want %v", what, o, i, g[i], w[i])
			}
		}
	}
}

// TestQuantizeLinearRoundsHalfToEvenAndSaturates: QuantizeLinear to every 8-, 16- and
// 32-bit type, per tensor and per axis (axis 1 and the last axis), with and without a
// zero point, on random values, exact halves (x/scale = k + 0.5, both parities) and
// values far outside the range: equal to the reference evaluator element for element.
func TestQuantizeLinearRoundsHalfToEvenAndSaturates(t *testing.T) {
	x := quantTensor(1, tensor.Float32, -300, 300, 2, 3, 4, 5)
	xv := x.Float64s()
	for i := 0; i < len(xv); i += 3 {
		xv[i] = float64(i%40-20) * 0.25 // with scale 0.5: a half every other value
	}
	xv[1], xv[2], xv[4] = 1e9, -1e9, 2.5e5
	x = tensor.FromFloat64s(tensor.Float32, x.Shape, xv)
	half := tensor.FromFloat64s(tensor.Float32, tensor.Shape{}, []float64{0.5})
	for _, dt := range []tensor.DType{tensor.Uint8, tensor.Int8, tensor.Uint16, tensor.Int16, tensor.Int32} {
		lo, hi := -7.0, 9.0
		if dt.IsUnsigned() {
			lo = 0
		}
		zp := tensor.FromFloat64s(dt, tensor.Shape{}, []float64{hi})
		exactAgainstRef(t, "per tensor "+dt.String(), graph.OpQuantizeLinear, &graph.QuantAttrs{Axis: 1}, 1, nt.In(x), nt.In(half), nt.In(zp))
		for _, axis := range []int64{1, -1} {
			c := x.Shape[1]
			if axis == -1 {
				c = x.Shape[3]
			}
			scales := quantTensor(uint64(10+c), tensor.Float32, 0.25, 3, c)
			sv := scales.Float64s()
			sv[0] = 0.5
			scales = tensor.FromFloat64s(tensor.Float32, tensor.Shape{c}, sv)
			zps := quantTensor(uint64(20+c), dt, lo, hi, c)
			exactAgainstRef(t, "per axis "+dt.String(), graph.OpQuantizeLinear, &graph.QuantAttrs{Axis: axis}, 1, nt.In(x), nt.In(scales), nt.In(zps))
		}
	}
	exactAgainstRef(t, "no zero point", graph.OpQuantizeLinear, &graph.QuantAttrs{Axis: 1}, 1, nt.In(x), nt.In(half))
	exactAgainstRef(t, "scalar input, axis out of range", graph.OpQuantizeLinear, &graph.QuantAttrs{Axis: 1}, 1,
		nt.In(tensor.FromFloat64s(tensor.Float32, tensor.Shape{}, []float64{-2.75})), nt.In(half))
}

// TestDequantizeLinearPerTensorAndPerAxis: DequantizeLinear of every 8-, 16- and 32-bit
// type, per tensor and per axis zero points and scales (float32, and float64), the
// extremes of each type included: equal to the reference evaluator element for element.
func TestDequantizeLinearPerTensorAndPerAxis(t *testing.T) {
	for _, dt := range []tensor.DType{tensor.Uint8, tensor.Int8, tensor.Uint16, tensor.Int16, tensor.Int32} {
		lo, hi := -128.0, 127.0
		switch dt {
		case tensor.Uint8:
			lo, hi = 0, 255
		case tensor.Uint16:
			lo, hi = 0, 65535
		case tensor.Int16:
			lo, hi = -32768, 32767
		case tensor.Int32:
			lo, hi = -3e9/2, 3e9/2
		}
		x := quantTensor(2, dt, lo, hi, 3, 4, 7)
		xv := x.Float64s()
		xv[0], xv[1] = lo, hi
		x = tensor.FromFloat64s(dt, x.Shape, xv)
		s := tensor.FromFloat64s(tensor.Float32, tensor.Shape{}, []float64{0.0137})
		z := tensor.FromFloat64s(dt, tensor.Shape{}, []float64{math.Round((lo + hi) / 3)})
		exactAgainstRef(t, "per tensor "+dt.String(), graph.OpDequantizeLinear, &graph.QuantAttrs{Axis: 1}, 1, nt.In(x), nt.In(s), nt.In(z))
		ss := quantTensor(3, tensor.Float32, 0.001, 0.3, 4)
		zs := quantTensor(4, dt, lo/2, hi/2, 4)
		exactAgainstRef(t, "per axis "+dt.String(), graph.OpDequantizeLinear, &graph.QuantAttrs{Axis: -2}, 1, nt.In(x), nt.In(ss), nt.In(zs))
		exactAgainstRef(t, "no zero point "+dt.String(), graph.OpDequantizeLinear, &graph.QuantAttrs{Axis: 1}, 1, nt.In(x), nt.In(s))
		s64 := tensor.FromFloat64s(tensor.Float64, tensor.Shape{}, []float64{0.01370000000000001})
		exactAgainstRef(t, "float64 scale "+dt.String(), graph.OpDequantizeLinear, &graph.QuantAttrs{Axis: 1}, 1, nt.In(x), nt.In(s64), nt.In(z))
	}
}

// TestDynamicQuantizeLinearOutputsMatchRef: y, y_scale and y_zero_point of
// DynamicQuantizeLinear over mixed, all-positive (the range widened to 0), all-negative
// and all-zero inputs (scale 0: y and the zero point are 0), of rank 1 to 3.
func TestDynamicQuantizeLinearOutputsMatchRef(t *testing.T) {
	cases := map[string]*tensor.Tensor{
		"mixed":    quantTensor(5, tensor.Float32, -3, 7, 4, 5, 33),
		"positive": quantTensor(6, tensor.Float32, 1, 9, 2, 17),
		"negative": quantTensor(7, tensor.Float32, -5, -0.5, 65),
		"zero":     tensor.FromFloat64s(tensor.Float32, tensor.Shape{3, 4}, make([]float64, 12)),
	}
	for name, x := range cases {
		exactAgainstRef(t, name, graph.OpDynamicQuantizeLinear, nil, 3, nt.In(x))
	}
}

// TestDynamicQuantizeLinearOverSymbolicRows: one kernel over a symbolic leading extent,
// run at several extents.
func TestDynamicQuantizeLinearOverSymbolicRows(t *testing.T) {
	l := Strategies(kernels.Default())
	nt.CheckSymbolic(t, l, graph.OpDynamicQuantizeLinear, nil, 3, []nt.SymArg{nt.Sym(tensor.Float32, "n", "9")},
		map[string]int64{"n": 1}, map[string]int64{"n": 5}, map[string]int64{"n": 12})
}

// TestMatMulIntegerZeroPointsMatchRef: MatMulInteger of uint8 × int8 and int8 × uint8
// operands with per-tensor, per-row (a) and per-column (b) zero points, absent ones,
// constant zeros (left out of the product), a batch of matrices and a vector a: the
// int32 result equals the reference evaluator's.
func TestMatMulIntegerZeroPointsMatchRef(t *testing.T) {
	const m, k, n = 5, 37, 6
	a := quantTensor(30, tensor.Uint8, 0, 255, m, k)
	b := quantTensor(31, tensor.Int8, -128, 127, k, n)
	za := quantTensor(32, tensor.Uint8, 0, 255, m)
	zb := quantTensor(33, tensor.Int8, -128, 127, n)
	one := func(dt tensor.DType, v float64) *tensor.Tensor {
		return tensor.FromFloat64s(dt, tensor.Shape{}, []float64{v})
	}
	exactAgainstRef(t, "per tensor", graph.OpMatMulInteger, nil, 1, nt.In(a), nt.In(b), nt.In(one(tensor.Uint8, 131)), nt.In(one(tensor.Int8, -3)))
	exactAgainstRef(t, "per row and column", graph.OpMatMulInteger, nil, 1, nt.In(a), nt.In(b), nt.In(za), nt.In(zb))
	exactAgainstRef(t, "constant b", graph.OpMatMulInteger, nil, 1, nt.In(a), nt.C(b), nt.In(za), nt.C(zb))
	exactAgainstRef(t, "no zero points", graph.OpMatMulInteger, nil, 1, nt.In(a), nt.In(b))
	exactAgainstRef(t, "constant zero zero points", graph.OpMatMulInteger, nil, 1, nt.In(a), nt.C(b),
		nt.C(tensor.FromFloat64s(tensor.Uint8, tensor.Shape{m}, make([]float64, m))), nt.C(one(tensor.Int8, 0)))
	a3 := quantTensor(34, tensor.Int8, -128, 127, 2, 3, m, k)
	b3 := quantTensor(35, tensor.Uint8, 0, 255, 3, k, n)
	exactAgainstRef(t, "batched", graph.OpMatMulInteger, nil, 1, nt.In(a3), nt.In(b3), nt.In(one(tensor.Int8, 5)), nt.In(quantTensor(36, tensor.Uint8, 0, 255, n)))
	exactAgainstRef(t, "vector a", graph.OpMatMulInteger, nil, 1, nt.In(quantTensor(37, tensor.Uint8, 0, 255, k)), nt.In(b), nt.In(one(tensor.Uint8, 128)), nt.In(zb))
}

// TestConvIntegerZeroPointsMatchRef: ConvInteger with padding (which reads as the zero
// point: it contributes nothing), strides, dilations, groups, a per-tensor x zero point
// and per-output-channel w zero points: the int32 result equals the reference's.
func TestConvIntegerZeroPointsMatchRef(t *testing.T) {
	x := quantTensor(40, tensor.Uint8, 0, 255, 2, 4, 9, 8)
	w := quantTensor(41, tensor.Int8, -128, 127, 6, 2, 3, 3)
	zx := tensor.FromFloat64s(tensor.Uint8, tensor.Shape{}, []float64{119})
	zw := quantTensor(42, tensor.Int8, -20, 20, 6)
	attrs := func(group int64, pads, strides, dil []int64) *graph.ConvAttrs {
		return &graph.ConvAttrs{AutoPad: "NOTSET", Group: group, Pads: pads, Strides: strides, Dilations: dil}
	}
	exactAgainstRef(t, "padded, 2 groups", graph.OpConvInteger, attrs(2, []int64{1, 1, 1, 1}, nil, nil), 1, nt.In(x), nt.C(w), nt.In(zx), nt.C(zw))
	exactAgainstRef(t, "strided, dilated", graph.OpConvInteger, attrs(2, []int64{0, 2, 1, 0}, []int64{2, 1}, []int64{1, 2}), 1, nt.In(x), nt.In(w), nt.In(zx), nt.In(zw))
	w1 := quantTensor(43, tensor.Uint8, 0, 255, 3, 4, 1, 1)
	exactAgainstRef(t, "pointwise, no zero points", graph.OpConvInteger, attrs(1, nil, nil, nil), 1, nt.In(x), nt.In(w1))
	exactAgainstRef(t, "constant zero zero points", graph.OpConvInteger, attrs(2, []int64{1, 1, 1, 1}, nil, nil), 1, nt.In(x), nt.C(w),
		nt.C(tensor.FromFloat64s(tensor.Uint8, tensor.Shape{}, []float64{0})), nt.C(tensor.FromFloat64s(tensor.Int8, tensor.Shape{6}, make([]float64, 6))))
}

// TestQLinearMatMulRequantizesLikeRef: QLinearMatMul with per-tensor and per-row /
// per-column scales and zero points, to uint8 and int8, with scales that make ties
// (powers of two) and an output scale small enough to saturate.
func TestQLinearMatMulRequantizesLikeRef(t *testing.T) {
	const m, k, n = 4, 19, 7
	a := quantTensor(50, tensor.Uint8, 0, 255, m, k)
	b := quantTensor(51, tensor.Int8, -128, 127, k, n)
	f := func(v ...float64) *tensor.Tensor {
		if len(v) == 1 {
			return tensor.FromFloat64s(tensor.Float32, tensor.Shape{}, v)
		}
		return tensor.FromFloat64s(tensor.Float32, tensor.Shape{len(v)}, v)
	}
	u8 := func(v float64) *tensor.Tensor { return tensor.FromFloat64s(tensor.Uint8, tensor.Shape{}, []float64{v}) }
	i8 := func(v float64) *tensor.Tensor { return tensor.FromFloat64s(tensor.Int8, tensor.Shape{}, []float64{v}) }
	for _, c := range []struct {
		name   string
		sa, sb *tensor.Tensor
		ys     float64
		yz     *tensor.Tensor
	}{
		{"ties", f(1.0 / 64), f(1.0 / 32), 2, u8(128)},
		{"saturating", f(0.02), f(0.013), 0.0005, i8(-4)},
		{"random scales", f(0.0173), f(0.0291), 3.7, i8(3)},
		{"per row and column", quantTensor(52, tensor.Float32, 0.001, 0.05, m), quantTensor(53, tensor.Float32, 0.001, 0.05, n), 0.9, u8(100)},
	} {
		za, zb := nt.In(u8(117)), nt.In(i8(-9))
		if c.sa.Len() > 1 {
			za, zb = nt.In(quantTensor(54, tensor.Uint8, 0, 255, m)), nt.In(quantTensor(55, tensor.Int8, -128, 127, n))
		}
		exactAgainstRef(t, c.name, graph.OpQLinearMatMul, nil, 1, nt.In(a), nt.In(c.sa), za, nt.In(b), nt.In(c.sb), zb, nt.In(f(c.ys)), nt.In(c.yz))
	}
	a3 := quantTensor(56, tensor.Int8, -128, 127, 2, m, k)
	exactAgainstRef(t, "batched", graph.OpQLinearMatMul, nil, 1, nt.In(a3), nt.In(f(0.05)), nt.In(i8(1)), nt.C(b), nt.C(f(0.01)), nt.C(i8(0)), nt.In(f(0.3)), nt.In(u8(128)))
}

// TestQLinearConvRequantizesLikeRef: QLinearConv with an int32 bias, per-tensor and
// per-output-channel weight scales and zero points, padding and groups, to uint8 and
// int8, saturating and with power-of-two scales (ties).
func TestQLinearConvRequantizesLikeRef(t *testing.T) {
	x := quantTensor(60, tensor.Uint8, 0, 255, 1, 4, 7, 6)
	w := quantTensor(61, tensor.Int8, -128, 127, 6, 2, 3, 3)
	bias := quantTensor(62, tensor.Int32, -5000, 5000, 6)
	f := func(v float64) *tensor.Tensor {
		return tensor.FromFloat64s(tensor.Float32, tensor.Shape{}, []float64{v})
	}
	u8 := func(v float64) *tensor.Tensor { return tensor.FromFloat64s(tensor.Uint8, tensor.Shape{}, []float64{v}) }
	i8 := func(v float64) *tensor.Tensor { return tensor.FromFloat64s(tensor.Int8, tensor.Shape{}, []float64{v}) }
	a := &graph.ConvAttrs{AutoPad: "NOTSET", Group: 2, Pads: []int64{1, 0, 1, 2}}
	exactAgainstRef(t, "ties", graph.OpQLinearConv, a, 1, nt.In(x), nt.In(f(1.0/16)), nt.In(u8(128)), nt.C(w), nt.C(f(1.0/8)), nt.C(i8(0)), nt.In(f(4)), nt.In(u8(120)), nt.C(bias))
	exactAgainstRef(t, "saturating", graph.OpQLinearConv, a, 1, nt.In(x), nt.In(f(0.02)), nt.In(u8(3)), nt.In(w), nt.In(f(0.01)), nt.In(i8(2)), nt.In(f(0.001)), nt.In(i8(-1)))
	ws := quantTensor(63, tensor.Float32, 0.001, 0.02, 6)
	wz := quantTensor(64, tensor.Int8, -5, 5, 6)
	exactAgainstRef(t, "per channel", graph.OpQLinearConv, a, 1, nt.In(x), nt.In(f(0.031)), nt.In(u8(140)), nt.C(w), nt.C(ws), nt.C(wz), nt.In(f(0.7)), nt.In(i8(4)), nt.C(bias))
}

// TestQuantizationRefusesWhatItDoesNotHandle: a float16 input to QuantizeLinear, an
// int32 zero point on an 8-bit MatMulInteger operand, and a zero point per axis with a
// scale per tensor do not lower (ErrNoKernel), rather than computing something else.
func TestQuantizationRefusesWhatItDoesNotHandle(t *testing.T) {
	l := Strategies(kernels.Default())
	s := tensor.FromFloat64s(tensor.Float32, tensor.Shape{}, []float64{0.1})
	h := tensor.FromFloat64s(tensor.Float16, tensor.Shape{4}, []float64{1, 2, 3, 4})
	if err := nt.LowerErr(t, l, graph.OpQuantizeLinear, &graph.QuantAttrs{Axis: 1}, 1, nt.In(h), nt.In(s)); !errors.Is(err, kernels.ErrNoKernel) {
		t.Errorf("QuantizeLinear of f16: %v, want ErrNoKernel", err)
	}
	a := quantTensor(70, tensor.Uint8, 0, 255, 3, 4)
	z32 := tensor.FromFloat64s(tensor.Int32, tensor.Shape{}, []float64{1})
	if err := nt.LowerErr(t, l, graph.OpMatMulInteger, nil, 1, nt.In(a), nt.In(quantTensor(73, tensor.Uint8, 0, 255, 4, 2)), nt.In(z32)); !errors.Is(err, kernels.ErrNoKernel) {
		t.Errorf("MatMulInteger with an int32 zero point: %v, want ErrNoKernel", err)
	}
	x := quantTensor(71, tensor.Float32, -1, 1, 2, 3)
	zs := quantTensor(72, tensor.Uint8, 0, 255, 3)
	if err := nt.LowerErr(t, l, graph.OpQuantizeLinear, &graph.QuantAttrs{Axis: 1}, 1, nt.In(x), nt.In(s), nt.In(zs)); !errors.Is(err, kernels.ErrNoKernel) {
		t.Errorf("QuantizeLinear with a per-tensor scale and per-axis zero points: %v, want ErrNoKernel", err)
	}
}

// TestIntegerProductsOverSymbolicRows: MatMulInteger and QLinearMatMul over a symbolic
// number of rows, QuantizeLinear per channel and ConvInteger over a symbolic batch, and
// ConvInteger over a symbolic height, one kernel each run at several extents.
func TestIntegerProductsOverSymbolicRows(t *testing.T) {
	l := Strategies(kernels.Default())
	binds := []map[string]int64{{"n": 1}, {"n": 3}, {"n": 10}}
	b := quantTensor(80, tensor.Int8, -128, 127, 21, 5)
	u8 := func(v float64) *tensor.Tensor { return tensor.FromFloat64s(tensor.Uint8, tensor.Shape{}, []float64{v}) }
	i8 := func(v float64) *tensor.Tensor { return tensor.FromFloat64s(tensor.Int8, tensor.Shape{}, []float64{v}) }
	f := func(v float64) *tensor.Tensor {
		return tensor.FromFloat64s(tensor.Float32, tensor.Shape{}, []float64{v})
	}
	nt.CheckSymbolic(t, l, graph.OpMatMulInteger, nil, 1, []nt.SymArg{nt.Sym(tensor.Uint8, "n", "21"), nt.SymC(b), nt.SymC(u8(2)), nt.SymC(i8(-1))}, binds...)
	nt.CheckSymbolic(t, l, graph.OpQLinearMatMul, nil, 1, []nt.SymArg{nt.Sym(tensor.Uint8, "n", "21"), nt.SymC(f(0.5)), nt.SymC(u8(1)),
		nt.SymC(b), nt.SymC(f(0.25)), nt.SymC(i8(0)), nt.SymC(f(0.125)), nt.SymC(u8(128))}, binds...)
	nt.CheckSymbolic(t, l, graph.OpQuantizeLinear, &graph.QuantAttrs{Axis: 1}, 1, []nt.SymArg{nt.Sym(tensor.Float32, "n", "3", "4"),
		nt.SymC(quantTensor(81, tensor.Float32, 0.01, 0.1, 3)), nt.SymC(quantTensor(82, tensor.Int8, -3, 3, 3))}, binds...)
	w := quantTensor(83, tensor.Int8, -128, 127, 4, 3, 3, 3)
	pads := &graph.ConvAttrs{AutoPad: "NOTSET", Group: 1, Pads: []int64{1, 1, 1, 1}}
	nt.CheckSymbolic(t, l, graph.OpConvInteger, pads, 1, []nt.SymArg{nt.Sym(tensor.Uint8, "n", "3", "6", "5"), nt.SymC(w), nt.SymC(u8(9)), nt.SymC(i8(2))}, binds...)
	spatial := []map[string]int64{{"n": 1, "h": 1}, {"n": 2, "h": 4}, {"n": 1, "h": 9}}
	nt.CheckSymbolic(t, l, graph.OpConvInteger, pads, 1, []nt.SymArg{nt.Sym(tensor.Uint8, "n", "3", "h", "5"), nt.SymC(w), nt.SymC(u8(9)), nt.SymC(i8(2))}, spatial...)
}

// TestConvIntegerPaddedStageMatchesGeneric: ConvInteger and QLinearConv with padding
// take the strategy that keeps the padded input as a stage of its own, and the generic
// rule (which inlines it back into guarded reads) gives the same result; both equal the
// reference evaluator, SAME_UPPER padding and a stride that leaves input columns unread
// included.
func TestConvIntegerPaddedStageMatchesGeneric(t *testing.T) {
	x := quantTensor(90, tensor.Uint8, 0, 255, 2, 3, 11, 9)
	w := quantTensor(91, tensor.Int8, -128, 127, 4, 3, 3, 2)
	zx := tensor.FromFloat64s(tensor.Uint8, tensor.Shape{}, []float64{77})
	zw := quantTensor(92, tensor.Int8, -9, 9, 4)
	for _, a := range []*graph.ConvAttrs{
		{AutoPad: "NOTSET", Group: 1, Pads: []int64{2, 0, 1, 3}, Strides: []int64{2, 3}},
		{AutoPad: "SAME_UPPER", Group: 1, Strides: []int64{2, 2}},
	} {
		// weights at run time: the blocked integer strategy takes constant ones only
		args := []nt.Arg{nt.In(x), nt.In(w), nt.In(zx), nt.In(zw)}
		if got := nt.CheckNode(t, Strategies(kernels.Default()), graph.OpConvInteger, a, 1, args...); got != "conv-integer-padded" {
			t.Errorf("%s: ConvInteger took strategy %q, want conv-integer-padded", a.AutoPad, got)
		}
		nt.CheckNode(t, ScalarStrategies(kernels.Default()), graph.OpConvInteger, a, 1, args...)
		f := func(v float64) *tensor.Tensor {
			return tensor.FromFloat64s(tensor.Float32, tensor.Shape{}, []float64{v})
		}
		qargs := []nt.Arg{nt.In(x), nt.In(f(0.02)), nt.In(zx), nt.In(w), nt.C(f(0.01)), nt.C(tensor.FromFloat64s(tensor.Int8, tensor.Shape{}, []float64{1})),
			nt.In(f(0.05)), nt.In(tensor.FromFloat64s(tensor.Uint8, tensor.Shape{}, []float64{128}))}
		if got := nt.CheckNode(t, Strategies(kernels.Default()), graph.OpQLinearConv, a, 1, qargs...); got != "conv-integer-padded" {
			t.Errorf("%s: QLinearConv took strategy %q, want conv-integer-padded", a.AutoPad, got)
		}
		nt.CheckNode(t, ScalarStrategies(kernels.Default()), graph.OpQLinearConv, a, 1, qargs...)
	}
}

// TestConvIntegerFlatImageMatchesRef: 2-D ConvInteger of stride 1 is written over the
// flattened padded image (a "conv_flat" stage, which a reduction over more than a few
// channels keeps apart from the final one): with dilations, asymmetric padding,
// groups, SAME_LOWER, a 1×1 window and a window that drops input columns, through the
// CPU strategies and the generic rule alike, it equals the reference evaluator.
func TestConvIntegerFlatImageMatchesRef(t *testing.T) {
	x := quantTensor(100, tensor.Uint8, 0, 255, 2, 40, 7, 9)
	zx := tensor.FromFloat64s(tensor.Uint8, tensor.Shape{}, []float64{131})
	for _, c := range []struct {
		name string
		w    *tensor.Tensor
		a    *graph.ConvAttrs
	}{
		{"dilated, asymmetric pads, 2 groups", quantTensor(101, tensor.Int8, -128, 127, 6, 20, 3, 2),
			&graph.ConvAttrs{AutoPad: "NOTSET", Group: 2, Pads: []int64{0, 2, 1, 1}, Dilations: []int64{2, 1}}},
		{"same lower", quantTensor(102, tensor.Int8, -128, 127, 5, 40, 3, 3), &graph.ConvAttrs{AutoPad: "SAME_LOWER", Group: 1}},
		{"1x1", quantTensor(103, tensor.Int8, -128, 127, 3, 40, 1, 1), &graph.ConvAttrs{AutoPad: "NOTSET", Group: 1}},
		{"valid, drops columns", quantTensor(104, tensor.Int8, -128, 127, 2, 40, 2, 4), &graph.ConvAttrs{AutoPad: "VALID", Group: 1, Dilations: []int64{1, 2}}},
	} {
		zw := quantTensor(105, tensor.Int8, -4, 4, c.w.Shape[0])
		args := []nt.Arg{nt.In(x), nt.C(c.w), nt.In(zx), nt.C(zw)}
		mod, _ := nt.Build(t, graph.OpConvInteger, c.a, 1, args...)
		n := mod.Main.Nodes[len(mod.Main.Nodes)-1]
		in, err := nt.Placeholders(n)
		if err != nil {
			t.Fatal(err)
		}
		impl, err := ScalarStrategies(kernels.Default()).Lower(n, in, target.Host())
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !strings.Contains(loopir.Print(impl.Func), "conv_flat") {
			t.Errorf("%s: no conv_flat stage in the kernel", c.name)
		}
		nt.CheckNode(t, Strategies(kernels.Default()), graph.OpConvInteger, c.a, 1, args...)
		nt.CheckNode(t, ScalarStrategies(kernels.Default()), graph.OpConvInteger, c.a, 1, args...)
	}
}
