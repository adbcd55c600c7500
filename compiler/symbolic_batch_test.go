package compiler

import (
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// TestConvAndPadOverARunTimeBatch: a convolution and a constant Pad over a batch known
// only at run time (Mask R-CNN's mask head convolves one map per region of interest,
// then pads it): the convolution stays in plain NCHW for the definition that takes a
// symbolic batch (the blocked strategies need static shapes), and the Pad computes each
// output element's source instead of copying static ranges. Batches of 3, 1 and 0,
// against the reference.
func TestConvAndPadOverARunTimeBatch(t *testing.T) {
	b := graph.NewBuilder("main")
	x := b.Param("x", graph.TensorType(tensor.Float32, graph.Sym("rois"), graph.Const(4), graph.Const(6), graph.Const(6)))
	y, err := b.Op1(graph.OpRelu, nil, sameConv(t, b, x, 4, 16, 3, 7))
	if err != nil {
		t.Fatal(err)
	}
	pads := tensor.MustFromSlice(tensor.Shape{8}, []int64{0, 0, 1, 1, 0, 0, 1, 2})
	p, err := b.Op1(graph.OpPad, graph.OpPad.NewAttrs(), y, b.Const("pads", pads))
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.Module(p)
	if err != nil {
		t.Fatal(err)
	}
	_, res := checkSymbolic(t, m, target.Host(), Options{}, [][]*tensor.Tensor{
		{f32(1, 3, 4, 6, 6)}, {f32(2, 1, 4, 6, 6)}, {f32(3, 0, 4, 6, 6)},
	})
	if n := res.Stats.Strategies["conv2d-nchwc-tensorized"]; n != 0 {
		t.Errorf("the tensorized strategy built %d kernels over a run-time batch: %v", n, res.Stats.Strategies)
	}
}
