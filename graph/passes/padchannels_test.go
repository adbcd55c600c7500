package passes_test

import (
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/graph/passes"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/tensor"
)

// mobileBlock builds a MobileNetV3 block over x [1, cin, 6, 6]: a 1×1 expansion to mid
// channels, HardSwish, a 3×3 depthwise conv, ReLU, squeeze-and-excitation (global pool,
// 1×1 to 8, ReLU, 1×1 back to mid, HardSigmoid, the channel-wise Mul), a per-channel
// constant scale, a 1×1 projection to 16; then tail(b, projection) is the result.
func mobileBlock(t *testing.T, cin, mid int, depthwiseGroups int64, tail func(*graph.Builder, *graph.Value) *graph.Value) *graph.Module {
	t.Helper()
	b := graph.NewBuilder("main")
	x := b.Param("x", graph.TensorType(tensor.Float32, graph.StaticShape(1, int64(cin), 6, 6)...))
	conv := func(name string, in *graph.Value, out, k int, group int64, seed uint64) *graph.Value {
		a := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
		a.Group = group
		a.KernelShape = []int64{int64(k), int64(k)}
		if k == 3 {
			a.Pads = []int64{1, 1, 1, 1}
		}
		c, _ := in.Type.Shape[1].Value()
		y, err := b.Op1(graph.OpConv, a, in, b.Const(name+"_w", rnd(seed, out, int(c/group), k, k)), b.Const(name+"_b", rnd(seed+1, out)))
		if err != nil {
			t.Fatal(err)
		}
		return y
	}
	op := func(o graph.Op, in ...*graph.Value) *graph.Value {
		y, err := b.Op1(o, nil, in...)
		if err != nil {
			t.Fatal(err)
		}
		return y
	}
	e := op(graph.OpHardSwish, conv("expand", x, mid, 1, 1, 1))
	d := op(graph.OpRelu, conv("dw", e, mid, 3, depthwiseGroups, 3))
	s := op(graph.OpGlobalAveragePool, d)
	s = op(graph.OpRelu, conv("fc1", s, 8, 1, 1, 5))
	s = op(graph.OpHardSigmoid, conv("fc2", s, mid, 1, 1, 7))
	scaled := op(graph.OpMul, op(graph.OpMul, d, s), b.Const("scale", rnd(9, mid, 1, 1)))
	m, err := b.Module(tail(b, conv("project", scaled, 16, 1, 1, 11)))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// padRun runs pad-channels with a channel multiple of 16 and checks that the module
// computes what it did (the reference evaluator, before and after); it returns the
// module's text after.
func padRun(t *testing.T, name string, m *graph.Module) string {
	t.Helper()
	c, _ := m.Main.Params[0].Type.Shape[1].Value()
	in := map[string]ref.Value{"x": rnd(21, 1, int(c), 6, 6)}
	want, err := ref.Eval(m, in, ref.Options{})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	ctx := &passes.Context{Check: true, Layout: &passes.LayoutPolicy{ChannelMultiple: 16}}
	if err := (passes.Pipeline{pass(t, "pad-channels"), pass(t, "dce")}).Run(ctx, m); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	text := graph.PrintFunc(m.Main)
	got, err := ref.Eval(m, in, ref.Options{})
	if err != nil {
		t.Fatalf("%s: %v\n%s", name, err, text)
	}
	g, w := got[0].(*tensor.Tensor), want[0].(*tensor.Tensor)
	if !g.Shape.Equal(w.Shape) {
		t.Fatalf("%s: result %v after, %v before", name, g.Shape, w.Shape)
	}
	gv, wv := g.Float64s(), w.Float64s()
	for j := range wv {
		if d := gv[j] - wv[j]; d > 1e-5 || d < -1e-5 {
			t.Fatalf("%s: element %d: %v after, %v before\n%s", name, j, gv[j], wv[j], text)
		}
	}
	return text
}

// TestPadChannelsWidensAMobileBlockToWholeVectors: the 72 channels between a block's
// expansion and projection (depthwise conv, activations, squeeze-and-excitation, a
// per-channel constant) become 80, the convolutions' filters, bias, input channels and
// the depthwise group with them, and the block computes what it did; the projection's
// 16 channels and the squeeze's 8 stay.
func TestPadChannelsWidensAMobileBlockToWholeVectors(t *testing.T) {
	text := padRun(t, "mobile block", mobileBlock(t, 24, 72, 72, func(_ *graph.Builder, y *graph.Value) *graph.Value { return y }))
	for _, want := range []string{"f32[1,80,6,6]", "f32[1,80,1,1]", "group=80", "f32[1,16,6,6]", "f32[1,8,1,1]"} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q after pad-channels:\n%s", want, text)
		}
	}
	if strings.Contains(text, ",72,") || strings.Contains(text, "group=72") {
		t.Errorf("72 channels left after pad-channels:\n%s", text)
	}
	// a fifth more: 40 → 48 (MnasNet's and EfficientNet's 28×28 stage)
	text = padRun(t, "a fifth more", mobileBlock(t, 24, 40, 40, func(_ *graph.Builder, y *graph.Value) *graph.Value { return y }))
	if !strings.Contains(text, "group=48") || strings.Contains(text, ",40,") {
		t.Errorf("40 channels not padded to 48:\n%s", text)
	}
}

// TestPadChannelsLeavesRegionsItCannotPad: a region read by a Reshape, one that is a
// result, one written by a grouped (not depthwise) convolution and one whose padding
// would add more than a fifth (24 → 32) keep their channels.
func TestPadChannelsLeavesRegionsItCannotPad(t *testing.T) {
	cases := []struct {
		name   string
		mid    int
		groups int64
		tail   func(*graph.Builder, *graph.Value) *graph.Value
		keep   string
	}{
		{"grouped conv", 72, 9, func(_ *graph.Builder, y *graph.Value) *graph.Value { return y }, "[1,72,6,6]"},
		{"a third more", 24, 24, func(_ *graph.Builder, y *graph.Value) *graph.Value { return y }, "[1,24,6,6]"},
	}
	for _, c := range cases {
		text := padRun(t, c.name, mobileBlock(t, 16, c.mid, c.groups, c.tail))
		if !strings.Contains(text, c.keep) {
			t.Errorf("%s: %s padded:\n%s", c.name, c.keep, text)
		}
	}
	// the expansion's result read by a Reshape, or a result itself
	for _, name := range []string{"reshape", "result"} {
		b := graph.NewBuilder("main")
		x := b.Param("x", graph.TensorType(tensor.Float32, graph.StaticShape(1, 8, 6, 6)...))
		a := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
		a.KernelShape = []int64{1, 1}
		y, err := b.Op1(graph.OpConv, a, x, b.Const("w", rnd(1, 72, 8, 1, 1)))
		if err != nil {
			t.Fatal(err)
		}
		r, _ := b.Op1(graph.OpRelu, nil, y)
		out := r
		if name == "reshape" {
			out, err = b.Op1(graph.OpReshape, graph.OpReshape.NewAttrs(), r, b.Const("shape", tensor.FromInt64s(tensor.Int64, tensor.Shape{2}, []int64{1, -1})))
			if err != nil {
				t.Fatal(err)
			}
		}
		m, err := b.Module(out)
		if err != nil {
			t.Fatal(err)
		}
		if text := padRun(t, name, m); !strings.Contains(text, "[1,72,6,6]") {
			t.Errorf("%s: padded:\n%s", name, text)
		}
	}
}
