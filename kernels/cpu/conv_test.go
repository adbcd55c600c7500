package cpu

import (
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/internal/kerneltest"
	"github.com/kilnrt/kiln/intrin"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/schedule"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// TestConv2DNCHWcTensorized checks the blocked, tensorized convolution against the
// reference NCHW convolution (data and weights repacked on the host): 3×3 with padding
// at stride 1 and 2, and a 1×1, with widths that leave a partial column tile; the batch
// is symbolic in one case.
func TestConv2DNCHWcTensorized(t *testing.T) {
	cases := []struct {
		name             string
		c, h, w, k, s, p int
		symbolicBatch    bool
	}{
		{"3x3 pad1", 2, 9, 17, 3, 1, 1, true},
		{"3x3 stride2", 1, 11, 20, 3, 2, 1, false},
		{"1x1", 2, 5, 15, 1, 1, 0, false},
	}
	for _, g := range runnable(intrin.Gemms()) {
		nr := g.NR
		for _, tc := range cases {
			t.Run(g.Update.Name+"/"+tc.name, func(t *testing.T) {
				const n = 2
				cb, mb := 8, int(nr)
				c, m := tc.c*cb, 2*mb
				var batch loopir.Expr = loopir.Int(n)
				var dims []int64
				if tc.symbolicBatch {
					batch, dims = te.Dim("n"), []int64{n}
				}
				x := te.Placeholder("x", tensor.Float32, batch, loopir.Int(int64(c/cb)), loopir.Int(int64(tc.h)), loopir.Int(int64(tc.w)), loopir.Int(int64(cb)))
				w := te.Placeholder("w", tensor.Float32, loopir.Int(int64(m/mb)), loopir.Int(int64(c/cb)), loopir.Int(int64(tc.k)), loopir.Int(int64(tc.k*cb)), loopir.Int(int64(mb)))
				attrs := kernels.Conv2DAttrs{Strides: [2]int64{int64(tc.s), int64(tc.s)}, Pads: [2]int64{int64(tc.p), int64(tc.p)}, Dilations: [2]int64{1, 1}, Groups: 1}
				_, y, err := Conv2DNCHWc(x, w, attrs)
				if err != nil {
					t.Fatal(err)
				}
				f, err := te.Lower("conv", []*te.Tensor{x, w}, []*te.Tensor{y})
				if err != nil {
					t.Fatal(err)
				}
				s := schedule.New(f)
				if err := ScheduleConv2DNCHWc(s, g, true); err != nil {
					t.Fatal(err)
				}
				xv, wv := kerneltest.Random(3, n*c*tc.h*tc.w), kerneltest.Random(4, m*c*tc.k*tc.k)
				oh, ow := (tc.h+2*tc.p-tc.k)/tc.s+1, (tc.w+2*tc.p-tc.k)/tc.s+1
				got := kerneltest.Run(t, s.Func(), dims, n*m*oh*ow,
					PackNCHWc(xv, n, c, tc.h, tc.w, cb), PackWeightsNCHWc(wv, m, c, tc.k, tc.k, cb, mb))
				want := kerneltest.Ref(t, graph.OpConv, &graph.ConvAttrs{
					Strides: []int64{int64(tc.s), int64(tc.s)}, Pads: []int64{int64(tc.p), int64(tc.p), int64(tc.p), int64(tc.p)},
					Dilations: []int64{1, 1}, Group: 1, KernelShape: []int64{int64(tc.k), int64(tc.k)},
				}, []*tensor.Tensor{
					tensor.MustFromSlice(tensor.Shape{n, c, tc.h, tc.w}, xv),
					tensor.MustFromSlice(tensor.Shape{m, c, tc.k, tc.k}, wv)})
				kerneltest.Close(t, "tensorized conv2d", UnpackNCHWc(got, n, m, oh, ow, mb), want)
			})
		}
	}
}
