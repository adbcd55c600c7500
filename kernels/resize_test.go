package kernels_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/internal/kerneltest"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// genericLowerer lowers every node through its compute definition with no schedule.
func genericLowerer() *kernels.Strategies {
	reg := kernels.Default()
	return kernels.NewStrategies(kernels.Strategy{Name: "generic",
		Build: func(n *graph.Node, in []kernels.Input, _ target.Target) (*kernels.Impl, error) {
			return kernels.Generic(reg, kernels.KernelName(n), n, in, nil)
		}}, nil)
}

func randomF32(seed uint64, shape ...int) *tensor.Tensor {
	return tensor.MustFromSlice(tensor.Shape(shape), kerneltest.Random(seed, tensor.Shape(shape).NumElements()))
}

func f32s(v ...float32) *tensor.Tensor { return tensor.MustFromSlice(tensor.Shape{len(v)}, v) }

func sizes(v ...int64) *tensor.Tensor { return tensor.MustFromSlice(tensor.Shape{len(v)}, v) }

// resizeCase is one Resize: its attributes, input shape, and constant scales or sizes
// (and roi for tf_crop_and_resize).
type resizeCase struct {
	mode, coord, nearest string
	cubicA               float32
	exclude, antialias   int64
	extrap               float32
	axes                 []int64
	policy               string
	shape                []int
	scales               *tensor.Tensor
	sizes                *tensor.Tensor
	roi                  *tensor.Tensor
}

func (c resizeCase) String() string {
	s := fmt.Sprintf("%s/%s", c.mode, c.coord)
	if c.mode == "nearest" {
		s += "/" + c.nearest
	}
	if c.mode == "cubic" {
		s += fmt.Sprintf("/A=%g/exclude=%d", c.cubicA, c.exclude)
	}
	if c.antialias != 0 {
		s += "/antialias"
	}
	if c.axes != nil {
		s += fmt.Sprintf("/axes%v", c.axes)
	}
	if c.policy != "" {
		s += "/" + c.policy
	}
	if c.scales != nil {
		return fmt.Sprintf("%s %v scales %v", s, c.shape, c.scales.Float64s())
	}
	return fmt.Sprintf("%s %v sizes %v", s, c.shape, c.sizes.Int64s())
}

func (c resizeCase) attrs() *graph.ResizeAttrs {
	a := graph.OpResize.NewAttrs().(*graph.ResizeAttrs)
	a.Mode, a.CoordinateTransformationMode = c.mode, c.coord
	if c.nearest != "" {
		a.NearestMode = c.nearest
	}
	if c.cubicA != 0 {
		a.CubicCoeffA = c.cubicA
	}
	a.ExcludeOutside, a.ExtrapolationValue = c.exclude, c.extrap
	a.Antialias, a.Axes = c.antialias, c.axes
	if c.policy != "" {
		a.KeepAspectRatioPolicy = c.policy
	}
	return a
}

func (c resizeCase) args(x *tensor.Tensor) []nt.Arg {
	args := []nt.Arg{nt.In(x), nt.None, nt.None, nt.None}
	if c.roi != nil {
		args[1] = nt.C(c.roi)
	}
	if c.scales != nil {
		args[2] = nt.C(c.scales)
		return args[:3]
	}
	args[3] = nt.C(c.sizes)
	return args
}

var resizeCoords = []string{"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn"}

// resizeGeometries are upscales and downscales by scales (fractional ones included) and
// by sizes, on 4-D NCHW, 5-D (trilinear over three axes) and 1-D inputs, with batch and
// channel axes left as they are or resized too.
func resizeGeometries() []resizeCase {
	return []resizeCase{
		{shape: []int{2, 3, 4, 5}, scales: f32s(1, 1, 2, 3)},
		{shape: []int{1, 2, 7, 9}, scales: f32s(1, 1, 0.6, 0.5)},
		{shape: []int{1, 1, 5, 4}, scales: f32s(1, 1, 1.7, 2.35)},
		{shape: []int{2, 2, 6, 5}, sizes: sizes(2, 2, 4, 11)},
		{shape: []int{1, 3, 4, 5}, sizes: sizes(1, 3, 1, 1)},
		{shape: []int{2, 3, 4, 5}, scales: f32s(1, 2, 1.5, 0.75)},
		{shape: []int{9}, scales: f32s(0.35)},
		{shape: []int{1, 2, 3, 4, 5}, scales: f32s(1, 1, 2, 0.5, 1.5)},
	}
}

// TestResizeMatchesReferenceInEveryMode compares the Resize definition with the
// reference evaluator on random inputs for nearest (every nearest_mode), linear and
// cubic (coefficient and exclude_outside) under every coordinate transformation, and
// tf_crop_and_resize with a roi reaching outside the input (the extrapolation value).
func TestResizeMatchesReferenceInEveryMode(t *testing.T) {
	l := genericLowerer()
	nearestModes := []string{"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}
	var cases []resizeCase
	for k, g := range resizeGeometries() {
		for _, j := range []int{k % 5, (k + 2) % 5} { // two coordinate modes per geometry, every mode over all
			coord := resizeCoords[j]
			c := g
			c.mode, c.coord, c.nearest = "nearest", coord, nearestModes[(k+j)%4]
			cases = append(cases, c)
			c.mode, c.nearest = "linear", ""
			cases = append(cases, c)
			c.mode, c.cubicA, c.exclude = "cubic", -0.75, 0
			if (k+j)%2 == 1 {
				c.cubicA, c.exclude = -0.5, 1
			}
			cases = append(cases, c)
		}
	}
	// every nearest_mode where coordinates fall on ties and integers
	for _, coord := range resizeCoords {
		for _, nm := range nearestModes {
			cases = append(cases, resizeCase{mode: "nearest", coord: coord, nearest: nm, shape: []int{1, 1, 4, 6}, sizes: sizes(1, 1, 37, 9)})
		}
	}
	for _, mode := range []string{"nearest", "linear", "cubic"} {
		cases = append(cases,
			resizeCase{mode: mode, coord: "tf_crop_and_resize", nearest: "round_prefer_floor", extrap: 10, shape: []int{1, 2, 4, 4},
				roi: f32s(0, 0, 0.4, -0.2, 1, 1, 1.3, 0.8), sizes: sizes(1, 2, 3, 5)},
			resizeCase{mode: mode, coord: "tf_crop_and_resize", nearest: "floor", shape: []int{2, 3, 6},
				roi: f32s(0, 0, 0.1, 1, 1, 0.9), scales: f32s(1, 1, 0.5)},
		)
	}
	for k, c := range cases {
		x := randomF32(uint64(k+1), c.shape...)
		t.Run(c.String(), func(t *testing.T) {
			nt.CheckNode(t, l, graph.OpResize, c.attrs(), 1, c.args(x)...)
		})
	}
}

// TestResizeOpset18AttributesMatchReference: antialiased linear and cubic downscaling
// (exclude_outside too, and an axis scaled up beside one scaled down), axes naming the
// resized axes (negative too, with a crop roi over them), keep_aspect_ratio_policy
// not_larger and not_smaller, and half_pixel_symmetric, against the reference evaluator.
func TestResizeOpset18AttributesMatchReference(t *testing.T) {
	l := genericLowerer()
	cases := []resizeCase{
		{mode: "linear", coord: "half_pixel", antialias: 1, shape: []int{1, 2, 7, 9}, scales: f32s(1, 1, 0.6, 0.3)},
		{mode: "linear", coord: "align_corners", antialias: 1, exclude: 1, shape: []int{1, 1, 8, 5}, scales: f32s(1, 1, 0.45, 1.5)},
		{mode: "cubic", coord: "half_pixel", antialias: 1, cubicA: -0.75, shape: []int{1, 2, 9, 8}, scales: f32s(1, 1, 0.5, 0.35)},
		{mode: "cubic", coord: "pytorch_half_pixel", antialias: 1, cubicA: -0.5, exclude: 1, shape: []int{2, 1, 6, 7}, sizes: sizes(2, 1, 4, 3)},
		{mode: "linear", coord: "asymmetric", axes: []int64{2, 3}, shape: []int{2, 3, 5, 6}, scales: f32s(0.6, 1.7)},
		{mode: "nearest", coord: "half_pixel", nearest: "round_prefer_ceil", axes: []int64{-1}, shape: []int{2, 3, 5, 6}, sizes: sizes(13)},
		{mode: "linear", coord: "tf_crop_and_resize", axes: []int64{3, 2}, extrap: 5, shape: []int{1, 2, 5, 6},
			roi: f32s(-0.2, 0.1, 1.1, 0.8), sizes: sizes(7, 4)},
		{mode: "linear", coord: "half_pixel", axes: []int64{2, 3}, policy: "not_larger", shape: []int{1, 2, 6, 8}, sizes: sizes(4, 11)},
		{mode: "cubic", coord: "half_pixel", cubicA: -0.75, axes: []int64{2, 3}, policy: "not_smaller", shape: []int{1, 2, 6, 8}, sizes: sizes(4, 11)},
	}
	for _, coord := range []string{"half_pixel_symmetric"} {
		for _, mode := range []string{"nearest", "linear", "cubic"} {
			cases = append(cases, resizeCase{mode: mode, coord: coord, nearest: "round_prefer_floor", cubicA: -0.75, shape: []int{1, 2, 5, 7}, scales: f32s(1, 1, 0.6, 1.7)})
		}
	}
	for k, c := range cases {
		x := randomF32(uint64(k+100), c.shape...)
		t.Run(c.String(), func(t *testing.T) {
			nt.CheckNode(t, l, graph.OpResize, c.attrs(), 1, c.args(x)...)
		})
	}
}

// TestResizeNearestCopiesIntegersExactly: nearest is a gather, so integer elements come
// through bit for bit.
func TestResizeNearestCopiesIntegersExactly(t *testing.T) {
	v := make([]int64, 2*3*4)
	for k := range v {
		v[k] = int64(k)*1000003 - 7
	}
	x := tensor.MustFromSlice(tensor.Shape{2, 3, 4}, v)
	c := resizeCase{mode: "nearest", coord: "asymmetric", nearest: "floor", shape: []int{2, 3, 4}, scales: f32s(1, 2.5, 0.5)}
	nt.CheckNode(t, genericLowerer(), graph.OpResize, c.attrs(), 1, c.args(x)...)
}

// TestResizeRefusesWhatItCannotCompile: antialiasing with run-time scales or sizes (its
// taps depend on the scale), run-time scales of a length other than the axes',
// interpolation of integers and a resized symbolic axis are refused with ErrNoKernel and
// the reason.
func TestResizeRefusesWhatItCannotCompile(t *testing.T) {
	l := genericLowerer()
	x := randomF32(1, 1, 2, 4, 4)
	lin := resizeCase{mode: "linear", coord: "half_pixel"}
	crop := resizeCase{mode: "linear", coord: "tf_crop_and_resize"}
	aa := resizeCase{mode: "linear", coord: "half_pixel", antialias: 1}
	ints := tensor.MustFromSlice(tensor.Shape{1, 1, 2, 2}, []int32{1, 2, 3, 4})
	for _, c := range []struct {
		name  string
		attrs *graph.ResizeAttrs
		args  []nt.Arg
		want  string
	}{
		{"antialias with run-time scales", aa.attrs(), []nt.Arg{nt.In(x), nt.None, nt.In(f32s(1, 1, 0.5, 0.5))}, "antialias"},
		{"run-time scales for 2 of 4 axes", lin.attrs(), []nt.Arg{nt.In(x), nt.None, nt.In(f32s(2, 2))}, "static length 4"},
		{"run-time roi for 2 of 4 axes", crop.attrs(), []nt.Arg{nt.In(x), nt.In(f32s(0, 0, 1, 1)), nt.C(f32s(1, 1, 2, 2))}, "roi not of static length 8"},
		{"linear on int32", lin.attrs(), []nt.Arg{nt.In(ints), nt.None, nt.C(f32s(1, 1, 2, 2))}, "linear on i32"},
	} {
		err := nt.LowerErr(t, l, graph.OpResize, c.attrs, 1, c.args...)
		if !errors.Is(err, kernels.ErrNoKernel) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want ErrNoKernel mentioning %q", c.name, err, c.want)
		}
	}
}
