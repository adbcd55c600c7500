package compiler

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// TestFeaturePyramidUpsamplingCompilesAtEveryLevel: a detector's top-down path as torch
// exports it (a coarse map upsampled 2× by Resize with constant scales on H and W,
// added to a 1×1 lateral convolution of the finer map, then a 3×3 convolution and
// Relu), with nearest/asymmetric/floor, linear/pytorch_half_pixel and
// linear/align_corners, on a batch of 1 and of 2, compiles at O3 (fused, blocked
// layout, the Add fused into the lateral convolution) and O0, and matches the reference evaluator.
func TestFeaturePyramidUpsamplingCompilesAtEveryLevel(t *testing.T) {
	for _, mode := range []struct{ mode, coord, nearest string }{
		{"nearest", "asymmetric", "floor"},
		{"linear", "pytorch_half_pixel", ""},
		{"linear", "align_corners", ""},
	} {
		b := graph.NewBuilder("main")
		batch := graph.Sym("b")
		coarse := b.Param("coarse", graph.TensorType(tensor.Float32, batch, graph.Const(16), graph.Const(5), graph.Const(6)))
		fine := b.Param("fine", graph.TensorType(tensor.Float32, batch, graph.Const(8), graph.Const(10), graph.Const(12)))
		conv := func(in *graph.Value, cin, cout, k int, seed uint64) *graph.Value {
			return sameConv(t, b, in, cin, cout, k, seed)
		}
		ra := graph.OpResize.NewAttrs().(*graph.ResizeAttrs)
		ra.Mode, ra.CoordinateTransformationMode = mode.mode, mode.coord
		if mode.nearest != "" {
			ra.NearestMode = mode.nearest
		}
		scales := b.Const("scales", tensor.MustFromSlice(tensor.Shape{4}, []float32{1, 1, 2, 2}))
		up, err := b.Op1(graph.OpResize, ra, coarse, nil, scales)
		if err != nil {
			t.Fatal(err)
		}
		sum, _ := b.Op1(graph.OpAdd, nil, conv(fine, 8, 16, 1, 1), up)
		out, _ := b.Op1(graph.OpRelu, nil, conv(sum, 16, 16, 3, 3))
		m, err := b.Module(out)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{1, 2} {
			in := map[string]*tensor.Tensor{"coarse": f32(5, n, 16, 5, 6), "fine": f32(6, n, 8, 10, 12)}
			for _, r := range []engine.Recipe{{}, {Level: engine.O0}} {
				t.Run(fmt.Sprintf("%s %s batch %d %v", mode.mode, mode.coord, n, r.Level), func(t *testing.T) {
					res := checkCompiledFor(t, m, in, target.Host(), Options{Recipe: r})
					var anchors []string
					for _, g := range res.Stats.Groups {
						anchors = append(anchors, strings.Join(append([]string{strings.Fields(g.Anchor)[0]}, g.Fused...), "+"))
					}
					if !strings.HasPrefix(strings.Join(anchors, " "), "Resize") {
						t.Errorf("kernels %v: want Resize lowered as a kernel of its own", anchors)
					}
					if r.Level == engine.LevelDefault && !strings.Contains(strings.Join(anchors, " "), "Conv+Add") {
						t.Errorf("kernels %v: want the lateral convolution fused with the Add of the upsampled map", anchors)
					}
				})
			}
		}
	}
}
