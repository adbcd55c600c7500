package gpu_test

import (
	"strings"
	"testing"

	"github.com/kilnrt/kiln/devices/cuda"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

// resizeCases are Resize nodes as a detector's upsampling path has them (NCHW, scales on
// H and W, a symbolic batch of 1 and 2; nearest as torch exports it, linear with
// pytorch_half_pixel and align_corners), a cubic downscale, a crop with extrapolation,
// a nearest resize by sizes whose coordinates fall on ties, an antialiased cubic
// downscale over axes H and W, and a linear upsample with an Add fused after it.
func resizeCases(t testing.TB) []gcase {
	resize := func(mode, coord, nearest string) *graph.ResizeAttrs {
		a := graph.OpResize.NewAttrs().(*graph.ResizeAttrs)
		a.Mode, a.CoordinateTransformationMode = mode, coord
		if nearest != "" {
			a.NearestMode = nearest
		}
		return a
	}
	floats := func(v ...float32) *tensor.Tensor { return tensor.MustFromSlice(tensor.Shape{len(v)}, v) }
	none := floats()
	scales := func(v ...float32) map[int]*tensor.Tensor { return map[int]*tensor.Tensor{1: none, 2: floats(v...)} }
	sizes := func(v ...int64) map[int]*tensor.Tensor {
		return map[int]*tensor.Tensor{1: none, 2: none, 3: tensor.MustFromSlice(tensor.Shape{len(v)}, v)}
	}
	batch := []map[string]int64{{"n": 1}, {"n": 2}}
	x := ty(t, tensor.Float32, "n", "3", "5", "7")
	in3 := []graph.Type{x, {}, {}}
	in4 := []graph.Type{ty(t, tensor.Float32, "2", "3", "5", "7"), {}, {}, {}} // sizes fix every extent
	crop := resize("linear", "tf_crop_and_resize", "")
	crop.ExtrapolationValue = -2
	antialias := resize("cubic", "half_pixel", "")
	antialias.Antialias, antialias.Axes = 1, []int64{2, 3}
	return []gcase{
		{name: "resize_nearest_asymmetric_x2", op: graph.OpResize, attrs: resize("nearest", "asymmetric", "floor"), args: in3, consts: scales(1, 1, 2, 2), binds: batch},
		{name: "resize_linear_pytorch_half_pixel_x2", op: graph.OpResize, attrs: resize("linear", "pytorch_half_pixel", ""), args: in3, consts: scales(1, 1, 2, 2), binds: batch},
		{name: "resize_linear_align_corners_sizes", op: graph.OpResize, attrs: resize("linear", "align_corners", ""), args: in4, consts: sizes(2, 3, 11, 13),
			binds: []map[string]int64{{}}},
		{name: "resize_cubic_half_pixel_down", op: graph.OpResize, attrs: resize("cubic", "half_pixel", ""), args: in3, consts: scales(1, 1, 0.6, 0.75), binds: batch},
		{name: "resize_crop_extrapolate", op: graph.OpResize, attrs: crop, args: in4,
			consts: map[int]*tensor.Tensor{1: floats(0, 0, 0.2, -0.3, 1, 1, 1.2, 0.9), 2: none, 3: tensor.MustFromSlice(tensor.Shape{4}, []int64{2, 3, 4, 6})},
			binds:  []map[string]int64{{}}},
		{name: "resize_nearest_ties", op: graph.OpResize, attrs: resize("nearest", "half_pixel", "round_prefer_ceil"), args: in4, consts: sizes(2, 3, 37, 9),
			binds: []map[string]int64{{}}},
		{name: "resize_cubic_antialias_axes", op: graph.OpResize, attrs: antialias, args: in3,
			consts: map[int]*tensor.Tensor{1: none, 2: floats(0.4, 0.5)}, binds: batch},
		{name: "resize_linear_add", op: graph.OpResize, attrs: resize("linear", "asymmetric", ""), args: in3, consts: scales(1, 1, 2, 2),
			stages: []stage{{op: graph.OpAdd, at: 0, args: []graph.Type{{}, ty(t, tensor.Float32, "n", "3", "10", "14")}}}, binds: batch},
	}
}

// TestResizeKernelsMatchRefAsASerialLaunch runs the Resize cases under the GPU
// injective rule, emulated on the CPU, against the reference evaluator.
func TestResizeKernelsMatchRefAsASerialLaunch(t *testing.T) {
	cs := resizeCases(t)
	for _, c := range cs {
		if l := lower(t, c, testGPU(t)); !strings.HasPrefix(l.impl.Strategy, "gpu-injective") {
			t.Errorf("%s: strategy %q, want the injective rule", c.name, l.impl.Strategy)
		}
	}
	emulateCases(t, cs)
}

// TestResizeKernelsMatchRefOnOpenCL runs the Resize cases, printed in OpenCL C (no
// double: the coordinates are int64 fixed point), on the OpenCL device.
func TestResizeKernelsMatchRefOnOpenCL(t *testing.T) {
	d := openclOrSkip(t)
	checkCases(t, resizeCases(t), d, openclTarget(t, d), openclLoader(d))
}

// TestResizeKernelsMatchRefOnCUDA runs the Resize cases on a CUDA GPU (skipped without
// one).
func TestResizeKernelsMatchRefOnCUDA(t *testing.T) {
	nv := nvrtcOrSkip(t)
	d := deviceOrSkip(t)
	checkCases(t, resizeCases(t), d, cudaTarget(t, d), cudaLoader(nv, d))
}

// TestResizeKernelsCompileToPTX prints every Resize case in CUDA C and compiles it with
// NVRTC for sm_80.
func TestResizeKernelsCompileToPTX(t *testing.T) {
	nv := nvrtcOrSkip(t)
	for _, c := range resizeCases(t) {
		l := lower(t, c, testGPU(t))
		src := l.cudaSource(t)
		if _, err := nv.Compile(src.Code, c.name+".cu", cuda.CompileOptions{Arch: "sm_80"}); err != nil {
			t.Fatalf("%s: %v\n%s", c.name, err, src.Code)
		}
	}
}
