package cpu

import (
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/intrin"
	"github.com/kilnrt/kiln/tensor"
)

// TestRowsInnerByDefault: the default SplitK schedule keeps a channel block's whole map
// under each weight panel (RowsInner) for small maps, and for maps up to
// rowsInnerLargeMapBytes when a block's weights reach rowsInnerWeightBytes; never with
// fewer channel blocks than rowsInnerMinBlocks. Tiles of 64 columns.
func TestRowsInnerByDefault(t *testing.T) {
	g := intrin.GemmF32("avx512", 16, 6, 4)
	cases := []struct {
		name            string
		m, c, k, oh, ow int
		want            bool
	}{
		{"7x7 map, 512 channels", 512, 512, 3, 7, 7, true},
		{"7x7 map, 3 blocks", 192, 1152, 1, 7, 7, false},
		{"28x28 map, 0.6 MB blocks", 512, 256, 3, 28, 28, false},
		{"28x28 map, 1.2 MB blocks", 512, 512, 3, 28, 28, true},
		{"28x28 map, 1.2 MB blocks, 4 blocks", 256, 512, 3, 28, 28, false},
		{"32x32 map, 1 MiB blocks", 512, 4096, 1, 32, 32, true},
		{"33x32 map, 1 MiB blocks", 512, 4096, 1, 33, 32, false},
		{"32x32 map, 0.5 MiB blocks", 512, 2048, 1, 32, 32, false},
		{"56x56 map, 4.7 MB blocks", 512, 2048, 3, 56, 56, false},
	}
	for _, tc := range cases {
		w := &graph.Value{Name: "w", Const: tensor.New(tensor.Float32, tensor.Shape{tc.m, tc.c, tc.k, tc.k})}
		x := &graph.Value{Name: "x", Type: graph.TensorType(tensor.Float32, graph.StaticShape(1, int64(tc.c), int64(tc.oh), int64(tc.ow))...)}
		y := &graph.Value{Name: "y", Type: graph.TensorType(tensor.Float32, graph.StaticShape(1, int64(tc.m), int64(tc.oh), int64(tc.ow))...)}
		n := &graph.Node{Op: graph.OpConv, Inputs: []*graph.Value{x, w}, Outputs: []*graph.Value{y}}
		if got := rowsInnerByDefault(n, g); got != tc.want {
			t.Errorf("%s: RowsInner %v, want %v", tc.name, got, tc.want)
		}
	}
}
