package ref

import (
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

// TestPadWrap: Pad's wrap mode (opset 19) repeats an axis as a ring, numpy's
// np.pad(mode="wrap"): [1 2 3] padded 2 before and 3 after is [2 3 1 2 3 1 2 3]; an axis
// cropped at one end and padded at the other repeats what is left: [1 2 3 4] with pads
// (-1, 2) is [2 3 4 2 3]; pads that crop an axis to nothing and pad it are refused.
func TestPadWrap(t *testing.T) {
	wrap := graph.OpPad.NewAttrs().(*graph.PadAttrs)
	wrap.Mode = "wrap"
	pads := func(v ...int64) *tensor.Tensor { return tensor.MustFromSlice(tensor.Shape{len(v)}, v) }
	x := tensor.MustFromSlice(tensor.Shape{2, 3}, []float32{1, 2, 3, 4, 5, 6})
	got := evalConstNode(t, graph.OpPad, wrap, x, pads(0, 2, 1, 3))
	if want := (tensor.Shape{3, 8}); !got.Shape.Equal(want) {
		t.Fatalf("shape %v, want %v", got.Shape, want)
	}
	closeAll(t, "2-D wrap", got.Float64s(), []float64{
		2, 3, 1, 2, 3, 1, 2, 3,
		5, 6, 4, 5, 6, 4, 5, 6,
		2, 3, 1, 2, 3, 1, 2, 3,
	})
	v := tensor.MustFromSlice(tensor.Shape{4}, []float32{1, 2, 3, 4})
	closeAll(t, "crop then wrap", evalConstNode(t, graph.OpPad, wrap, v, pads(-1, 2)).Float64s(), []float64{2, 3, 4, 2, 3})
	closeAll(t, "crop the end, wrap the start", evalConstNode(t, graph.OpPad, wrap, v, pads(3, -1)).Float64s(), []float64{1, 2, 3, 1, 2, 3})
	b := graph.NewBuilder("main")
	y, err := b.Op1(graph.OpPad, wrap, b.Const("x", v), b.Const("p", pads(-4, 2)))
	if err == nil {
		var m *graph.Module
		if m, err = b.Module(y); err == nil {
			_, err = Eval(m, nil, Options{})
		}
	}
	if err == nil {
		t.Fatal("pads (-4, 2) wrap an axis cropped to nothing: no error")
	}
}
