package ref

import (
	"math"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

// evalConstNode evaluates op over constant inputs (nil: omitted) and returns its output.
func evalConstNode(t *testing.T, op graph.Op, attrs any, in ...*tensor.Tensor) *tensor.Tensor {
	t.Helper()
	b := graph.NewBuilder("main")
	vals := make([]*graph.Value, len(in))
	for i, x := range in {
		if x != nil {
			vals[i] = b.Const("c"+string(rune('a'+i)), x)
		}
	}
	y, err := b.Op1(op, attrs, vals...)
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.Module(y)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Eval(m, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return res[0].(*tensor.Tensor)
}

func closeAll(t *testing.T, what string, got []float64, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-9 {
			t.Fatalf("%s: element %d = %v, want %v (all: %v)", what, i, got[i], want[i], got)
		}
	}
}

// TestDFTOfImpulsesAndCosines: the DFT of an impulse at 0 is flat, a cosine of
// frequency 2 over 8 samples has 4 at bins 2 and 6, and the inverse of a transform
// gives the signal back (a zero-padded length, onesided keeping n/2+1 bins).
func TestDFTOfImpulsesAndCosines(t *testing.T) {
	dft := func(inverse, onesided int64, x *tensor.Tensor, length int64) []float64 {
		a := graph.OpDFT.NewAttrs().(*graph.DFTAttrs)
		a.Inverse, a.Onesided = inverse, onesided
		var l *tensor.Tensor
		if length > 0 {
			l = tensor.Scalar(length)
		}
		return evalConstNode(t, graph.OpDFT, a, x, l, tensor.Scalar(int64(1))).Float64s()
	}
	impulse := tensor.FromFloat64s(tensor.Float64, tensor.Shape{1, 5, 1}, []float64{1, 0, 0, 0, 0})
	closeAll(t, "impulse", dft(0, 0, impulse, 0), []float64{1, 0, 1, 0, 1, 0, 1, 0, 1, 0})
	cos := make([]float64, 8)
	for i := range cos {
		cos[i] = math.Cos(2 * math.Pi * 2 * float64(i) / 8)
	}
	closeAll(t, "cosine onesided", dft(0, 1, tensor.FromFloat64s(tensor.Float64, tensor.Shape{1, 8, 1}, cos), 0),
		[]float64{0, 0, 0, 0, 4, 0, 0, 0, 0, 0})
	sig := tensor.FromFloat64s(tensor.Float64, tensor.Shape{1, 3, 2}, []float64{1, 2, -3, 0.5, 0.25, -1})
	spec := tensor.FromFloat64s(tensor.Float64, tensor.Shape{1, 7, 2}, dft(0, 0, sig, 7))
	closeAll(t, "round trip", dft(1, 0, spec, 0), []float64{1, 2, -3, 0.5, 0.25, -1, 0, 0, 0, 0, 0, 0, 0, 0})
}

// TestGridSampleIdentityGridCopiesTheImage: a grid over the pixel centers (align_corners)
// reads every pixel back in each mode, and with reflection a point at 2 (pixel 3, one
// past the last) reads pixel 1 and a point at 3 (pixel 4) pixel 0.
func TestGridSampleIdentityGridCopiesTheImage(t *testing.T) {
	img := []float64{1, 2, 3, 4, 5, 6}
	x := tensor.FromFloat64s(tensor.Float64, tensor.Shape{1, 1, 2, 3}, img)
	var g []float64
	for h := range 2 {
		for w := range 3 {
			g = append(g, float64(w)-1, float64(h)*2-1)
		}
	}
	grid := tensor.FromFloat64s(tensor.Float64, tensor.Shape{1, 2, 3, 2}, g)
	for _, mode := range []string{"linear", "nearest", "cubic"} {
		a := graph.OpGridSample.NewAttrs().(*graph.GridSampleAttrs)
		a.Mode, a.AlignCorners, a.PaddingMode = mode, 1, "border"
		closeAll(t, mode, evalConstNode(t, graph.OpGridSample, a, x, grid).Float64s(), img)
	}
	a := graph.OpGridSample.NewAttrs().(*graph.GridSampleAttrs)
	a.AlignCorners, a.PaddingMode = 1, "reflection"
	far := tensor.FromFloat64s(tensor.Float64, tensor.Shape{1, 1, 2, 2}, []float64{2, -1, 3, -1})
	closeAll(t, "reflected", evalConstNode(t, graph.OpGridSample, a, x, far).Float64s(), []float64{2, 1})
}

// TestGridSampleCubicPadsEachTap: with border padding, cubic sampling past the last
// pixel takes the 4 taps around the coordinate as it is and clamps each tap, as ONNX
// Runtime and PyTorch do: at 3.75 on the row [1 2 4 8] (align_corners) the taps 2..5
// read 4, 8, 8, 8 with the weights of t = 0.75 (−0.03515625, 0.26171875, 0.87890625,
// −0.10546875), 8.140625; clamping the coordinate to 3 first gave 8.
func TestGridSampleCubicPadsEachTap(t *testing.T) {
	x := tensor.FromFloat64s(tensor.Float64, tensor.Shape{1, 1, 1, 4}, []float64{1, 2, 4, 8})
	grid := tensor.FromFloat64s(tensor.Float64, tensor.Shape{1, 1, 1, 2}, []float64{1.5, 0})
	a := graph.OpGridSample.NewAttrs().(*graph.GridSampleAttrs)
	a.Mode, a.AlignCorners, a.PaddingMode = "cubic", 1, "border"
	closeAll(t, "cubic border", evalConstNode(t, graph.OpGridSample, a, x, grid).Float64s(), []float64{8.140625})
}
