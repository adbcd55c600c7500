package cpu

import (
	"fmt"
	"testing"

	"github.com/kilnrt/kiln/graph"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/tensor"
)

// TestRoiAlignComputesSamplesPerRegionAndMatchesTheReference: the CPU table's RoiAlign is the
// channels-inner schedule, and it matches the reference evaluator: avg and max, both
// coordinate modes, sampling ratios 1 and 2, regions partly and wholly outside the
// image and a degenerate one, over two images.
func TestRoiAlignComputesSamplesPerRegionAndMatchesTheReference(t *testing.T) {
	l := Strategies(kernels.Default())
	rois := tensor.MustFromSlice(tensor.Shape{5, 4}, []float32{
		0, 0, 9, 9,
		2.5, 1.2, 7.7, 12.4,
		-4, -3, 3, 2,
		11, 10, 16, 15,
		5, 5, 5, 5,
	})
	batch := tensor.MustFromSlice(tensor.Shape{5}, []int64{0, 1, 1, 0, 1})
	x := f32(7, 2, 19, 8, 10)
	for _, mode := range []string{"avg", "max"} {
		for _, coord := range []string{"half_pixel", "output_half_pixel"} {
			for _, ratio := range []int64{1, 2} {
				t.Run(fmt.Sprintf("%s/%s/ratio%d", mode, coord, ratio), func(t *testing.T) {
					a := graph.OpRoiAlign.NewAttrs().(*graph.RoiAlignAttrs)
					a.Mode, a.CoordinateTransformationMode, a.SamplingRatio = mode, coord, ratio
					a.OutputHeight, a.OutputWidth = 3, 4
					a.SpatialScale = 0.8
					if got := nt.CheckNode(t, l, graph.OpRoiAlign, a, 1, nt.In(x), nt.In(rois), nt.In(batch)); got != "roialign-samples-per-region" {
						t.Fatalf("strategy %s", got)
					}
				})
			}
		}
	}
}
