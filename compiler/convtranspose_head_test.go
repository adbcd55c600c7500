package compiler

import (
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

// TestUpsamplingHeadRunsAsConvolutions: a segmentation head as PP-OCR's detector ends
// (conv, relu, a 2×2 stride-2 ConvTranspose, a bias Add, BatchNormalization, relu, a
// second 2×2 stride-2 ConvTranspose to one channel with a bias, sigmoid), batch 2,
// compiles with no ConvTranspose or BatchNormalization kernel (1×1 convolutions and
// DepthToSpace copies with the bias, normalization and activations fused) and matches
// the reference.
func TestUpsamplingHeadRunsAsConvolutions(t *testing.T) {
	b := graph.NewBuilder("main")
	x := b.Param("x", graph.TensorType(tensor.Float32, graph.StaticShape(2, 8, 6, 10)...))
	op := func(o graph.Op, attrs any, in ...*graph.Value) *graph.Value {
		y, err := b.Op1(o, attrs, in...)
		if err != nil {
			t.Fatal(err)
		}
		return y
	}
	ca := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
	ca.KernelShape, ca.Pads = []int64{3, 3}, []int64{1, 1, 1, 1}
	h := op(graph.OpRelu, nil, op(graph.OpConv, ca, x, b.Const("w0", f32(1, 16, 8, 3, 3)), b.Const("b0", f32(2, 16))))
	up := func(in *graph.Value, cin, cout int, seed uint64, bias bool) *graph.Value {
		a := graph.OpConvTranspose.NewAttrs().(*graph.ConvTransposeAttrs)
		a.KernelShape, a.Strides = []int64{2, 2}, []int64{2, 2}
		ins := []*graph.Value{in, b.Const("", f32(seed, cin, cout, 2, 2))}
		if bias {
			ins = append(ins, b.Const("", f32(seed+1, cout)))
		}
		return op(graph.OpConvTranspose, a, ins...)
	}
	u := op(graph.OpAdd, nil, up(h, 16, 8, 3, false), b.Const("bias", f32(5, 1, 8, 1, 1)))
	vs := f32(9, 8).Float64s()
	for i, v := range vs {
		vs[i] = v*v + 0.1
	}
	variance := tensor.FromFloat64s(tensor.Float32, tensor.Shape{8}, vs)
	n := op(graph.OpBatchNormalization, nil, u, b.Const("s", f32(6, 8)), b.Const("sh", f32(7, 8)), b.Const("m", f32(8, 8)), b.Const("v", variance))
	y := op(graph.OpSigmoid, nil, up(op(graph.OpRelu, nil, n), 8, 1, 10, true))
	m, err := b.Module(y)
	if err != nil {
		t.Fatal(err)
	}
	res := checkCompiled(t, m, map[string]*tensor.Tensor{"x": f32(11, 2, 8, 6, 10)})
	for _, g := range res.Stats.Groups {
		if strings.Contains(g.Anchor, "ConvTranspose") || strings.Contains(g.Anchor, "BatchNormalization") {
			t.Errorf("group %+v runs a ConvTranspose or BatchNormalization kernel", g)
		}
	}
}
