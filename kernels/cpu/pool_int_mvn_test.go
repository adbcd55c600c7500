package cpu

import (
	"testing"

	"github.com/kilnrt/kiln/graph"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/tensor"
)

// TestMaxPoolOnIntegersPadsWithTheLeastValue: MaxPool on signed and unsigned integers
// matches the reference, with pads around windows of negative values (a padding tap
// must never win) and with ceil mode.
func TestMaxPoolOnIntegersPadsWithTheLeastValue(t *testing.T) {
	l := Strategies(kernels.Default())
	x := f32(61, 2, 3, 7, 8)
	for _, dt := range []tensor.DType{tensor.Int8, tensor.Uint8, tensor.Int32, tensor.Int64} {
		v := x.Float64s()
		for i := range v {
			v[i] = float64(int(v[i]*40) - 60) // mostly negative
			if dt.IsUnsigned() {
				v[i] = float64(int(v[i]+200) % 256)
			}
		}
		xi := tensor.FromFloat64s(dt, x.Shape, v)
		for _, c := range []poolCase{
			{kernel: []int64{3, 3}, strides: []int64{2, 2}, pads: []int64{1, 1, 1, 1}},
			{kernel: []int64{2, 3}, strides: []int64{2, 2}, pads: []int64{0, 2, 1, 0}, ceil: 1},
			{kernel: []int64{3, 2}, autoPad: "SAME_UPPER", strides: []int64{2, 1}},
		} {
			nt.CheckNode(t, l, graph.OpMaxPool, poolAttrs(graph.OpMaxPool, c), 1, nt.In(xi))
		}
	}
}

// TestMeanVarianceNormalization: the default axes (0, 2, 3), one axis and all of them,
// against the reference.
func TestMeanVarianceNormalization(t *testing.T) {
	l := Strategies(kernels.Default())
	x := f32(62, 2, 3, 4, 5)
	for _, axes := range [][]int64{nil, {1}, {0, 1, 2, 3}, {-1}} {
		a := graph.OpMeanVarianceNormalization.NewAttrs().(*graph.MVNAttrs)
		a.Axes = axes
		nt.CheckNode(t, l, graph.OpMeanVarianceNormalization, a, 1, nt.In(x))
	}
}
