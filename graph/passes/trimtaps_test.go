package passes_test

import (
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/graph/passes"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/tensor"
)

// TestTrimConvTapsDropsPaddingOnlyTaps: a Conv whose taps read only padding along an
// axis loses them (kernel, pads, dilation and the sliced weights printed), computing what
// the reference computes before the rewrite; one whose every tap reads the input for
// some output is left as it was.
func TestTrimConvTapsDropsPaddingOnlyTaps(t *testing.T) {
	cases := []struct {
		name      string
		h, w      int
		k         [2]int
		dil, pads []int64
		strides   []int64
		autoPad   string
		group     int64
		want      string // the trimmed Conv's attributes, "" when left as it was
	}{
		{"atrous 24 over 6x5 becomes 1x1", 6, 5, [2]int{3, 3}, []int64{24, 24}, []int64{24, 24, 24, 24}, nil, "", 1,
			"dilations=[1,1], kernel_shape=[1,1], pads=[0,0,0,0], strides=[1,1]"},
		{"dilation equal to the extent becomes 1x1", 6, 5, [2]int{3, 3}, []int64{6, 5}, []int64{6, 5, 6, 5}, nil, "", 1,
			"dilations=[1,1], kernel_shape=[1,1], pads=[0,0,0,0], strides=[1,1]"},
		{"atrous 4 over 6x5 keeps rows, drops columns", 6, 5, [2]int{3, 3}, []int64{4, 5}, []int64{4, 5, 4, 5}, nil, "", 1,
			"dilations=[4,1], kernel_shape=[3,1], pads=[4,0,4,0], strides=[1,1]"},
		{"uneven pads leave the last taps", 6, 5, [2]int{3, 3}, []int64{3, 3}, []int64{0, 0, 6, 6}, nil, "", 1,
			"dilations=[3,3], kernel_shape=[2,2], pads=[0,0,3,3], strides=[1,1]"},
		{"strided, two groups", 7, 7, [2]int{3, 3}, []int64{8, 8}, []int64{8, 8, 8, 8}, []int64{2, 2}, "", 2,
			"dilations=[1,1], group=2, kernel_shape=[1,1], pads=[0,0,0,0], strides=[2,2]"},
		{"SAME_UPPER over a map smaller than the span", 4, 4, [2]int{3, 3}, []int64{5, 5}, nil, nil, "SAME_UPPER", 1,
			"dilations=[1,1], kernel_shape=[1,1], pads=[0,0,0,0], strides=[1,1]"},
		{"every tap reads somewhere", 14, 14, [2]int{3, 3}, []int64{12, 12}, []int64{12, 12, 12, 12}, nil, "", 1, ""},
		{"plain 3x3", 6, 6, [2]int{3, 3}, nil, []int64{1, 1, 1, 1}, nil, "", 1, ""},
	}
	for i, c := range cases {
		const cin, m = 4, 6
		b := graph.NewBuilder("main")
		x := b.Param("x", graph.TensorType(tensor.Float32, graph.Const(1), graph.Const(cin), graph.Const(int64(c.h)), graph.Const(int64(c.w))))
		a := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
		a.Strides, a.Dilations, a.Pads, a.Group = c.strides, c.dil, c.pads, c.group
		if c.autoPad != "" {
			a.AutoPad = c.autoPad
		}
		y, err := b.Op1(graph.OpConv, a, x, b.Const("w", rnd(uint64(70+i), m, cin/int(c.group), c.k[0], c.k[1])), b.Const("b", rnd(uint64(80+i), m)))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		mod, err := b.Module(y)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		in := map[string]ref.Value{"x": rnd(uint64(90+i), 1, cin, c.h, c.w)}
		want, err := ref.Eval(mod, in, ref.Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		before := graph.PrintFunc(mod.Main)
		p := passes.Pipeline{pass(t, "trim-conv-taps"), pass(t, "dce")}
		if err := p.Run(&passes.Context{Check: true}, mod); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		text := graph.PrintFunc(mod.Main)
		if c.want == "" {
			if text != before {
				t.Fatalf("%s: changed:\n%s\nwas\n%s", c.name, text, before)
			}
			continue
		}
		if !strings.Contains(text, c.want) || strings.Contains(text, "%w ") {
			t.Fatalf("%s: want a Conv with %s and the old weights gone:\n%s", c.name, c.want, text)
		}
		got, err := ref.Eval(mod, in, ref.Options{})
		if err != nil {
			t.Fatalf("%s: %v\n%s", c.name, err, text)
		}
		sameAfterRewrite(t, c.name, got[0], want[0])
	}
}

// TestTrimConvTapsSplitsHeavyConvsInBands: a heavy Conv whose outputs read the input
// through different taps (DeepLabV3's atrous 3×3 of dilation 12 over 14×14, and a
// strided one) is split along each axis into bands that compute only the taps they
// read — three row bands, each three column bands: nine Convs — and computes what the
// reference computes before; a plain padded 3×3 of the same size, whose edge outputs
// alone skip a tap, is left as it was.
func TestTrimConvTapsSplitsHeavyConvsInBands(t *testing.T) {
	cases := []struct {
		name               string
		h, w               int
		dil, pads, strides []int64
		convs              int // Convs after the pass; 1: left as it was
	}{
		{"atrous 12 over 14x14", 14, 14, []int64{12, 12}, []int64{12, 12, 12, 12}, nil, 9},
		{"atrous 12 stride 2 over 28x27", 28, 27, []int64{12, 12}, []int64{12, 12, 12, 12}, []int64{2, 2}, 9},
		{"plain 3x3 over 14x14", 14, 14, nil, []int64{1, 1, 1, 1}, nil, 1},
	}
	for i, c := range cases {
		const cin, m = 128, 96
		b := graph.NewBuilder("main")
		x := b.Param("x", graph.TensorType(tensor.Float32, graph.Const(1), graph.Const(cin), graph.Const(int64(c.h)), graph.Const(int64(c.w))))
		a := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
		a.Strides, a.Dilations, a.Pads = c.strides, c.dil, c.pads
		y, err := b.Op1(graph.OpConv, a, x, b.Const("w", rnd(uint64(110+i), m, cin, 3, 3)), b.Const("b", rnd(uint64(120+i), m)))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		r, _ := b.Op1(graph.OpRelu, nil, y)
		mod, err := b.Module(r)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		in := map[string]ref.Value{"x": rnd(uint64(130+i), 1, cin, c.h, c.w)}
		want, err := ref.Eval(mod, in, ref.Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		before := graph.PrintFunc(mod.Main)
		p := passes.Pipeline{pass(t, "trim-conv-taps"), pass(t, "dce")}
		if err := p.Run(&passes.Context{Check: true}, mod); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		text := graph.PrintFunc(mod.Main)
		if got := strings.Count(opNames(mod.Main), "Conv"); got != c.convs {
			t.Fatalf("%s: %d Convs, want %d:\n%s", c.name, got, c.convs, text)
		}
		if c.convs == 1 {
			if text != before {
				t.Fatalf("%s: changed:\n%s\nwas\n%s", c.name, text, before)
			}
			continue
		}
		got, err := ref.Eval(mod, in, ref.Options{})
		if err != nil {
			t.Fatalf("%s: %v\n%s", c.name, err, text)
		}
		sameAfterRewrite(t, c.name, got[0], want[0])
	}
}
