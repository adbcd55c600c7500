package passes_test

import (
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/graph/passes"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/tensor"
)

// TestConv3DBecomesConv2DOverStackedFrames: a 3-D Conv of a static input becomes one
// 2-D Conv over [N·T', C·kT, H, W] (the frames its temporal taps read stacked on the
// channel axis) between layout ops, computing what the reference computes before the
// rewrite: temporal and spatial pads, strides and dilations, SAME pads, groups, a
// kernel of one frame (R(2+1)D's spatial convs) and of one pixel (its temporal ones),
// with and without bias; one over a symbolic frame count, and one with a temporal kernel
// longer than the rewrite stacks, stay 3-D.
func TestConv3DBecomesConv2DOverStackedFrames(t *testing.T) {
	cases := []struct {
		name                     string
		c, m, g                  int
		k                        [3]int
		strides, dil, pads       []int64
		autoPad                  string
		bias, symbolic, rewrites bool
	}{
		{"3x3x3 pad 1 with bias", 4, 6, 1, [3]int{3, 3, 3}, nil, nil, []int64{1, 1, 1, 1, 1, 1}, "", true, false, true},
		{"3x7x7 stride 1,2,2 pads 1,3,3", 3, 5, 1, [3]int{3, 7, 7}, []int64{1, 2, 2}, nil, []int64{1, 3, 3, 1, 3, 3}, "", false, false, true},
		{"temporal 3x1x1 stride 2 uneven pads", 4, 4, 1, [3]int{3, 1, 1}, []int64{2, 1, 1}, nil, []int64{1, 0, 0, 2, 0, 0}, "", true, false, true},
		{"spatial 1x3x3 stride 2", 4, 6, 1, [3]int{1, 3, 3}, []int64{2, 2, 2}, nil, []int64{0, 1, 1, 0, 1, 1}, "", true, false, true},
		{"dilated 2x3x3 SAME_UPPER", 2, 4, 1, [3]int{2, 3, 3}, nil, []int64{2, 1, 2}, nil, "SAME_UPPER", true, false, true},
		{"two groups", 4, 6, 2, [3]int{3, 3, 3}, nil, nil, []int64{1, 1, 1, 1, 1, 1}, "", true, false, true},
		{"symbolic frames", 4, 6, 1, [3]int{3, 3, 3}, nil, nil, []int64{1, 1, 1, 1, 1, 1}, "", true, true, false},
		{"17 frames a tap", 2, 2, 1, [3]int{17, 1, 1}, nil, nil, []int64{8, 0, 0, 8, 0, 0}, "", false, false, false},
	}
	for i, c := range cases {
		b := graph.NewBuilder("main")
		frames := graph.Const(6)
		if c.symbolic {
			frames = graph.Sym("frames")
		}
		x := b.Param("x", graph.TensorType(tensor.Float32, graph.Const(2), graph.Const(int64(c.c)), frames, graph.Const(9), graph.Const(10)))
		a := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
		a.Strides, a.Dilations, a.Pads, a.Group = c.strides, c.dil, c.pads, int64(c.g)
		if c.autoPad != "" {
			a.AutoPad = c.autoPad
		}
		inputs := []*graph.Value{x, b.Const("w", rnd(uint64(70+i), c.m, c.c/c.g, c.k[0], c.k[1], c.k[2]))}
		if c.bias {
			inputs = append(inputs, b.Const("b", rnd(uint64(80+i), c.m)))
		}
		y, err := b.Op1(graph.OpConv, a, inputs...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		r, _ := b.Op1(graph.OpRelu, nil, y)
		m, err := b.Module(r)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		in := map[string]ref.Value{"x": rnd(uint64(90+i), 2, c.c, 6, 9, 10)}
		want, err := ref.Eval(m, in, ref.Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		before := graph.PrintFunc(m.Main)
		p := passes.Pipeline{pass(t, "conv3d-to-conv2d"), pass(t, "dce")}
		if err := p.Run(&passes.Context{Check: true}, m); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		text := graph.PrintFunc(m.Main)
		if !c.rewrites {
			if text != before {
				t.Fatalf("%s: changed:\n%s\nwas\n%s", c.name, text, before)
			}
			continue
		}
		ops := opNames(m.Main)
		if strings.Count(ops, "Conv") != 1 || !strings.Contains(ops, "Transpose") || !strings.HasSuffix(ops, "Transpose Relu") {
			t.Fatalf("%s: ops %q:\n%s", c.name, ops, text)
		}
		for _, v := range m.Main.Nodes {
			if v.Op == graph.OpConv && len(v.Inputs[0].Type.Shape) != 4 {
				t.Fatalf("%s: the Conv is not 2-D:\n%s", c.name, text)
			}
		}
		got, err := ref.Eval(m, in, ref.Options{})
		if err != nil {
			t.Fatalf("%s: %v\n%s", c.name, err, text)
		}
		sameAfterRewrite(t, c.name, got[0], want[0])
	}
}
