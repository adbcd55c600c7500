package gpu_test

import (
	"strings"
	"testing"

	"github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/devices/cuda"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/kernels/gpu"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// conv2D is a 2-D Conv's attributes: kernel kh×kw, pads (top, left, bottom, right),
// strides and dilations per axis.
func conv2D(kh, kw int64, pads [4]int64, sh, sw, dh, dw int64) *graph.ConvAttrs {
	a := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
	a.KernelShape, a.Pads, a.Strides, a.Dilations, a.Group = []int64{kh, kw}, pads[:], []int64{sh, sw}, []int64{dh, dw}, 1
	return a
}

// convGEMMCases are the convolutions of resnet18 and resnet50 (the 7×7 stride-2 stem,
// 3×3 and 1×1 at strides 1 and 2, a late layer's 512 channels over 7×7, its
// reduction shortened to 16 input channels to stay within the comparison's tolerance
// for float32 sums in another order; the zoo test runs the real ones) and
// mobilenet_v2's pointwise ones, at fewer channels where the geometry is the point,
// odd sizes (3 channels over 13×13 into 10, asymmetric pads, a dilation, a stride per
// axis, SAME_UPPER auto padding over a batch of two), with and without a bias, and each epilogue: Relu, Clip, the Add of a residual,
// a per-channel scale broadcast over the pixels; a symbolic batch where it applies.
func convGEMMCases(t testing.TB) []gcase {
	cases := convGEMMCaseList(t)
	for i := range cases {
		cases[i].first = func(reg *kernels.Registry) []kernels.Strategy { return []kernels.Strategy{gpu.ConvGEMMStrategy(reg)} }
	}
	return cases
}

func convGEMMCaseList(t testing.TB) []gcase {
	f32 := func(dims ...string) graph.Type { return ty(t, tensor.Float32, dims...) }
	one := []map[string]int64{{}}
	batch := []map[string]int64{{"n": 1}, {"n": 2}}
	relu := stage{op: graph.OpRelu, at: 0, args: []graph.Type{{}}}
	p := func(v int64) [4]int64 { return [4]int64{v, v, v, v} }
	same := conv2D(3, 3, p(0), 2, 2, 1, 1)
	same.Pads, same.AutoPad = nil, "SAME_UPPER"
	return []gcase{
		{name: "stem_7x7_stride2_bias_relu", op: graph.OpConv, attrs: conv2D(7, 7, p(3), 2, 2, 1, 1),
			args: []graph.Type{f32("n", "3", "30", "30"), f32("16", "3", "7", "7"), f32("16")}, stages: []stage{relu}, binds: batch},
		{name: "resnet_3x3_add_relu", op: graph.OpConv, attrs: conv2D(3, 3, p(1), 1, 1, 1, 1),
			args:   []graph.Type{f32("n", "16", "14", "14"), f32("40", "16", "3", "3"), f32("40")},
			stages: []stage{{op: graph.OpAdd, at: 0, args: []graph.Type{{}, f32("n", "40", "14", "14")}}, relu}, binds: batch},
		{name: "resnet_3x3_stride2_relu", op: graph.OpConv, attrs: conv2D(3, 3, p(1), 2, 2, 1, 1),
			args: []graph.Type{f32("1", "24", "15", "15"), f32("48", "24", "3", "3")}, stages: []stage{relu}, binds: one},
		{name: "late_layer_512x7x7_3x3_add_relu", op: graph.OpConv, attrs: conv2D(3, 3, p(1), 1, 1, 1, 1),
			args:   []graph.Type{f32("1", "16", "7", "7"), f32("512", "16", "3", "3"), f32("512")},
			stages: []stage{{op: graph.OpAdd, at: 0, args: []graph.Type{{}, f32("1", "512", "7", "7")}}, relu}, binds: one},
		{name: "resnet_1x1_bias", op: graph.OpConv, attrs: conv2D(1, 1, p(0), 1, 1, 1, 1),
			args: []graph.Type{f32("n", "64", "7", "7"), f32("96", "64", "1", "1"), f32("96")}, binds: batch},
		{name: "resnet_1x1_stride2_downsample", op: graph.OpConv, attrs: conv2D(1, 1, p(0), 2, 2, 1, 1),
			args: []graph.Type{f32("1", "32", "13", "13"), f32("64", "32", "1", "1")}, binds: one},
		{name: "mobilenet_pointwise_clip", op: graph.OpConv, attrs: conv2D(1, 1, p(0), 1, 1, 1, 1),
			args:   []graph.Type{f32("1", "24", "9", "9"), f32("72", "24", "1", "1"), f32("72")},
			stages: []stage{{op: graph.OpClip, at: 0, args: []graph.Type{{}, f32(), f32()}}}, binds: one},
		{name: "odd_c3_13x13_to_10_asymmetric_pads", op: graph.OpConv, attrs: conv2D(3, 3, [4]int64{1, 0, 2, 1}, 2, 1, 1, 1),
			args: []graph.Type{f32("n", "3", "13", "13"), f32("10", "3", "3", "3"), f32("10")}, binds: batch},
		{name: "odd_dilated_channel_scale", op: graph.OpConv, attrs: conv2D(3, 2, [4]int64{2, 1, 0, 1}, 1, 2, 2, 1),
			args:   []graph.Type{f32("1", "5", "13", "11"), f32("10", "5", "3", "2")},
			stages: []stage{{op: graph.OpMul, at: 0, args: []graph.Type{{}, f32("10", "1", "1")}}}, binds: one},
		{name: "same_upper_stride2_batch2", op: graph.OpConv, attrs: same,
			args: []graph.Type{f32("2", "4", "10", "9"), f32("6", "4", "3", "3"), f32("6")}, binds: one},
	}
}

// lowerConvGEMM lowers a case and checks that the implicit GEMM rule took it.
func lowerConvGEMM(t *testing.T, c gcase, tg target.Target) *lowered {
	t.Helper()
	l := lower(t, c, tg)
	if !strings.HasPrefix(l.impl.Strategy, "gpu-conv-gemm") {
		t.Fatalf("%s: strategy %s, want gpu-conv-gemm", c.name, l.impl.Strategy)
	}
	if err := loopir.Verify(l.f); err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	return l
}

// TestConvGEMMKernelsMatchRefInLockStep runs every case's launched kernel on the CPU,
// each block's threads in lock-step phases between the barriers, in order and in
// reverse order, against the reference evaluator.
func TestConvGEMMKernelsMatchRefInLockStep(t *testing.T) {
	d, err := cpu.Open(cpu.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	tg := testGPU(t)
	for _, c := range convGEMMCases(t) {
		l := lowerConvGEMM(t, c, tg)
		for _, emulated := range []*loopir.PrimFunc{serialLaunch(l.f), threadsReversed(l.f)} {
			mod, k := buildEmulated(t, d, emulated)
			for i, env := range c.binds {
				l.run(t, d, k, c.name, env, uint64(i+1))
			}
			if err := mod.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestConvGEMMKernelsCompileToPTX prints every case in CUDA C and compiles it with
// NVRTC for sm_80.
func TestConvGEMMKernelsCompileToPTX(t *testing.T) {
	nv := nvrtcOrSkip(t)
	tg := testGPU(t)
	for _, c := range convGEMMCases(t) {
		l := lowerConvGEMM(t, c, tg)
		src := l.cudaSource(t)
		ptx, err := nv.Compile(src.Code, c.name+".cu", cuda.CompileOptions{Arch: "sm_80"})
		if err != nil {
			t.Fatalf("%s: %v\n%s", c.name, err, src.Code)
		}
		if !strings.Contains(string(ptx), ".entry "+src.Kernels[0]) || !strings.Contains(string(ptx), ".shared") || !strings.Contains(string(ptx), "bar.sync") {
			t.Errorf("%s: the PTX lacks the entry, shared memory or a barrier", c.name)
		}
	}
}

// TestConvGEMMKernelsMatchRefOnOpenCL runs every case, printed in OpenCL C, on the
// OpenCL device (PoCL here).
func TestConvGEMMKernelsMatchRefOnOpenCL(t *testing.T) {
	d := openclOrSkip(t)
	checkCases(t, convGEMMCases(t), d, openclTarget(t, d), openclLoader(d))
}

// TestConvGEMMKernelsMatchRefOnCUDA runs every case on a CUDA GPU (skipped without one).
func TestConvGEMMKernelsMatchRefOnCUDA(t *testing.T) {
	nv := nvrtcOrSkip(t)
	d := deviceOrSkip(t)
	checkCases(t, convGEMMCases(t), d, cudaTarget(t, d), cudaLoader(nv, d))
}

// TestConvGEMMGathersItsTilesInSharedMemory: the kernel copies both operand tiles into
// shared memory under the k steps (the im2col tile computed from the input in the
// copy, its padding taps guarded), with two barriers, and the output's pixels are the
// columns (16×16 tiles: 40 channels over 196 pixels fill the compute units no better).
func TestConvGEMMGathersItsTilesInSharedMemory(t *testing.T) {
	l := lowerConvGEMM(t, convGEMMCases(t)[1], testGPU(t)) // 16 → 40 channels over 14×14
	if got, want := l.launch.String(), "grid(13, 3, n) block(8, 8, 1)"; got != want {
		t.Errorf("launch %s, want %s", got, want)
	}
	text := loopir.Print(l.f)
	for _, want := range []string{"_mk_shared", "conv_im2col_shared", "select("} {
		if !strings.Contains(text, want) {
			t.Errorf("the kernel lacks %s:\n%s", want, text)
		}
	}
	if n := strings.Count(text, "barrier"); n != 2 {
		t.Errorf("%d barriers, want 2:\n%s", n, text)
	}
}

// TestConvTileFillsTheComputeUnits: a layer with many output pixels takes 64×64 tiles;
// one with few (512 channels over 7×7) takes smaller tiles so that its blocks cover
// the compute units; a small target's limits are kept.
func TestConvTileFillsTheComputeUnits(t *testing.T) {
	tg := testGPU(t) // 108 compute units
	for _, c := range []struct {
		m, p int64
		n    loopir.Expr
		cu   int
		wg   int
		want string
	}{
		{64, 112 * 112, loopir.Int(1), 108, 1024, "64x64x16/16x16"},
		{512, 49, loopir.Int(1), 108, 1024, "16x16x16/8x8"},
		{256, 196, loopir.Int(1), 56, 1024, "32x32x16/16x16"},
		{512, 49, loopir.Int(8), 108, 1024, "32x32x16/16x16"},
		{512, 49, loopir.NewVar("n"), 4, 1024, "64x64x16/16x16"},
		{64, 112 * 112, loopir.Int(1), 108, 128, "16x16x16/8x8"},
	} {
		tg.GPU.ComputeUnits, tg.GPU.MaxWorkGroup = c.cu, c.wg
		tile, err := gpu.ChooseConvTile(tg, c.m, c.p, c.n)
		if err != nil || tile.String() != c.want {
			t.Errorf("%d×%d pixels (batch %s) on %d units of %d threads: tile %v (%v), want %s", c.m, c.p, loopir.ExprString(c.n), c.cu, c.wg, tile, err, c.want)
		}
	}
}

// TestConvGEMMLeavesOtherConvolutionsToTheReductionRule: grouped and depthwise
// convolutions, a 1-D one and integer ones are refused by the implicit GEMM and
// lowered by gpu-reduce.
func TestConvGEMMLeavesOtherConvolutionsToTheReductionRule(t *testing.T) {
	f32 := func(dims ...string) graph.Type { return ty(t, tensor.Float32, dims...) }
	conv1D := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
	conv1D.KernelShape = []int64{3}
	grouped := conv2D(3, 3, [4]int64{1, 1, 1, 1}, 1, 1, 1, 1)
	grouped.Group = 2
	depthwise := conv2D(3, 3, [4]int64{1, 1, 1, 1}, 1, 1, 1, 1)
	depthwise.Group = 8
	one := []map[string]int64{{}}
	for _, c := range []gcase{
		{name: "grouped", op: graph.OpConv, attrs: grouped, args: []graph.Type{f32("1", "6", "9", "9"), f32("4", "3", "3", "3")}, binds: one},
		{name: "depthwise", op: graph.OpConv, attrs: depthwise, args: []graph.Type{f32("1", "8", "9", "9"), f32("8", "1", "3", "3")}, binds: one},
		{name: "conv1d", op: graph.OpConv, attrs: conv1D, args: []graph.Type{f32("1", "4", "20"), f32("5", "4", "3")}, binds: one},
	} {
		c.first = func(reg *kernels.Registry) []kernels.Strategy { return []kernels.Strategy{gpu.ConvGEMMStrategy(reg)} }
		l := lower(t, c, testGPU(t))
		if !strings.HasPrefix(l.impl.Strategy, "gpu-reduce") && l.impl.Strategy != "gpu-injective" {
			t.Errorf("%s: strategy %s, want gpu-reduce", c.name, l.impl.Strategy)
		}
	}
}
