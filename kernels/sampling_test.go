package kernels_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/internal/kerneltest"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/tensor"
)

// gridBeyond is a random grid [n, h, w, 2] with points in [-1.7, 1.7): about half of
// them outside [-1, 1], where the padding modes differ, and a few exactly on -1, 0 and
// 1 and on the pixel ties of nearest.
func gridBeyond(seed uint64, n, h, w int) *tensor.Tensor {
	v := kerneltest.Random(seed, n*h*w*2)
	for i := range v {
		v[i] *= 1.7
	}
	special := []float32{-1, 0, 1, -0.5, 0.5, 2.5, -3.25}
	for i, s := range special {
		v[(i*7)%len(v)] = s
	}
	return tensor.MustFromSlice(tensor.Shape{n, h, w, 2}, v)
}

// TestGridSampleMatchesReferenceOutsideTheGrid compares the GridSample definition
// with the reference evaluator in every mode, padding mode and align_corners setting
// on grids reaching past [-1, 1].
func TestGridSampleMatchesReferenceOutsideTheGrid(t *testing.T) {
	l := genericLowerer()
	k := 0
	for _, mode := range []string{"bilinear", "nearest", "bicubic"} {
		for _, pad := range []string{"zeros", "border", "reflection"} {
			for _, align := range []int64{0, 1} {
				k++
				t.Run(fmt.Sprintf("%s/%s/align%d", mode, pad, align), func(t *testing.T) {
					a := graph.OpGridSample.NewAttrs().(*graph.GridSampleAttrs)
					a.Mode, a.PaddingMode, a.AlignCorners = mode, pad, align
					x := randomF32(uint64(k), 2, 3, 5, 6)
					nt.CheckNode(t, l, graph.OpGridSample, a, 1, nt.In(x), nt.In(gridBeyond(uint64(k+50), 2, 4, 7)))
				})
			}
		}
	}
}

// TestGridSampleOnOneRowImage: an axis of extent 1 (reflection has no span there,
// align_corners maps every point to the one pixel).
func TestGridSampleOnOneRowImage(t *testing.T) {
	l := genericLowerer()
	for _, pad := range []string{"zeros", "border", "reflection"} {
		for _, align := range []int64{0, 1} {
			t.Run(fmt.Sprintf("%s/align%d", pad, align), func(t *testing.T) {
				a := graph.OpGridSample.NewAttrs().(*graph.GridSampleAttrs)
				a.Mode, a.PaddingMode, a.AlignCorners = "linear", pad, align
				nt.CheckNode(t, l, graph.OpGridSample, a, 1, nt.In(randomF32(7, 1, 2, 1, 5)), nt.In(gridBeyond(8, 1, 3, 4)))
			})
		}
	}
}

// TestGridSampleOfVolumesAndLinesMatchesReference: GridSample-20's other spatial
// ranks, 3-D volumes (nearest rounding ties away from zero there) and 1-D lines, against
// the reference evaluator; four spatial axes are refused with ErrNoKernel.
func TestGridSampleOfVolumesAndLinesMatchesReference(t *testing.T) {
	l := genericLowerer()
	scaled := func(seed uint64, shape ...int) *tensor.Tensor {
		g := randomF32(seed, shape...)
		v := g.Float64s()
		for i := range v {
			v[i] *= 1.6
		}
		v[0], v[1] = 0.5, -0.5 // -0.5 on an axis of 3 with align_corners: the pixel tie 0.5
		return tensor.FromFloat64s(tensor.Float32, g.Shape, v)
	}
	cases := []struct {
		mode, pad string
		align     int64
		x, grid   []int
	}{
		{"linear", "zeros", 0, []int{1, 2, 3, 4, 5}, []int{1, 2, 3, 2, 3}},
		{"nearest", "border", 1, []int{2, 1, 3, 3, 4}, []int{2, 3, 2, 2, 3}},
		{"cubic", "reflection", 0, []int{1, 1, 4, 3, 3}, []int{1, 2, 2, 2, 3}},
		{"linear", "reflection", 1, []int{2, 3, 7}, []int{2, 5, 1}},
	}
	for k, c := range cases {
		t.Run(fmt.Sprintf("%s/%s/align%d/%dd", c.mode, c.pad, c.align, len(c.x)-2), func(t *testing.T) {
			a := graph.OpGridSample.NewAttrs().(*graph.GridSampleAttrs)
			a.Mode, a.PaddingMode, a.AlignCorners = c.mode, c.pad, c.align
			nt.CheckNode(t, l, graph.OpGridSample, a, 1, nt.In(randomF32(uint64(k+70), c.x...)), nt.In(scaled(uint64(k+80), c.grid...)))
		})
	}
	err := nt.LowerErr(t, l, graph.OpGridSample, graph.OpGridSample.NewAttrs(), 1,
		nt.In(randomF32(1, 1, 1, 2, 2, 2, 2)), nt.In(randomF32(2, 1, 2, 2, 2, 2, 4)))
	if !errors.Is(err, kernels.ErrNoKernel) {
		t.Fatalf("lowering a 4-D GridSample: %v, want ErrNoKernel", err)
	}
}

// TestRoiAlignMatchesReferenceInBothModes compares the RoiAlign definition with the
// reference evaluator: avg and max, half_pixel and output_half_pixel, sampling ratios
// 1 to 3, a spatial scale, regions partly and wholly outside the image and degenerate
// ones, over two images.
func TestRoiAlignMatchesReferenceInBothModes(t *testing.T) {
	l := genericLowerer()
	rois := tensor.MustFromSlice(tensor.Shape{5, 4}, []float32{
		0, 0, 9, 9,
		2.5, 1.2, 7.7, 12.4,
		-4, -3, 3, 2,
		11, 10, 16, 15,
		5, 5, 5, 5,
	})
	batch := tensor.MustFromSlice(tensor.Shape{5}, []int64{0, 1, 1, 0, 1})
	x := randomF32(3, 2, 3, 8, 10)
	k := 0
	for _, mode := range []string{"avg", "max"} {
		for _, coord := range []string{"half_pixel", "output_half_pixel"} {
			for _, ratio := range []int64{1, 2, 3} {
				k++
				t.Run(fmt.Sprintf("%s/%s/ratio%d", mode, coord, ratio), func(t *testing.T) {
					a := graph.OpRoiAlign.NewAttrs().(*graph.RoiAlignAttrs)
					a.Mode, a.CoordinateTransformationMode, a.SamplingRatio = mode, coord, ratio
					a.OutputHeight, a.OutputWidth = 3, int64(2+k%3)
					a.SpatialScale = 0.8
					nt.CheckNode(t, l, graph.OpRoiAlign, a, 1, nt.In(x), nt.In(rois), nt.In(batch))
				})
			}
		}
	}
}

// TestRoiAlignWithAdaptiveSamplingHasNoKernel: sampling_ratio 0 (a sample count that
// depends on each region) is refused with ErrNoKernel.
func TestRoiAlignWithAdaptiveSamplingHasNoKernel(t *testing.T) {
	a := graph.OpRoiAlign.NewAttrs().(*graph.RoiAlignAttrs)
	err := nt.LowerErr(t, genericLowerer(), graph.OpRoiAlign, a, 1, nt.In(randomF32(1, 1, 1, 4, 4)),
		nt.In(tensor.MustFromSlice(tensor.Shape{1, 4}, []float32{0, 0, 3, 3})), nt.In(tensor.MustFromSlice(tensor.Shape{1}, []int64{0})))
	if !errors.Is(err, kernels.ErrNoKernel) {
		t.Fatalf("lowering RoiAlign with sampling_ratio 0: %v, want ErrNoKernel", err)
	}
}
