package gpu_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/graph/passes"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/kernels/gpu"
	"github.com/kilnrt/kiln/tensor"
)

// convReluConv is x[1, c, 6, 6] → Conv(m, 3×3, pad 1) → Relu → Conv(m, 1×1) → result.
func convReluConv(t *testing.T, c, m int) *graph.Module {
	t.Helper()
	b := graph.NewBuilder("main")
	x := b.Param("x", graph.TensorType(tensor.Float32, graph.Const(1), graph.Const(int64(c)), graph.Const(6), graph.Const(6)))
	w1 := b.Const("w1", randomTensor(tensor.Shape{m, c, 3, 3}, 1))
	w2 := b.Const("w2", randomTensor(tensor.Shape{m, m, 1, 1}, 2))
	y, err := b.Node(graph.OpConv, &graph.ConvAttrs{Group: 1, Pads: []int64{1, 1, 1, 1}}, 1, x, w1)
	if err != nil {
		t.Fatal(err)
	}
	if y, err = b.Node(graph.OpRelu, nil, 1, y[0]); err != nil {
		t.Fatal(err)
	}
	if y, err = b.Node(graph.OpConv, &graph.ConvAttrs{Group: 1}, 1, y[0], w2); err != nil {
		t.Fatal(err)
	}
	mod, err := b.Module(y[0])
	if err != nil {
		t.Fatal(err)
	}
	return mod
}

func TestTextureLayoutPolicyKeepsBlocksOfFourBetweenConvolutions(t *testing.T) {
	m := convReluConv(t, 8, 8)
	if err := passes.AlterLayout(&passes.Context{Layout: gpu.TextureLayoutPolicy(kernels.Default())}, m); err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, n := range m.Main.Nodes {
		ops = append(ops, n.Op.String())
		if n.Op == graph.OpLayoutTransform {
			continue
		}
		if b := n.Inputs[0].Type.Block; b != 4 {
			t.Errorf("%v reads block %d, want 4:\n%s", n, b, graph.Print(m))
		}
	}
	// one transform into the first convolution; the last stores its result plain (no
	// reader wants it blocked)
	if got := strings.Join(ops, " "); got != "LayoutTransform Conv Relu Conv" {
		t.Errorf("nodes %s, want one transform before the convolutions:\n%s", got, graph.Print(m))
	}
}

// TestTextureLayoutPolicyReadsPlainInputsAndLeavesWhatItCannotTexture: a first
// convolution over 3 channels reads its plain input (PlainX) and writes blocks of 4;
// one with 6 output channels (not whole texels) stays plain.
func TestTextureLayoutPolicyReadsPlainInputsAndLeavesWhatItCannotTexture(t *testing.T) {
	m := convReluConv(t, 3, 8) // 3 input channels: not a whole texel
	if err := passes.AlterLayout(&passes.Context{Layout: gpu.TextureLayoutPolicy(kernels.Default())}, m); err != nil {
		t.Fatal(err)
	}
	n := m.Main.Nodes[0]
	if n.Op != graph.OpConv || n.Inputs[0].Type.Block != 0 || n.Outputs[0].Type.Block != 4 {
		t.Errorf("the first convolution does not read plain and write blocks of 4:\n%s", graph.Print(m))
	}
	if c, err := gpu.TexConv2DOf(n); err != nil || !c.PlainX {
		t.Errorf("TexConv2DOf = %+v, %v; want a convolution over a plain input", c, err)
	}

	m = convReluConv(t, 8, 6) // 6 output channels
	if err := passes.AlterLayout(&passes.Context{Layout: gpu.TextureLayoutPolicy(kernels.Default())}, m); err != nil {
		t.Fatal(err)
	}
	for _, n := range m.Main.Nodes {
		if n.Op == graph.OpConv && n.Outputs[0].Type.Block != 0 {
			t.Errorf("%v writes blocks of %d:\n%s", n, n.Outputs[0].Type.Block, graph.Print(m))
		}
		if _, err := gpu.TexConv2DOf(n); n.Op == graph.OpConv && (!errors.Is(err, gpu.ErrNotTexture) || !strings.Contains(err.Error(), "multiples of 4")) {
			t.Errorf("TexConv2DOf(%v) = %v, want ErrNotTexture naming the channels", n, err)
		}
	}
}

func TestTextureScopesPutConvolutionChainsInTextures(t *testing.T) {
	m := convReluConv(t, 8, 8)
	reg := kernels.Default()
	ctx := &passes.Context{Layout: gpu.TextureLayoutPolicy(reg), Scopes: &passes.ScopePolicy{
		Writes: gpu.TextureWrites(reg), Reads: gpu.TextureReads(reg), MaxWidth: 1 << 14, MaxHeight: 1 << 14}}
	if err := passes.AlterLayout(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := passes.AnnotateScopes(ctx, m); err != nil {
		t.Fatal(err)
	}
	scopes := map[string]graph.Type{}
	for _, n := range m.Main.Nodes {
		scopes[n.Op.String()+"/"+n.Outputs[0].Name] = n.Outputs[0].Type
	}
	for _, c := range m.Main.Consts {
		scopes["const/"+c.Name] = c.Type
	}
	texture := func(key string, p graph.Packing) {
		t.Helper()
		if ty, ok := scopes[key]; !ok || ty.Scope != graph.ScopeTexture || ty.Packing != p {
			t.Errorf("%s is %v, want a %v texture:\n%s", key, ty, p, graph.Print(m))
		}
	}
	texture("Conv/t1", graph.PackNCHW4c)
	texture("Relu/t2", graph.PackNCHW4c)
	texture("const/w1", graph.PackOIHW4o)
	texture("const/w2", graph.PackOIHW4o)
	if ty := scopes["Conv/t3"]; ty.Scope != graph.ScopeGlobal {
		t.Errorf("the result is %v, want global", ty)
	}
	w := gpu.TextureWrites(reg)
	for _, n := range m.Main.Nodes {
		if n.Op == graph.OpConv && w(n, graph.PackNHWC4c) {
			t.Errorf("%v writes an NHWC4c texture, which no texture kernel does", n)
		}
	}
}
