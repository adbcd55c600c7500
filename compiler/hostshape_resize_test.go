package compiler

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

func f32v(v ...float32) *tensor.Tensor { return tensor.MustFromSlice(tensor.Shape{len(v)}, v) }

// resizeVariant is one Resize's mode attributes.
type resizeVariant struct {
	mode, nearest string
	cubicA        float32
	exclude       int64
}

// runtimeResizeModule: over x: f32[1,2,5,6], Resizes in coordinate mode coord with the
// scales (f32[4]) and the sizes of axes 2 and 3 (i64[2]) given as inputs, in each
// variant; under tf_crop_and_resize the roi is an input too (roi8 over every axis for
// the scales, roi over axes 2 and 3 for the sizes).
func runtimeResizeModule(t *testing.T, coord string, vars []resizeVariant, policy string) *graph.Module {
	t.Helper()
	b := graph.NewBuilder("main")
	x := b.Param("x", graph.TensorType(tensor.Float32, graph.StaticShape(1, 2, 5, 6)...))
	scales := b.Param("scales", graph.TensorType(tensor.Float32, graph.StaticShape(4)...))
	sizes := b.Param("sizes", graph.TensorType(tensor.Int64, graph.StaticShape(2)...))
	roi := b.Param("roi", graph.TensorType(tensor.Float32, graph.StaticShape(4)...))
	roi8 := b.Param("roi8", graph.TensorType(tensor.Float32, graph.StaticShape(8)...))
	var outs []*graph.Value
	for _, v := range vars {
		attrs := func() *graph.ResizeAttrs {
			a := graph.OpResize.NewAttrs().(*graph.ResizeAttrs)
			a.Mode, a.CoordinateTransformationMode = v.mode, coord
			if v.nearest != "" {
				a.NearestMode = v.nearest
			}
			if v.cubicA != 0 {
				a.CubicCoeffA = v.cubicA
			}
			a.ExcludeOutside, a.ExtrapolationValue = v.exclude, 7
			return a
		}
		var r, r8 *graph.Value
		if coord == "tf_crop_and_resize" {
			r, r8 = roi, roi8
		}
		o, err := b.Node(graph.OpResize, attrs(), 1, x, r8, scales)
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, o...)
		a := attrs()
		a.Axes, a.KeepAspectRatioPolicy = []int64{2, 3}, policy
		if o, err = b.Node(graph.OpResize, a, 1, x, r, nil, sizes); err != nil {
			t.Fatal(err)
		}
		outs = append(outs, o...)
	}
	m, err := b.Module(outs...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRuntimeResizeMatchesReference: Resize with scales, sizes and roi given as inputs
// compiles once per coordinate mode and matches the reference for upscales, downscales
// and fractional scales, fixed and random, in every mode (each nearest_mode, linear,
// cubic with and without exclude_outside, keep_aspect_ratio_policy), fused and not;
// hostile operands (a zero, negative, NaN or infinite scale, a negative size or one past
// the limits, a scale the output extent overflows) are ErrInput; a NaN, infinite or huge
// roi runs, and under tf_crop_and_resize (a bounds-checked build) reads only inside x.
func TestRuntimeResizeMatchesReference(t *testing.T) {
	nearest := []string{"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}
	coords := []string{"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn", "half_pixel_symmetric", "tf_crop_and_resize"}
	policies := []string{"stretch", "not_larger", "not_smaller"}
	runs := func(seed uint64) [][]*tensor.Tensor {
		run := func(k uint64, scales []float32, sizes []int64, roi []float32) []*tensor.Tensor {
			roi8 := []float32{0, 0, roi[0], roi[1], 1, 1, roi[2], roi[3]}
			return []*tensor.Tensor{f32(seed+k, 1, 2, 5, 6), f32v(scales...), i64s(sizes...), f32v(roi...), f32v(roi8...)}
		}
		rs := [][]*tensor.Tensor{
			run(1, []float32{1, 1, 2, 3}, []int64{9, 14}, []float32{0.1, -0.2, 0.9, 1.1}),
			run(2, []float32{1, 1, 0.6, 0.5}, []int64{3, 2}, []float32{0, 0, 1, 1}),
			run(3, []float32{1, 2, 1.7, 0.35}, []int64{1, 1}, []float32{0.4, 0.3, 0.6, 0.5}),
			run(4, []float32{1, 1, 1, 1}, []int64{5, 6}, []float32{-0.5, 0.2, 1.5, 0.7}),
			run(5, []float32{2, 1, 0.2, 2.5}, []int64{17, 7}, []float32{0.25, 0, 0.75, 1}),
		}
		// random operands: scales of the outer axes 1, 2 or 0.5, of the inner ones in
		// [0.15, 3.2); sizes in [1, 16]; roi starts in [-0.3, 0.7), ends in [0.3, 1.3)
		rng := rand.New(rand.NewPCG(seed, 7))
		outer := []float32{1, 1, 2, 0.5}
		for k := range 3 {
			u := func(lo, hi float64) float32 { return float32(lo + (hi-lo)*rng.Float64()) }
			scales := []float32{outer[rng.IntN(4)], outer[rng.IntN(4)], u(0.15, 3.2), u(0.15, 3.2)}
			sizes := []int64{1 + rng.Int64N(16), 1 + rng.Int64N(16)}
			roi := []float32{u(-0.3, 0.7), u(-0.3, 0.7), u(0.3, 1.3), u(0.3, 1.3)}
			rs = append(rs, run(uint64(6+k), scales, sizes, roi))
		}
		return rs
	}
	for k, coord := range coords {
		vars := []resizeVariant{
			{mode: "nearest", nearest: nearest[k%4]},
			{mode: "nearest", nearest: nearest[(k+1)%4]},
			{mode: "linear"},
			{mode: "cubic", cubicA: -0.75},
			{mode: "cubic", cubicA: -0.5, exclude: 1},
		}
		policy := policies[k%3]
		t.Run(fmt.Sprintf("%s/%s", coord, policy), func(t *testing.T) {
			m := runtimeResizeModule(t, coord, vars, policy)
			// the crop mode's build checks every access: a hostile roi reads nothing outside
			recipe := engine.Recipe{NoFusion: k%2 == 1, BoundsCheck: coord == "tf_crop_and_resize"}
			machine, _ := checkSymbolic(t, m, target.Host(), Options{Recipe: recipe}, runs(uint64(10*k)))
			nan, inf := float32(math.NaN()), float32(math.Inf(1))
			for _, bad := range []struct {
				why    string
				scales []float32
				sizes  []int64
			}{
				{"a zero scale", []float32{1, 1, 0, 2}, []int64{2, 2}},
				{"a negative scale", []float32{1, 1, 2, -1}, []int64{2, 2}},
				{"a NaN scale", []float32{1, nan, 2, 2}, []int64{2, 2}},
				{"an infinite scale", []float32{1, 1, inf, 2}, []int64{2, 2}},
				{"a scale past the limits", []float32{1, 1, 1e30, 2}, []int64{2, 2}},
				{"a negative size", []float32{1, 1, 2, 2}, []int64{-3, 2}},
				{"a size past the limits", []float32{1, 1, 2, 2}, []int64{1 << 41, 2}},
			} {
				in := []*tensor.Tensor{f32(1, 1, 2, 5, 6), f32v(bad.scales...), i64s(bad.sizes...), f32v(0, 0, 1, 1), f32v(0, 0, 0, 0, 1, 1, 1, 1)}
				if _, err := machine.Run(context.Background(), in); !errors.Is(err, vm.ErrInput) {
					t.Errorf("%s: got %v, want ErrInput", bad.why, err)
				}
			}
			for _, roi := range [][]float32{{nan, 0, 1, nan}, {-inf, 0.5, inf, 0.5}, {1e30, -1e30, -1e30, 1e30}} {
				roi8 := []float32{0, 0, roi[0], roi[1], 1, 1, roi[2], roi[3]}
				in := []*tensor.Tensor{f32(2, 1, 2, 5, 6), f32v(1, 1, 1.5, 0.5), i64s(4, 9), f32v(roi...), f32v(roi8...)}
				if _, err := machine.Run(context.Background(), in); err != nil {
					t.Errorf("roi %v: %v", roi, err)
				}
			}
		})
	}
}
