package graph_test

import (
	"fmt"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

// TestEinsumInferenceBroadcastsEllipsisAndLabels: the ellipses of the terms broadcast
// against each other aligned on the right, and a label seen with extent 1 takes its
// other extent, so the output shape is the broadcast one whichever term comes first.
func TestEinsumInferenceBroadcastsEllipsisAndLabels(t *testing.T) {
	cases := []struct {
		eq     string
		shapes [][]int64
		want   string
	}{
		{"...ij,...jk", [][]int64{{2, 1, 3, 4}, {5, 4, 2}}, "f32[2,5,3,2]"},
		{"...ij,...jk->...ik", [][]int64{{3, 4}, {2, 4, 6}}, "f32[2,3,6]"},
		{"ij,ij->ij", [][]int64{{3, 1}, {3, 4}}, "f32[3,4]"},
	}
	for _, c := range cases {
		b := graph.NewBuilder("main")
		var in []*graph.Value
		for i, s := range c.shapes {
			in = append(in, b.Param(fmt.Sprintf("x%d", i), graph.TensorType(tensor.Float32, graph.StaticShape(s...)...)))
		}
		outs, err := b.Node(graph.OpEinsum, &graph.EinsumAttrs{Equation: c.eq}, 1, in...)
		if err != nil {
			t.Fatalf("%s: %v", c.eq, err)
		}
		if fmt.Sprint(outs[0].Type) != c.want {
			t.Errorf("%s: output %v, want %s", c.eq, outs[0].Type, c.want)
		}
	}
}
