package cpu

import (
	"testing"

	"github.com/kilnrt/kiln/graph"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels"
)

// TestWinogradConv compares the Winograd F(2×2, 3×3) convolution with the reference:
// odd output extents (a last tile half outside), asymmetric pads, channel counts within
// one reduction block of the micro-kernel and beyond it, two images, with and without
// bias; a 3×3 convolution with too few tiles, input or output channels (DenseNet's
// 128→32), a stride or output channels that no declared micro-kernel tile divides takes
// the direct strategy. Output channels are multiples of 64, 48 or 24, whole tiles of a
// micro-kernel on every ISA (48: AVX-512's 8×48 tile, AVX2's 16 and the 128-bit 8
// columns; 72: AVX-512's 14×24 with AVX512VL), or 18, whole tiles of none.
func TestWinogradConv(t *testing.T) {
	l := Strategies(kernels.Default())
	cases := []struct {
		c, m, h, w int
		strides    []int64
		pad        []int64
		bias       bool
		want       string
	}{
		{128, 64, 16, 17, []int64{1, 1}, []int64{1, 1, 1, 1}, true, "conv2d-winograd-tensorized"},
		{130, 128, 20, 14, []int64{1, 1}, []int64{0, 1, 2, 1}, false, "conv2d-winograd-tensorized"},
		{128, 64, 28, 28, []int64{1, 1}, []int64{1, 1, 1, 1}, true, "conv2d-winograd-tensorized"},
		{300, 64, 14, 15, []int64{1, 1}, []int64{1, 1, 1, 1}, true, "conv2d-winograd-tensorized"},
		{128, 64, 9, 9, []int64{1, 1}, []int64{1, 1, 1, 1}, true, "conv2d-nchwc-tensorized"},
		{64, 64, 16, 16, []int64{1, 1}, []int64{1, 1, 1, 1}, true, "conv2d-nchwc-tensorized"},
		{128, 64, 30, 30, []int64{2, 2}, []int64{1, 1, 1, 1}, true, "conv2d-nchwc-tensorized"},
		{128, 18, 16, 16, []int64{1, 1}, []int64{1, 1, 1, 1}, true, "conv2d-nchwc-tensorized"},
		{128, 96, 16, 16, []int64{1, 1}, []int64{1, 1, 1, 1}, true, "conv2d-winograd-tensorized"},
		// 72: AVX-512's 14×24 (a zmm and a ymm per row), AVX2's 4×24, the 128-bit 8
		{128, 72, 15, 16, []int64{1, 1}, []int64{1, 1, 1, 1}, true, "conv2d-winograd-tensorized"},
		{128, 32, 16, 16, []int64{1, 1}, []int64{1, 1, 1, 1}, true, "conv2d-nchwc-tensorized"},
		// two images of 46×46 tiles by 128 channels: 33 MiB transformed
		{128, 64, 92, 92, []int64{1, 1}, []int64{1, 1, 1, 1}, false, "conv2d-nchwc-tensorized"},
	}
	for _, tc := range cases {
		a := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
		a.Strides, a.Pads, a.KernelShape = tc.strides, tc.pad, []int64{3, 3}
		args := []nt.Arg{nt.In(f32(21, 2, tc.c, tc.h, tc.w)), nt.C(f32(22, tc.m, tc.c, 3, 3))}
		if tc.bias {
			args = append(args, nt.C(f32(23, tc.m)))
		}
		if got := nt.CheckNode(t, l, graph.OpConv, a, 1, args...); got != tc.want {
			t.Errorf("%+v: strategy %s, want %s", tc, got, tc.want)
		}
	}
}
