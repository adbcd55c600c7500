package graph

import (
	"testing"

	"github.com/kilnrt/kiln/tensor"
)

// TestResizeInferenceOverAxes: with axes, the axes not resized keep their dims (a
// symbolic batch too) and the resized ones follow the scales, or the sizes under the
// aspect-ratio policy (4×4 to sizes 2×3: not_larger 2×2, not_smaller 3×3, stretch 2×3);
// a symbolic axis among the resized ones leaves every resized axis a fresh dim.
func TestResizeInferenceOverAxes(t *testing.T) {
	for _, c := range []struct {
		axes   []int64
		policy string
		scales []float32
		sizes  []int64
		want   string
	}{
		{axes: []int64{2, 3}, policy: "not_larger", sizes: []int64{2, 3}, want: "f32[b,3,2,2]"},
		{axes: []int64{2, 3}, policy: "not_smaller", sizes: []int64{2, 3}, want: "f32[b,3,3,3]"},
		{axes: []int64{-2, -1}, policy: "stretch", sizes: []int64{2, 3}, want: "f32[b,3,2,3]"},
		{axes: []int64{-1}, scales: []float32{0.5}, want: "f32[b,3,4,2]"},
		{axes: []int64{0, 3}, scales: []float32{2, 0.5}, want: "f32[_d1,3,4,_d2]"},
	} {
		b := NewBuilder("main")
		x := b.Param("x", TensorType(tensor.Float32, Sym("b"), Const(3), Const(4), Const(4)))
		a := OpResize.NewAttrs().(*ResizeAttrs)
		a.Axes = c.axes
		if c.policy != "" {
			a.KeepAspectRatioPolicy = c.policy
		}
		in := []*Value{x, nil, nil, nil}
		if c.sizes != nil {
			in[3] = b.Const("sizes", i64s(c.sizes...))
		} else {
			in[2] = b.Const("scales", tensor.MustFromSlice(tensor.Shape{len(c.scales)}, c.scales))
			in = in[:3]
		}
		if got := op1(t, b, OpResize, a, in...).Type.String(); got != c.want {
			t.Errorf("axes %v %s: type %s, want %s", c.axes, c.policy, got, c.want)
		}
	}
}
