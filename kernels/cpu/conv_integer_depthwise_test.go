package cpu

import (
	"testing"

	"github.com/kilnrt/kiln/graph"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// TestQLinearConvDepthwiseMatchesRef: a depthwise QLinearConv takes the integer
// depthwise strategy (the float depthwise stages over its exact integer differences)
// under each ISA level of the host and equals the reference evaluator element for
// element: uint8 and int8 data, asymmetric per-channel weight zero points (weights
// minus them up to 255 in magnitude), padding and a stride, 5×5 windows, constant and
// run-time scales, 24 channels (blocks narrower than a vector on AVX-512).
func TestQLinearConvDepthwiseMatchesRef(t *testing.T) {
	l := Strategies(kernels.Default())
	f := func(v float64) *tensor.Tensor {
		return tensor.FromFloat64s(tensor.Float32, tensor.Shape{}, []float64{v})
	}
	u8 := func(v float64) *tensor.Tensor { return tensor.FromFloat64s(tensor.Uint8, tensor.Shape{}, []float64{v}) }
	i8 := func(v float64) *tensor.Tensor { return tensor.FromFloat64s(tensor.Int8, tensor.Shape{}, []float64{v}) }
	dw := func(c int64, k int64, pads, strides []int64) *graph.ConvAttrs {
		return &graph.ConvAttrs{AutoPad: "NOTSET", Group: c, KernelShape: []int64{k, k}, Pads: pads, Strides: strides}
	}
	for _, level := range capLevels(t) {
		t.Run(string(level), func(t *testing.T) {
			t.Setenv(target.ISAEnv, string(level))
			for _, c := range []struct {
				name string
				a    *graph.ConvAttrs
				args []nt.Arg
			}{
				{"3×3 pad 1, uint8, per-channel weights, constant scales", dw(32, 3, []int64{1, 1, 1, 1}, nil), []nt.Arg{
					nt.In(quantTensor(60, tensor.Uint8, 0, 255, 1, 32, 9, 13)), nt.C(f(0.02)), nt.C(u8(131)),
					nt.C(quantTensor(61, tensor.Int8, -128, 127, 32, 1, 3, 3)), nt.C(quantTensor(62, tensor.Float32, 0.002, 0.02, 32)),
					nt.C(tensor.FromFloat64s(tensor.Int8, tensor.Shape{32}, make([]float64, 32))), nt.C(f(0.05)), nt.C(u8(7)),
					nt.C(quantTensor(63, tensor.Int32, -3000, 3000, 32))}},
				{"5×5 stride 2, int8 data, asymmetric weight zero points", dw(24, 5, []int64{2, 1, 2, 2}, []int64{2, 2}), []nt.Arg{
					nt.In(quantTensor(64, tensor.Int8, -128, 127, 1, 24, 11, 14)), nt.In(f(0.03)), nt.In(i8(-5)),
					nt.C(quantTensor(65, tensor.Uint8, 0, 255, 24, 1, 5, 5)), nt.C(quantTensor(66, tensor.Float32, 0.001, 0.01, 24)),
					nt.C(quantTensor(67, tensor.Uint8, 0, 255, 24)), nt.In(f(0.4)), nt.In(i8(3))}},
			} {
				if got := nt.CheckNode(t, l, graph.OpQLinearConv, c.a, 1, c.args...); got != "conv-integer-depthwise" {
					t.Errorf("%s: strategy %s, want conv-integer-depthwise", c.name, got)
				}
			}
		})
	}
}
