package cpu

import (
	"testing"

	"github.com/kilnrt/kiln/graph"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels"
)

// TestTensorizedConv compares the blocked, tensorized convolution (weights repacked on
// the host, NCHW in and out) with the reference: channel counts that are and are not
// multiples of the blocks, strides, asymmetric pads, vertical dilation, bias.
func TestTensorizedConv(t *testing.T) {
	l := Strategies(kernels.Default())
	cases := []struct {
		c, m, h, w, k     int
		strides, dil, pad []int64
		bias              bool
	}{
		{3, 64, 19, 23, 7, []int64{2, 2}, []int64{1, 1}, []int64{3, 3, 3, 3}, true},
		{16, 24, 9, 13, 3, []int64{1, 1}, []int64{1, 1}, []int64{1, 1, 1, 1}, false},
		{128, 64, 7, 7, 3, []int64{1, 1}, []int64{1, 1}, []int64{1, 1, 1, 1}, true},
		{8, 70, 10, 11, 1, []int64{2, 2}, []int64{1, 1}, []int64{0, 0, 0, 0}, true},
		{6, 64, 12, 9, 3, []int64{1, 2}, []int64{2, 1}, []int64{2, 0, 1, 2}, true},
	}
	for _, tc := range cases {
		a := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
		a.Strides, a.Dilations, a.Pads, a.KernelShape = tc.strides, tc.dil, tc.pad, []int64{int64(tc.k), int64(tc.k)}
		args := []nt.Arg{nt.In(f32(11, 2, tc.c, tc.h, tc.w)), nt.C(f32(12, tc.m, tc.c, tc.k, tc.k))}
		if tc.bias {
			args = append(args, nt.C(f32(13, tc.m)))
		}
		if got := nt.CheckNode(t, l, graph.OpConv, a, 1, args...); got != "conv2d-nchwc-tensorized" {
			t.Fatalf("strategy %s, want the tensorized one", got)
		}
	}
}

// TestTensorizedMatMul: batched activations times constant weights, Gemm with transB,
// alpha, beta and every bias shape.
func TestTensorizedMatMul(t *testing.T) {
	l := Strategies(kernels.Default())
	if got := nt.CheckNode(t, l, graph.OpMatMul, nil, 1, nt.In(f32(1, 2, 37, 50)), nt.C(f32(2, 50, 70))); got != "matmul-packed-tensorized" {
		t.Fatalf("strategy %s", got)
	}
	for _, c := range []nt.Arg{nt.None, nt.C(f32(3, 70)), nt.In(f32(4, 1, 70)), nt.In(f32(5, 13, 1)), nt.C(f32(6, 13, 70))} {
		a := graph.OpGemm.NewAttrs().(*graph.GemmAttrs)
		a.TransB, a.Alpha, a.Beta = 1, 0.5, 2
		if got := nt.CheckNode(t, l, graph.OpGemm, a, 1, nt.In(f32(7, 13, 300)), nt.C(f32(8, 70, 300)), c); got != "gemm-packed-tensorized" {
			t.Fatalf("strategy %s", got)
		}
	}
}
