package ref

import (
	"math"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

// TestResizeOpset18Attributes: antialiased linear downscaling of a 4×4 ramp by 0.6
// (the stretched triangle filter's weights worked by hand: 2.875, 4.5, 9.375, 11), axes that name the resized axes
// (scales over H and W only), keep_aspect_ratio_policy not_larger and not_smaller
// (the output rounded from the common scale), and half_pixel_symmetric.
func TestResizeOpset18Attributes(t *testing.T) {
	ramp := make([]float32, 16)
	for i := range ramp {
		ramp[i] = float32(i + 1)
	}
	x := tensor.MustFromSlice(tensor.Shape{1, 1, 4, 4}, ramp)
	f32s := func(v ...float32) *tensor.Tensor { return tensor.MustFromSlice(tensor.Shape{len(v)}, v) }
	i64s := func(v ...int64) *tensor.Tensor { return tensor.MustFromSlice(tensor.Shape{len(v)}, v) }
	resize := func(edit func(a *graph.ResizeAttrs), scales, sizes *tensor.Tensor) *tensor.Tensor {
		t.Helper()
		a := graph.OpResize.NewAttrs().(*graph.ResizeAttrs)
		edit(a)
		b := graph.NewBuilder("main")
		xv := b.Param("x", graph.TensorType(tensor.Float32, graph.StaticShape(1, 1, 4, 4)...))
		in := []*graph.Value{xv, nil, nil, nil}
		if scales != nil {
			in[2] = b.Const("scales", scales)
			in = in[:3]
		} else {
			in[3] = b.Const("sizes", sizes)
		}
		y, err := b.Op1(graph.OpResize, a, in...)
		if err != nil {
			t.Fatal(err)
		}
		m, err := b.Module(y)
		if err != nil {
			t.Fatal(err)
		}
		if want, ok := y.Type.ConstShape(); !ok {
			t.Fatalf("inference gives %v, want a static shape", y.Type)
		} else {
			res, err := Eval(m, map[string]Value{"x": x}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			got := res[0].(*tensor.Tensor)
			if !got.Shape.Equal(want) {
				t.Fatalf("shape %v, inference %v", got.Shape, want)
			}
			return got
		}
		return nil
	}
	near := func(name string, got *tensor.Tensor, shape tensor.Shape, want ...float64) {
		t.Helper()
		if !got.Shape.Equal(shape) {
			t.Fatalf("%s: shape %v, want %v", name, got.Shape, shape)
		}
		for i, v := range got.Float64s() {
			if math.Abs(v-want[i]) > 1e-5 {
				t.Fatalf("%s: %v, want %v", name, got.Float64s(), want)
			}
		}
	}
	aa := resize(func(a *graph.ResizeAttrs) { a.Mode, a.Antialias = "linear", 1 }, f32s(1, 1, 0.6, 0.6), nil)
	near("linear antialias", aa, tensor.Shape{1, 1, 2, 2}, 2.875, 4.5, 9.375, 11)
	axes := resize(func(a *graph.ResizeAttrs) { a.Mode, a.Antialias, a.Axes = "linear", 1, []int64{2, -1} }, f32s(0.6, 0.6), nil)
	near("axes", axes, tensor.Shape{1, 1, 2, 2}, aa.Float64s()...)
	// sizes 2×3 of a 4×4: not_larger takes scale 0.5 (2×2), not_smaller 0.75 (3×3)
	nl := resize(func(a *graph.ResizeAttrs) { a.Axes, a.KeepAspectRatioPolicy = []int64{2, 3}, "not_larger" }, nil, i64s(2, 3))
	if !nl.Shape.Equal(tensor.Shape{1, 1, 2, 2}) {
		t.Fatalf("not_larger: shape %v", nl.Shape)
	}
	ns := resize(func(a *graph.ResizeAttrs) { a.Axes, a.KeepAspectRatioPolicy = []int64{2, 3}, "not_smaller" }, nil, i64s(2, 3))
	if !ns.Shape.Equal(tensor.Shape{1, 1, 3, 3}) {
		t.Fatalf("not_smaller: shape %v", ns.Shape)
	}
	// half_pixel_symmetric differs from half_pixel where the extent was rounded: 4 × 0.6
	// gives 2, and the centre stays the centre
	sym := resize(func(a *graph.ResizeAttrs) { a.Mode, a.CoordinateTransformationMode = "linear", "half_pixel_symmetric" }, f32s(1, 1, 1, 0.6), nil)
	half := resize(func(a *graph.ResizeAttrs) { a.Mode = "linear" }, f32s(1, 1, 1, 0.6), nil)
	if g := sym.Float64s(); math.Abs(g[0]+g[1]-5) > 1e-5 || g[0] == half.Float64s()[0] {
		t.Fatalf("half_pixel_symmetric row %v (half_pixel %v): want a row symmetric about 2.5", g[:2], half.Float64s()[:2])
	}
}
