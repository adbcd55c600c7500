package passes_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/graph/passes"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/tensor"
)

// TestConv1DBecomesConv2DOfOneRow: a 1-D Conv of a static input becomes Unsqueeze, a 2-D
// Conv with the one axis's kernel, strides, dilations and pads on its second axis, and
// Squeeze, computing what the reference computes before the rewrite (strides,
// dilations, explicit and SAME pads, groups, with and without bias); one over a
// symbolic length stays 1-D.
func TestConv1DBecomesConv2DOfOneRow(t *testing.T) {
	cases := []struct {
		name                   string
		c, m, k, l             int
		strides, dil, pads     []int64
		autoPad                string
		group                  int64
		bias, symbolic, rewrit bool
	}{
		{"k3 pad 1 with bias", 4, 6, 3, 10, nil, nil, []int64{1, 1}, "", 1, true, false, true},
		{"k5 stride 2 dilation 2 uneven pads", 3, 5, 5, 17, []int64{2}, []int64{2}, []int64{2, 3}, "", 1, false, false, true},
		{"k4 SAME_UPPER", 2, 3, 4, 9, nil, nil, nil, "SAME_UPPER", 1, true, false, true},
		{"k3 two groups", 4, 6, 3, 8, []int64{3}, nil, nil, "", 2, true, false, true},
		{"symbolic length", 4, 6, 3, 10, nil, nil, []int64{1, 1}, "", 1, true, true, false},
	}
	for i, c := range cases {
		b := graph.NewBuilder("main")
		lenDim := graph.Const(int64(c.l))
		if c.symbolic {
			lenDim = graph.Sym("time")
		}
		x := b.Param("x", graph.TensorType(tensor.Float32, graph.Const(2), graph.Const(int64(c.c)), lenDim))
		a := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
		a.Strides, a.Dilations, a.Pads, a.Group = c.strides, c.dil, c.pads, c.group
		if c.autoPad != "" {
			a.AutoPad = c.autoPad
		}
		inputs := []*graph.Value{x, b.Const("w", rnd(uint64(40+i), c.m, c.c/int(c.group), c.k))}
		if c.bias {
			inputs = append(inputs, b.Const("b", rnd(uint64(50+i), c.m)))
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
		in := map[string]ref.Value{"x": rnd(uint64(60+i), 2, c.c, c.l)}
		want, err := ref.Eval(m, in, ref.Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		before := graph.PrintFunc(m.Main)
		p := passes.Pipeline{pass(t, "conv1d-to-conv2d"), pass(t, "dce")}
		if err := p.Run(&passes.Context{Check: true}, m); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		text := graph.PrintFunc(m.Main)
		wantOps := "Conv Relu"
		if c.rewrit {
			wantOps = "Unsqueeze Conv Squeeze Relu"
		}
		if got := opNames(m.Main); got != wantOps {
			t.Fatalf("%s: ops %q, want %q:\n%s", c.name, got, wantOps, text)
		}
		if !c.rewrit && text != before {
			t.Fatalf("%s: changed:\n%s\nwas\n%s", c.name, text, before)
		}
		if c.rewrit && !strings.Contains(text, fmt.Sprintf("f32[2,%d,1,%d]", c.c, c.l)) {
			t.Fatalf("%s: no one-row input of [2,%d,1,%d]:\n%s", c.name, c.c, c.l, text)
		}
		got, err := ref.Eval(m, in, ref.Options{})
		if err != nil {
			t.Fatalf("%s: %v\n%s", c.name, err, text)
		}
		sameAfterRewrite(t, c.name, got[0], want[0])
	}
}
