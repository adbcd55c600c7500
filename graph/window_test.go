package graph

import (
	"errors"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/tensor"
)

// TestWindowAxisFollowsONNX: one axis of a window over a static extent, per padding
// mode: SAME pads ceil(in/stride) outputs with the odd element at the end (upper) or
// the beginning (lower), VALID and explicit padding give no output for a window larger
// than the padded input (whatever the stride), and ceil_mode keeps a partial last
// window only if it starts inside the input or its begin pad.
func TestWindowAxisFollowsONNX(t *testing.T) {
	cases := []struct {
		name                  string
		kernel, stride, dil   int64
		pads                  []int64
		autoPad               string
		ceil                  bool
		in                    int64
		out, padBegin, padEnd int64
	}{
		{"same upper odd padding", 4, 1, 1, nil, "SAME_UPPER", false, 5, 5, 1, 2},
		{"same lower odd padding", 4, 1, 1, nil, "SAME_LOWER", false, 5, 5, 2, 1},
		{"same strided", 3, 2, 1, nil, "SAME_UPPER", false, 7, 4, 1, 1},
		{"same ignores pads", 3, 2, 1, []int64{5, 5}, "SAME_UPPER", false, 7, 4, 1, 1},
		{"valid", 3, 2, 1, nil, "VALID", false, 8, 3, 0, 0},
		{"valid ignores pads", 3, 1, 1, []int64{2, 2}, "VALID", false, 5, 3, 0, 0},
		{"valid window larger than the input, stride 2", 3, 2, 1, nil, "VALID", false, 2, 0, 0, 0},
		{"explicit", 3, 2, 1, []int64{1, 2}, "NOTSET", false, 7, 4, 1, 2},
		{"explicit dilated", 3, 1, 2, []int64{0, 0}, "", false, 7, 3, 0, 0},
		{"explicit window larger than the padded input", 5, 2, 1, []int64{1, 0}, "NOTSET", false, 2, 0, 1, 0},
		{"ceil keeps a partial window", 3, 2, 1, nil, "NOTSET", true, 6, 3, 0, 0},
		{"floor drops it", 3, 2, 1, nil, "NOTSET", false, 6, 2, 0, 0},
		{"ceil drops a window starting in the end pad", 1, 2, 1, nil, "NOTSET", true, 2, 1, 0, 0},
		{"ceil ignored by VALID", 3, 2, 1, nil, "VALID", true, 6, 2, 0, 0},
	}
	for _, c := range cases {
		w, err := NewWindow([]int64{c.kernel}, []int64{c.stride}, []int64{c.dil}, c.pads, c.autoPad, c.ceil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got := w.Axis(0, c.in)
		if want := (WindowAxis{c.out, c.padBegin, c.padEnd}); got != want {
			t.Errorf("%s: %+v, want %+v", c.name, got, want)
		}
		if d := w.OutDim(nil, 0, Const(c.in)); !d.Equal(Const(c.out)) {
			t.Errorf("%s: OutDim %v, want %d", c.name, d, c.out)
		}
	}
}

// TestWindowOutDimOverSymbolicExtents: over a symbolic extent the output is an
// expression of it where the stride divides evenly (ceil_mode included) and a fresh
// symbol where it does not.
func TestWindowOutDimOverSymbolicExtents(t *testing.T) {
	n := Sym("n")
	cases := []struct {
		name string
		w    Window
		in   Dim
		want string // "" for a fresh symbol
	}{
		{"explicit stride 1", mustWindow(t, 3, 1, []int64{1, 1}, "NOTSET", false), n, "n"},
		{"valid stride 1", mustWindow(t, 3, 1, nil, "VALID", false), n, "n-2"},
		{"same stride 1", mustWindow(t, 4, 1, nil, "SAME_LOWER", false), n, "n"},
		{"same strided", mustWindow(t, 3, 2, nil, "SAME_UPPER", false), n, ""},
		{"explicit strided over 2n", mustWindow(t, 2, 2, nil, "NOTSET", false), n.Scale(2), "n"},
		{"explicit strided over n", mustWindow(t, 2, 2, nil, "NOTSET", false), n, ""},
		{"ceil, exact division", mustWindow(t, 2, 2, nil, "NOTSET", true), n.Scale(2), "n"},
		{"ceil, end pad covering a window", mustWindow(t, 1, 1, []int64{0, 1}, "NOTSET", true), n, "n"},
		{"unknown kernel", Window{Kernel: []int64{-1}, Strides: []int64{1}, Dilations: []int64{1}, PadBegin: []int64{0}, PadEnd: []int64{0}}, n, ""},
	}
	for _, c := range cases {
		got := c.w.OutDim(nil, 0, c.in)
		if c.want == "" {
			if s, ok := got.IsSym(); !ok || !strings.HasPrefix(s, "_t") {
				t.Errorf("%s: %v, want a fresh symbol", c.name, got)
			}
			continue
		}
		if got.String() != c.want {
			t.Errorf("%s: %v, want %s", c.name, got, c.want)
		}
		// the same value as the static resolution at every extent
		for _, v := range []int64{4, 6, 9} {
			env := map[string]int64{"n": v}
			in, _ := c.in.Eval(env)
			if o, _ := got.Eval(env); o != c.w.Axis(0, in).Out {
				t.Errorf("%s: at n=%d the expression gives %d, the static axis %d", c.name, v, o, c.w.Axis(0, in).Out)
			}
		}
	}
}

func mustWindow(t *testing.T, kernel, stride int64, pads []int64, autoPad string, ceil bool) Window {
	t.Helper()
	w, err := NewWindow([]int64{kernel}, []int64{stride}, nil, pads, autoPad, ceil)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestTransposedWindowAxis: ConvTranspose cuts the pads from its full extent (VALID
// too), gives output_shape or in·stride (SAME) and splits the difference, and refuses
// an odd split that ONNX and the reference resolve differently.
func TestTransposedWindowAxis(t *testing.T) {
	full := func(a *ConvTransposeAttrs) TransposedWindow {
		t.Helper()
		w, err := ConvTransposeWindow(a, []int64{3})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	cases := []struct {
		name string
		a    ConvTransposeAttrs
		want WindowAxis
	}{
		// full extent 2·(5-1) + 1 + 2 + 1 = 12 with output_padding 1
		{"pads", ConvTransposeAttrs{Strides: []int64{2}, OutputPadding: []int64{1}, Pads: []int64{1, 2}}, WindowAxis{9, 1, 2}},
		{"valid keeps the pads", ConvTransposeAttrs{AutoPad: "VALID", Strides: []int64{2}, Pads: []int64{1, 0}}, WindowAxis{10, 1, 0}},
		{"same upper", ConvTransposeAttrs{AutoPad: "SAME_UPPER", Strides: []int64{2}}, WindowAxis{10, 0, 1}},
		{"same lower", ConvTransposeAttrs{AutoPad: "SAME_LOWER", Strides: []int64{2}}, WindowAxis{10, 1, 0}},
		{"output_shape even", ConvTransposeAttrs{Strides: []int64{2}, OutputShape: []int64{9}}, WindowAxis{9, 1, 1}},
		{"output_shape naming N and C is ignored", ConvTransposeAttrs{Strides: []int64{2}, OutputShape: []int64{1, 1, 9}}, WindowAxis{11, 0, 0}},
	}
	for _, c := range cases {
		got, err := full(&c.a).Axis(0, 5)
		if err != nil || got != c.want {
			t.Errorf("%s: %+v %v, want %+v", c.name, got, err, c.want)
		}
	}
	if _, err := full(&ConvTransposeAttrs{Strides: []int64{2}, OutputShape: []int64{10}}).Axis(0, 5); !errors.Is(err, ErrOddPadding) {
		t.Errorf("output_shape with an odd split: %v, want ErrOddPadding", err)
	}
}

// TestMalformedWindowAttributesAreAnInvalidModel: an unknown auto_pad and per-axis
// lists of the wrong length are inference errors naming the node, for every op with a
// window.
func TestMalformedWindowAttributesAreAnInvalidModel(t *testing.T) {
	nodes := map[string]struct {
		op    Op
		attrs any
	}{
		"conv auto_pad":            {OpConv, &ConvAttrs{Group: 1, AutoPad: "SAME"}},
		"conv pads per axis":       {OpConv, &ConvAttrs{Group: 1, Pads: []int64{1, 1}}},
		"conv strides":             {OpConv, &ConvAttrs{Group: 1, Strides: []int64{1}}},
		"conv dilations":           {OpConv, &ConvAttrs{Group: 1, Dilations: []int64{1, 1, 1}}},
		"pool auto_pad":            {OpMaxPool, &PoolAttrs{KernelShape: []int64{2, 2}, AutoPad: "same_upper"}},
		"pool pads":                {OpAveragePool, &PoolAttrs{KernelShape: []int64{2, 2}, Pads: []int64{0, 0, 1}}},
		"transpose auto_pad":       {OpConvTranspose, &ConvTransposeAttrs{Group: 1, AutoPad: "FULL"}},
		"transpose output_padding": {OpConvTranspose, &ConvTransposeAttrs{Group: 1, OutputPadding: []int64{1}}},
	}
	for name, c := range nodes {
		b := NewBuilder("main")
		x := b.Param("x", TensorType(tensor.Float32, Const(1), Const(1), Const(4), Const(4)))
		in := []*Value{x}
		if c.op != OpMaxPool && c.op != OpAveragePool {
			in = append(in, b.Const("w", tensor.New(tensor.Float32, tensor.Shape{1, 1, 1, 1})))
		}
		_, err := b.NodeNamed(c.op, "win0", c.attrs, []string{"y"}, in...)
		if !errors.Is(err, ErrInfer) || !strings.Contains(err.Error(), `"win0"`) {
			t.Errorf("%s: got %v, want an inference error naming win0", name, err)
		}
	}
}

// TestPoolCeilModeInfersTheWindowsKept: with ceil_mode, a last window that would start
// in the end padding is not counted by shape inference either (the type agrees with
// the kernels, which check it).
func TestPoolCeilModeInfersTheWindowsKept(t *testing.T) {
	b := NewBuilder("main")
	x := b.Param("x", TensorType(tensor.Float32, Const(1), Const(1), Const(2), Const(2)))
	outs, err := b.Node(OpMaxPool, &PoolAttrs{KernelShape: []int64{1, 1}, Strides: []int64{2, 2}, CeilMode: 1}, 1, x)
	if err != nil {
		t.Fatal(err)
	}
	if got := outs[0].Type.String(); got != "f32[1,1,1,1]" {
		t.Errorf("MaxPool type %s, want f32[1,1,1,1]", got)
	}
}
