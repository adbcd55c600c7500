package passes_test

import (
	"math"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/graph/passes"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/tensor"
)

// TestConstantSTFTBecomesFramesTimesDFTMatrix: an STFT of a real signal of known length
// with a constant step, window and frame length becomes Reshape, Gather (the frames),
// MatMul (by the windowed DFT matrix) and Reshape, with the reference's values (within
// float32 rounding of sums of N terms); a complex signal, a run-time step or a signal
// of unknown length stays an STFT.
func TestConstantSTFTBecomesFramesTimesDFTMatrix(t *testing.T) {
	i64 := func(v int64) *tensor.Tensor { return tensor.FromInt64s(tensor.Int64, tensor.Shape{}, []int64{v}) }
	hann := func(n int) *tensor.Tensor {
		w := make([]float64, n)
		for i := range w {
			w[i] = 0.5 - 0.5*math.Cos(2*math.Pi*float64(i)/float64(n))
		}
		return tensor.FromFloat64s(tensor.Float32, tensor.Shape{n}, w)
	}
	cases := []struct {
		name          string
		length        graph.Dim
		parts         int64
		step          int64
		runtimeStep   bool
		window        int // 0: none
		frameLength   int64
		onesided      int64
		wantRewritten bool
	}{
		{"hann window, onesided", graph.Const(100), 1, 10, false, 32, 0, 1, true},
		{"frame length, no window, two-sided", graph.Const(64), 1, 16, false, 0, 20, 0, true},
		{"window and frame length", graph.Const(50), 1, 7, false, 16, 16, 1, true},
		{"whole signal one frame", graph.Const(24), 1, 5, false, 0, 0, 1, true},
		{"complex signal", graph.Const(64), 2, 16, false, 16, 0, 1, false},
		{"run-time step", graph.Const(64), 1, 16, true, 16, 0, 1, false},
		{"unknown length", graph.Sym("n"), 1, 16, false, 16, 0, 1, false},
	}
	for i, c := range cases {
		b := graph.NewBuilder("main")
		x := b.Param("x", graph.TensorType(tensor.Float32, graph.Const(2), c.length, graph.Const(c.parts)))
		inputs := []*graph.Value{x, b.Const("step", i64(c.step)), nil}
		in := map[string]ref.Value{}
		if c.runtimeStep {
			inputs[1] = b.Param("step", graph.TensorType(tensor.Int64))
			in["step"] = i64(c.step)
		}
		if c.window > 0 {
			inputs[2] = b.Const("window", hann(c.window))
		}
		if c.frameLength > 0 {
			inputs = append(inputs, b.Const("frame_length", i64(c.frameLength)))
		}
		y, err := b.Op1(graph.OpSTFT, &graph.STFTAttrs{Onesided: c.onesided}, inputs...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		m, err := b.Module(y)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		l, ok := c.length.Value()
		if !ok {
			l = 64
		}
		in["x"] = rnd(uint64(40+i), 2, int(l), int(c.parts))
		want, err := ref.Eval(m, in, ref.Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		p := passes.Pipeline{pass(t, "stft-to-matmul"), pass(t, "dce")}
		if err := p.Run(&passes.Context{Check: true}, m); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		text := graph.PrintFunc(m.Main)
		if rewritten := !strings.Contains(text, "STFT"); rewritten != c.wantRewritten {
			t.Fatalf("%s: rewritten = %v, want %v:\n%s", c.name, rewritten, c.wantRewritten, text)
		}
		if c.wantRewritten {
			if got := opNames(m.Main); got != "Reshape Gather MatMul Reshape" {
				t.Fatalf("%s: ops %q:\n%s", c.name, got, text)
			}
		}
		got, err := ref.Eval(m, in, ref.Options{})
		if err != nil {
			t.Fatalf("%s: %v\n%s", c.name, err, text)
		}
		g, w := got[0].(*tensor.Tensor), want[0].(*tensor.Tensor)
		if !g.Shape.Equal(w.Shape) {
			t.Fatalf("%s: shape %v after the rewrite, %v before", c.name, g.Shape, w.Shape)
		}
		gv, wv := g.Float64s(), w.Float64s()
		for j := range wv {
			if d := math.Abs(gv[j] - wv[j]); d > 1e-5*(1+math.Abs(wv[j])) {
				t.Fatalf("%s: element %d: %v after the rewrite, %v before", c.name, j, gv[j], wv[j])
			}
		}
	}
}

// TestHugeSTFTKeepsItsKernel: an STFT whose frame index or DFT matrix would exceed the
// rewrite's bound on the constants it makes (a model declaring a long signal and a
// long frame) stays an STFT, so the compile allocates nothing of that size.
func TestHugeSTFTKeepsItsKernel(t *testing.T) {
	for _, c := range []struct {
		name         string
		length, step int64
		frameLength  int64
	}{
		{"a frame of 2^20 samples", 1 << 20, 1, 1 << 20},
		{"2^21 frames of 4 samples", 1 << 21, 1, 4},
		{"a declared length of 2^40 samples", 1 << 40, 1 << 20, 1 << 12},
	} {
		b := graph.NewBuilder("main")
		x := b.Param("x", graph.TensorType(tensor.Float32, graph.Const(1), graph.Const(c.length), graph.Const(1)))
		i64 := func(v int64) *tensor.Tensor { return tensor.FromInt64s(tensor.Int64, tensor.Shape{}, []int64{v}) }
		y, err := b.Op1(graph.OpSTFT, &graph.STFTAttrs{Onesided: 1}, x, b.Const("step", i64(c.step)), nil, b.Const("frame_length", i64(c.frameLength)))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		m, err := b.Module(y)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if err := (passes.Pipeline{pass(t, "stft-to-matmul")}).Run(&passes.Context{Check: true}, m); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := opNames(m.Main); got != "STFT" {
			t.Fatalf("%s: ops %q, want the STFT kept", c.name, got)
		}
	}
}
