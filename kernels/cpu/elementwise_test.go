package cpu

import (
	"testing"

	"github.com/kilnrt/kiln/graph"
	kt "github.com/kilnrt/kiln/internal/kerneltest"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/tensor"
)

func f32(seed uint64, shape ...int) *tensor.Tensor {
	return tensor.MustFromSlice(tensor.Shape(shape), kt.Random(seed, tensor.Shape(shape).NumElements()))
}

// TestElementwiseAgainstRef runs unary, binary (broadcasting) and n-ary ops through the
// generic strategy and compares with the reference evaluator.
func TestElementwiseAgainstRef(t *testing.T) {
	l := Strategies(kernels.Default())
	x := f32(1, 2, 3, 40, 50)
	for _, op := range []graph.Op{graph.OpRelu, graph.OpTanh, graph.OpErf, graph.OpExp, graph.OpSigmoid, graph.OpAbs, graph.OpNeg, graph.OpSqrt, graph.OpSoftplus, graph.OpHardSwish} {
		in := x
		if op == graph.OpSqrt {
			in = tensor.FromFloat64s(tensor.Float32, x.Shape, absAll(x.Float64s()))
		}
		nt.CheckNode(t, l, op, nil, 1, nt.In(in))
	}
	y := f32(2, 3, 1, 50)
	for _, op := range []graph.Op{graph.OpAdd, graph.OpSub, graph.OpMul, graph.OpDiv, graph.OpGreater, graph.OpMax} {
		nt.CheckNode(t, l, op, nil, 1, nt.In(x), nt.In(y))
	}
	nt.CheckNode(t, l, graph.OpPow, nil, 1, nt.In(x), nt.C(tensor.Scalar[float32](2)))
	nt.CheckNode(t, l, graph.OpClip, nil, 1, nt.In(x), nt.C(tensor.Scalar[float32](-0.5)), nt.C(tensor.Scalar[float32](0.25)))
	nt.CheckNode(t, l, graph.OpClip, nil, 1, nt.In(x), nt.None, nt.In(tensor.Scalar[float32](0.25)))
	cond := tensor.FromFloat64s(tensor.Bool, tensor.Shape{50}, func() []float64 {
		v := make([]float64, 50)
		for i := range v {
			v[i] = float64(i % 3 & 1)
		}
		return v
	}())
	nt.CheckNode(t, l, graph.OpWhere, nil, 1, nt.In(cond), nt.In(x), nt.In(y))
	cast := graph.OpCast.NewAttrs().(*graph.CastAttrs)
	cast.To = int64(tensor.Int64)
	nt.CheckNode(t, l, graph.OpCast, cast, 1, nt.In(x))
	ints := tensor.MustFromSlice(tensor.Shape{6}, []int64{7, -7, 7, -7, 0, 9})
	divs := tensor.MustFromSlice(tensor.Shape{6}, []int64{2, 2, -2, -2, 3, 3})
	nt.CheckNode(t, l, graph.OpDiv, nil, 1, nt.In(ints), nt.In(divs))
	nt.CheckNode(t, l, graph.OpMod, nil, 1, nt.In(ints), nt.In(divs))
}

func absAll(v []float64) []float64 {
	for i := range v {
		if v[i] < 0 {
			v[i] = -v[i]
		}
	}
	return v
}
