package cpu

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/graph"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/internal/testdata"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/kernels/ref"
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
// type, per tensor and per axis zero points and scales, the extremes of each type
// included: equal to the reference evaluator element for element.
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
