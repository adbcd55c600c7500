package cpu

import (
	"testing"

	"github.com/kilnrt/kiln/graph"
	kt "github.com/kilnrt/kiln/internal/kerneltest"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/tensor"
)

// TestLayoutUnblockTiled: a LayoutTransform from channel blocks of 8 and 16 to plain
// NCHW takes layout-unblock-tiled and gives back the NCHW data (two images, rows of 7
// and 33 columns); the other direction, plain to blocks, keeps the generic rule.
func TestLayoutUnblockTiled(t *testing.T) {
	for _, tc := range []struct {
		from, to, n, c, h, w int
		want                 string
	}{
		{16, 0, 2, 32, 5, 7, "layout-unblock-tiled"},
		{8, 0, 1, 24, 3, 33, "layout-unblock-tiled"},
		{0, 16, 1, 32, 3, 4, "generic"},
	} {
		x := f32(31, tc.n, tc.c, tc.h, tc.w)
		s := x.Shape
		typ := func(b int) graph.Type {
			ty := graph.TensorType(tensor.Float32, graph.StaticShape(int64(tc.n), int64(tc.c), int64(tc.h), int64(tc.w))...)
			ty.Block = int64(b)
			return ty
		}
		in, out := &graph.Value{Name: "x", Type: typ(tc.from)}, &graph.Value{Name: "y", Type: typ(tc.to)}
		n := &graph.Node{Op: graph.OpLayoutTransform, Name: "layout", Inputs: []*graph.Value{in}, Outputs: []*graph.Value{out}}
		out.Def = n
		data := x.Data.([]float32)
		if tc.from != 0 {
			data = PackNCHWc(data, s[0], s[1], s[2], s[3], tc.from)
		}
		got, strategy, err := nt.RunNode(Strategies(kernels.Default()), n, []nt.Arg{nt.In(tensor.MustFromSlice(s, data))})
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		if strategy != tc.want {
			t.Errorf("%+v: strategy %s, want %s", tc, strategy, tc.want)
		}
		res := got[0].Data.([]float32)
		if tc.to != 0 {
			res = UnpackNCHWc(res, s[0], s[1], s[2], s[3], tc.to)
		}
		kt.Close(t, "layout", res, x)
	}
}
