package ref

import (
	"math"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

func ints64(v ...int64) *tensor.Tensor { return tensor.MustFromSlice(tensor.Shape{len(v)}, v) }

func f64s(shape tensor.Shape, v ...float64) *tensor.Tensor {
	return tensor.FromFloat64s(tensor.Float64, shape, v)
}

// TestCol2ImAddsOverlappingBlocks: 2×2 blocks over a 3×3 image (columns 1…16, block
// offset k major) add up where they overlap (the center gets 4+7+10+13); with stride 2,
// dilation 2 and a pad of 1 on each side of a 1×5 image the columns that land in the
// padding are dropped.
func TestCol2ImAddsOverlappingBlocks(t *testing.T) {
	x := make([]float64, 16)
	for i := range x {
		x[i] = float64(i + 1)
	}
	got := evalConstNode(t, graph.OpCol2Im, &graph.Col2ImAttrs{}, f64s(tensor.Shape{1, 4, 4}, x...), ints64(3, 3), ints64(2, 2))
	if !got.Shape.Equal(tensor.Shape{1, 1, 3, 3}) {
		t.Fatalf("shape %v", got.Shape)
	}
	closeAll(t, "3×3 from 2×2 blocks", got.Float64s(), []float64{1, 7, 6, 12, 34, 22, 11, 27, 16})

	a := &graph.Col2ImAttrs{Dilations: []int64{1, 2}, Pads: []int64{0, 1, 0, 1}, Strides: []int64{1, 2}}
	got = evalConstNode(t, graph.OpCol2Im, a, f64s(tensor.Shape{1, 2, 3}, 1, 2, 3, 4, 5, 6), ints64(1, 5), ints64(1, 2))
	// positions l·2 + k·2 − 1: column 1 (k=0, l=0) and 6 (k=1, l=2) fall in the padding
	closeAll(t, "strided, dilated, padded", got.Float64s(), []float64{0, 2 + 4, 0, 3 + 5, 0})
}

// TestCenterCropPadCentersWithTheOddElementOnTheRight: cropping 5 columns to 2 starts at
// column ⌊3/2⌋ = 1; padding 3 rows to 4 puts the extra zero row after the input, and
// padding 4 to 7 along the last axis puts one zero before and two after.
func TestCenterCropPadCentersWithTheOddElementOnTheRight(t *testing.T) {
	x := make([]float64, 15)
	for i := range x {
		x[i] = float64(i)
	}
	got := evalConstNode(t, graph.OpCenterCropPad, &graph.CenterCropPadAttrs{}, f64s(tensor.Shape{3, 5}, x...), ints64(4, 2))
	if !got.Shape.Equal(tensor.Shape{4, 2}) {
		t.Fatalf("shape %v", got.Shape)
	}
	closeAll(t, "pad rows, crop columns", got.Float64s(), []float64{1, 2, 6, 7, 11, 12, 0, 0})

	b := tensor.MustFromSlice(tensor.Shape{2, 4}, []bool{true, false, true, true, false, true, false, false})
	got = evalConstNode(t, graph.OpCenterCropPad, &graph.CenterCropPadAttrs{Axes: []int64{-1}}, b, ints64(7))
	want := []bool{false, true, false, true, true, false, false, false, false, true, false, false, false, false}
	for i, v := range got.Data.([]bool) {
		if v != want[i] {
			t.Fatalf("bool pad along the last axis: %v, want %v", got.Data, want)
		}
	}
}

// TestAffineGridMapsPixelCentersThroughTheMatrix: without align_corners the 3×2 grid's
// points are x ∈ {−2/3, 0, 2/3}, y ∈ {−1/2, 1/2}, rotated and scaled by theta; with it
// a 3-D grid's points are the corners (±1) and a single pixel's is 0, then scaled and
// translated.
func TestAffineGridMapsPixelCentersThroughTheMatrix(t *testing.T) {
	theta := f64s(tensor.Shape{1, 2, 3}, 0.8, 0.5, 0, -0.5, 0.8, 0)
	got := evalConstNode(t, graph.OpAffineGrid, &graph.AffineGridAttrs{}, theta, ints64(1, 3, 2, 3))
	if !got.Shape.Equal(tensor.Shape{1, 2, 3, 2}) {
		t.Fatalf("shape %v", got.Shape)
	}
	// (x', y') = (0.8x + 0.5y, −0.5x + 0.8y)
	closeAll(t, "2-D", got.Float64s(), []float64{
		-0.8*2/3 - 0.25, 0.5*2/3 - 0.4, -0.25, -0.4, 0.8*2/3 - 0.25, -0.5*2/3 - 0.4,
		-0.8*2/3 + 0.25, 0.5*2/3 + 0.4, 0.25, 0.4, 0.8*2/3 + 0.25, -0.5*2/3 + 0.4,
	})

	theta = f64s(tensor.Shape{1, 3, 4}, 1, 0, 0, 0.5, 0, 2, 0, 0, 0, 0, 1, -1)
	got = evalConstNode(t, graph.OpAffineGrid, &graph.AffineGridAttrs{AlignCorners: 1}, theta, ints64(1, 1, 2, 1, 2))
	if !got.Shape.Equal(tensor.Shape{1, 2, 1, 2, 3}) {
		t.Fatalf("shape %v", got.Shape)
	}
	// (x + 0.5, 2y, z − 1) at x ∈ {−1, 1}, y = 0, z ∈ {−1, 1}
	closeAll(t, "3-D", got.Float64s(), []float64{-0.5, 0, -2, 1.5, 0, -2, -0.5, 0, 0, 1.5, 0, 0})
}

// TestGroupNormalizationNormalizesEachGroupOfChannels: channels {0, 1} (values 1, 3, 5,
// 7: mean 4, variance 5) and {2, 3} (2, −2, 4, −4: mean 0, variance 10) are normalized
// apart, then each channel takes its own scale and bias.
func TestGroupNormalizationNormalizesEachGroupOfChannels(t *testing.T) {
	x := f64s(tensor.Shape{1, 4, 2}, 1, 3, 5, 7, 2, -2, 4, -4)
	a := &graph.GroupNormAttrs{NumGroups: 2, StashType: int64(tensor.Float32)}
	got := evalConstNode(t, graph.OpGroupNormalization, a, x, f64s(tensor.Shape{4}, 1, 2, 3, 4), f64s(tensor.Shape{4}, 0, 1, 0, -1))
	r5, r10 := math.Sqrt(5), math.Sqrt(10)
	closeAll(t, "two groups", got.Float64s(), []float64{-3 / r5, -1 / r5, 2/r5 + 1, 6/r5 + 1, 6 / r10, -6 / r10, 16/r10 - 1, -16/r10 - 1})
}

// TestBitwiseOpsOnBytes: uint8 0xf0 ^ 0xff is 0x0f (no sign extension), and the
// complement of int8 −128 is 127.
func TestBitwiseOpsOnBytes(t *testing.T) {
	u8 := func(v ...int64) *tensor.Tensor { return tensor.FromInt64s(tensor.Uint8, tensor.Shape{len(v)}, v) }
	a, b := u8(0xf0, 0x0f, 0xaa), u8(0xff, 0x3c, 0x0f)
	for _, c := range []struct {
		op   graph.Op
		in   []*tensor.Tensor
		want []int64
	}{
		{graph.OpBitwiseAnd, []*tensor.Tensor{a, b}, []int64{0xf0, 0x0c, 0x0a}},
		{graph.OpBitwiseOr, []*tensor.Tensor{a, b}, []int64{0xff, 0x3f, 0xaf}},
		{graph.OpBitwiseXor, []*tensor.Tensor{a, b}, []int64{0x0f, 0x33, 0xa5}},
		{graph.OpBitwiseNot, []*tensor.Tensor{a}, []int64{0x0f, 0xf0, 0x55}},
		{graph.OpBitwiseNot, []*tensor.Tensor{tensor.FromInt64s(tensor.Int8, tensor.Shape{3}, []int64{-128, 0, 5})}, []int64{127, -1, -6}},
	} {
		got := evalConstNode(t, c.op, nil, c.in...)
		if got.DType != c.in[0].DType {
			t.Fatalf("%v: %v, want %v", c.op, got.DType, c.in[0].DType)
		}
		for i, v := range got.Int64s() {
			if v != c.want[i] {
				t.Errorf("%v: element %d = %#x, want %#x", c.op, i, v, c.want[i])
			}
		}
	}
}
