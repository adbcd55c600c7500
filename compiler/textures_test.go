package compiler

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/graph/passes"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// textureKind is a target kind that only the test's backend table knows.
const textureKind target.Kind = 101

// anyTexture: every node writes and reads activations in every packing.
func anyTexture(t target.Target, _ *kernels.Registry) *passes.ScopePolicy {
	return TextureScopes(t,
		func(n *graph.Node, p graph.Packing) bool { return p != graph.PackOIHW4o },
		func(n *graph.Node, i int, p graph.Packing) bool { return p != graph.PackOIHW4o })
}

// TestTextureScopesTakeTheDeviceImageLimits: the policy's limits are the device's
// image2d limits; a device without images gets no policy.
func TestTextureScopesTakeTheDeviceImageLimits(t *testing.T) {
	cl, err := target.GPU(target.OpenCL, "test", target.GPUFacts{MaxWorkGroup: 256, ImageMaxWidth: 16384, ImageMaxHeight: 8192})
	if err != nil {
		t.Fatal(err)
	}
	pol := anyTexture(cl, nil)
	if pol == nil || pol.MaxWidth != 16384 || pol.MaxHeight != 8192 {
		t.Errorf("policy %+v, want images up to 16384x8192", pol)
	}
	cl.GPU.ImageMaxWidth, cl.GPU.ImageMaxHeight = 0, 0
	if pol := anyTexture(cl, nil); pol != nil {
		t.Errorf("a device without images has a scope policy %+v", pol)
	}
	if b := OpenCLBackend(); b.Textures == nil || !b.allows(graph.ScopeTexture) {
		t.Errorf("the OpenCL backend has no texture path: %v, scopes %v", b.Textures, b.Scopes)
	}
	if s := (engine.Recipe{TextureLimit: 64}).String(); s != "O3 layout=blocked texture-limit=64" {
		t.Errorf("a recipe with a texture limit prints %q", s)
	}
}

// blockedRelus: x → NCHW4c → Relu → Relu → NCHW, a 1x8x4x6 tensor (an NCHW4c image of
// 6x8 texels, an NHWC4c one of 12x4).
func blockedRelus(t *testing.T) *graph.Module {
	t.Helper()
	b := graph.NewBuilder("main")
	x := b.Param("x", graph.TensorType(tensor.Float32, graph.StaticShape(1, 8, 4, 6)...))
	blk, err := b.Op1(graph.OpLayoutTransform, &graph.LayoutTransformAttrs{Block: 4}, x)
	if err != nil {
		t.Fatal(err)
	}
	r1, _ := b.Op1(graph.OpRelu, nil, blk)
	r2, _ := b.Op1(graph.OpRelu, nil, r1)
	y, err := b.Op1(graph.OpLayoutTransform, &graph.LayoutTransformAttrs{Block: 0}, r2)
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.Module(y)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestTextureLimitKeepsLargeTensorsGlobal: a backend whose policy puts tensors in
// textures that it does not allow fails the compile at the tensor in a texture; the
// recipe's texture limit below the images keeps every tensor global, says so per
// value, and the model compiles and matches the reference.
func TestTextureLimitKeepsLargeTensorsGlobal(t *testing.T) {
	be := CPUBackend()
	be.Name, be.Layout, be.Textures = "cpu-textures", nil, &Textures{Scopes: anyTexture}
	table := DefaultBackends()
	table[textureKind] = be
	tg := target.Host()
	tg.Kind, tg.GPU = textureKind, target.GPUFacts{ImageMaxWidth: 16384, ImageMaxHeight: 16384}
	pipeline := passes.Pipeline{{Name: "annotate-scopes", Run: passes.AnnotateScopes, Required: true}}

	var decisions []string
	scoped := func(d passes.ScopeDecision) { decisions = append(decisions, fmt.Sprintf("%s: %v", d.Value.Name, d)) }
	dev := openCPU(t)
	_, err := Build(blockedRelus(t), tg, Options{Backends: table, Passes: pipeline, Scoped: scoped, CPU: dev})
	if !errors.Is(err, ErrCompile) || !strings.Contains(err.Error(), "is in texture memory; the CPU keeps every tensor in global memory") {
		t.Fatalf("err = %v, want the compile refused at a tensor in a texture", err)
	}
	if len(decisions) == 0 || !strings.Contains(decisions[0], "texture 6x8") {
		t.Errorf("decisions %q, want the first in a 6x8 texture", decisions)
	}

	decisions = nil
	in := map[string]*tensor.Tensor{"x": f32(7, 1, 8, 4, 6)}
	checkCompiledFor(t, blockedRelus(t), in, tg, Options{Backends: table, Passes: pipeline, Scoped: scoped,
		Recipe: engine.Recipe{TextureLimit: 4}})
	want := "global: no packing fits the device's images (texture 6x8, texture-nhwc 12x4; the limit is 4x4)"
	if len(decisions) != 4 || !strings.HasSuffix(decisions[3], "not a 4-D tensor in blocks of 4 channels") {
		t.Fatalf("decisions under a limit of 4 texels:\n%s\nwant 4, the last the plain result", strings.Join(decisions, "\n"))
	}
	for _, d := range decisions[:3] {
		if !strings.HasSuffix(d, want) {
			t.Errorf("decision under a limit of 4 texels %q, want it to end %q", d, want)
		}
	}

	_, err = Build(blockedRelus(t), tg, Options{Backends: table, Passes: pipeline, CPU: dev, Recipe: engine.Recipe{TextureLimit: -1}})
	if !errors.Is(err, ErrCompile) || !strings.Contains(err.Error(), "texture limit -1") {
		t.Errorf("err = %v, want a negative texture limit refused", err)
	}
}
