package compiler

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/graph/passes"
	"github.com/kilnrt/kiln/internal/gputest"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// textureNet is a small network with every texture kernel: a first convolution over 3
// plain channels with bias and Relu, a max pool, a depthwise convolution with Clip, a
// 1×1 convolution with a residual Add, a channel concatenation, an average pool and a
// global average pool (the result).
func textureNet(t *testing.T) *graph.Module {
	t.Helper()
	b := graph.NewBuilder("main")
	must := func(v *graph.Value, err error) *graph.Value {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	scalar := func(name string, v float64) *graph.Value {
		return b.Const(name, tensor.FromFloat64s(tensor.Float32, tensor.Shape{}, []float64{v}))
	}
	x := b.Param("x", graph.TensorType(tensor.Float32, graph.StaticShape(1, 3, 16, 16)...))
	c1 := must(b.Op1(graph.OpConv, &graph.ConvAttrs{Group: 1, Pads: []int64{1, 1, 1, 1}}, x, b.Const("w1", f32(11, 8, 3, 3, 3)), b.Const("b1", f32(12, 8))))
	r1 := must(b.Op1(graph.OpRelu, nil, c1))
	p1 := must(b.Op1(graph.OpMaxPool, &graph.PoolAttrs{KernelShape: []int64{2, 2}, Strides: []int64{2, 2}}, r1))
	d1 := must(b.Op1(graph.OpConv, &graph.ConvAttrs{Group: 8, Pads: []int64{1, 1, 1, 1}}, p1, b.Const("wd", f32(13, 8, 1, 3, 3))))
	cl := must(b.Op1(graph.OpClip, nil, d1, scalar("lo", 0), scalar("hi", 0.5)))
	c2 := must(b.Op1(graph.OpConv, &graph.ConvAttrs{Group: 1}, cl, b.Const("w2", f32(14, 8, 8, 1, 1))))
	a2 := must(b.Op1(graph.OpAdd, nil, c2, p1))
	c3 := must(b.Op1(graph.OpConv, &graph.ConvAttrs{Group: 1}, a2, b.Const("w3", f32(15, 4, 8, 1, 1))))
	cat := must(b.Op1(graph.OpConcat, &graph.AxisAttrs{Axis: 1}, a2, c3))
	ap := must(b.Op1(graph.OpAveragePool, &graph.PoolAttrs{KernelShape: []int64{3, 3}, Strides: []int64{1, 1}, Pads: []int64{1, 1, 1, 1}}, cat))
	g := must(b.Op1(graph.OpGlobalAveragePool, nil, ap))
	m, err := b.Module(g)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestOpenCLTexturesRunEveryTextureKernel: on an OpenCL device with images (PoCL in
// CI) the network's kernels are the texture kernels, most of the bytes their outputs
// hold are in images, and the result matches the reference evaluator; with textures
// off no tensor is in an image and the result matches too.
func TestOpenCLTexturesRunEveryTextureKernel(t *testing.T) {
	gpu := gputest.OpenCL(t)
	tg, err := gpu.Target()
	if err != nil {
		t.Fatal(err)
	}
	if tg.GPU.ImageMaxWidth <= 0 {
		t.Skipf("%s has no images", gpu.Info().Name)
	}
	in := map[string]*tensor.Tensor{"x": f32(7, 1, 3, 16, 16)}
	res := checkCompiledFor(t, textureNet(t), in, tg, Options{GPU: gpu})
	for _, s := range []string{"gpu-texture-conv+epilogue", "gpu-texture-pool", "gpu-texture-concat"} {
		if res.Stats.Strategies[s] == 0 {
			t.Errorf("no kernel by %s: %v", s, res.Stats.Strategies)
		}
	}
	var all int64
	for _, p := range res.Stats.Tensors {
		all += p.Bytes
	}
	if res.Stats.TextureBytes*10 < all*8 {
		t.Errorf("%d of %d bytes in textures, want at least 80%%: %+v", res.Stats.TextureBytes, all, res.Stats.Tensors)
	}

	res = checkCompiledFor(t, textureNet(t), in, tg, Options{GPU: gpu, Recipe: engine.Recipe{NoTextures: true}})
	if res.Stats.TextureBytes != 0 {
		t.Errorf("textures off: %d bytes in textures: %+v", res.Stats.TextureBytes, res.Stats.Tensors)
	}
}

// TestOpenCLTextureLimitFallsBackToBuffers: with a texture limit of 16 texels the
// images taller than that stay in buffers, each saying that no packing fits, and the
// result still matches the reference.
func TestOpenCLTextureLimitFallsBackToBuffers(t *testing.T) {
	gpu := gputest.OpenCL(t)
	tg, err := gpu.Target()
	if err != nil {
		t.Fatal(err)
	}
	if tg.GPU.ImageMaxWidth <= 0 {
		t.Skipf("%s has no images", gpu.Info().Name)
	}
	in := map[string]*tensor.Tensor{"x": f32(8, 1, 3, 16, 16)}
	res := checkCompiledFor(t, textureNet(t), in, tg, Options{GPU: gpu, Recipe: engine.Recipe{TextureLimit: 16}})
	fell := 0
	for _, p := range res.Stats.Tensors {
		if p.Image != "" {
			var w, h int64
			if _, err := fmt.Sscanf(p.Image, "%dx%d", &w, &h); err != nil || w > 16 || h > 16 {
				t.Errorf("%s in a %s image over a limit of 16 texels", p.Name, p.Image)
			}
		}
		if strings.Contains(p.Why, "no packing fits the device's images") && strings.Contains(p.Why, "the limit is 16x16") {
			fell++
		}
	}
	if fell == 0 {
		t.Errorf("no tensor fell back to a buffer under a limit of 16 texels: %+v", res.Stats.Tensors)
	}
}

// TestTextureChoiceFollowsTheDeviceLimits: the same network on devices whose queried
// image limits differ (facts injected into the target) puts different tensors in
// textures: on a device whose images are at most 8 texels high every image is at most
// 8 high, on one at most 8 wide every image at most 8 wide, and some tensor is in a
// texture on one and in a buffer on the other.
func TestTextureChoiceFollowsTheDeviceLimits(t *testing.T) {
	decide := func(w, h int) map[string]string {
		tg, err := target.GPU(target.OpenCL, "test", target.GPUFacts{MaxWorkGroup: 256, ImageMaxWidth: w, ImageMaxHeight: h})
		if err != nil {
			t.Fatal(err)
		}
		be := OpenCLBackend()
		be.Check = nil
		be.Build = func(*BuildJob) ([]byte, error) { return nil, errors.New("no device in this test") }
		table := DefaultBackends()
		table[target.OpenCL] = be
		got := map[string]string{}
		_, err = Build(textureNet(t), tg, Options{Backends: table, CPU: openCPU(t),
			Scoped: func(d passes.ScopeDecision) { got[d.Value.Name] = d.String() }})
		if err == nil || !strings.Contains(err.Error(), "no device in this test") {
			t.Fatalf("err = %v, want the test's build refusal after the passes", err)
		}
		if len(got) == 0 {
			t.Fatal("annotate-scopes decided nothing")
		}
		return got
	}
	wide, tall := decide(1<<14, 8), decide(8, 1<<14)
	differ := 0
	for name, d := range wide {
		var w, h int64
		if _, err := fmt.Sscanf(d, "texture %dx%d", &w, &h); err == nil && h > 8 {
			t.Errorf("%s: %s on a device 8 texels high", name, d)
		}
		if _, err := fmt.Sscanf(tall[name], "texture %dx%d", &w, &h); err == nil && w > 8 {
			t.Errorf("%s: %s on a device 8 texels wide", name, tall[name])
		}
		if strings.HasPrefix(d, "texture") != strings.HasPrefix(tall[name], "texture") {
			differ++
		}
	}
	if differ == 0 {
		t.Errorf("the same choices on both devices:\n%v\n%v", wide, tall)
	}
}
