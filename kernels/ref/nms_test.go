package ref

import (
	"math"
	"slices"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

// TestNMSMaxOutput: NonMaxSuppression keeps at most max_output_boxes_per_class boxes per
// class, read as the int64 it is. torchvision's detection exports pass INT64_MAX for "no
// limit"; read through a float64 it rounds past the int range, and the evaluator kept
// no box at all where ONNX Runtime keeps every survivor.
func TestNMSMaxOutput(t *testing.T) {
	boxes := tensor.MustFromSlice(tensor.Shape{1, 3, 4}, []float32{
		0, 0, 10, 10, // kept (highest score)
		0, 1, 10, 11, // IoU 9/11 with the first: suppressed
		20, 20, 30, 30, // disjoint: kept
	})
	scores := tensor.MustFromSlice(tensor.Shape{1, 1, 3}, []float32{0.9, 0.8, 0.7})
	iou := tensor.MustFromSlice(tensor.Shape{1}, []float32{0.5})
	for _, c := range []struct {
		max  int64
		want []int64
	}{
		{math.MaxInt64, []int64{0, 0, 0, 0, 0, 2}},
		{2, []int64{0, 0, 0, 0, 0, 2}},
		{1, []int64{0, 0, 0}},
		{0, []int64{}},
		{-1, []int64{}},
	} {
		limit := tensor.MustFromSlice(tensor.Shape{1}, []int64{c.max})
		got := evalConstNode(t, graph.OpNonMaxSuppression, graph.OpNonMaxSuppression.NewAttrs(), boxes, scores, limit, iou)
		if len(got.Shape) != 2 || got.Shape[1] != 3 || !slices.Equal(got.Int64s(), c.want) {
			t.Errorf("max_output_boxes_per_class %d: %v %v, want %v", c.max, got.Shape, got.Int64s(), c.want)
		}
	}
}
