package gpu_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/graph/passes"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/kernels/gpu"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// TestTextureConvStrategyFollowsTheScopesAnnotateScopesChose lowers both convolutions
// of conv → relu → conv after alter-layout and annotate-scopes with the texture
// policies: the first reads its input from a global blocked buffer (a layout
// transform's) and writes a texture, the second reads textures and writes the plain
// result; each, with its weight prepacked, matches the reference on OpenCL.
func TestTextureConvStrategyFollowsTheScopesAnnotateScopesChose(t *testing.T) {
	d := imagerOrSkip(t)
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
	var convs []*graph.Node
	for _, n := range m.Main.Nodes {
		if n.Op == graph.OpConv {
			convs = append(convs, n)
		}
	}
	st := gpu.TextureConvStrategy()
	x := randomTensor(tensor.Shape{1, 8, 6, 6}, 7)
	wantScopes := [][]string{{"global", "texture", "texture"}, {"texture", "texture", "global"}}
	for k, n := range convs {
		impl, err := st.Build(n, nil, testGPU(t))
		if err != nil {
			t.Fatal(err)
		}
		var scopes []string
		for _, p := range impl.Func.Params {
			scopes = append(scopes, p.Scope)
		}
		if fmt.Sprint(scopes) != fmt.Sprint(wantScopes[k]) {
			t.Errorf("%v: parameter scopes %v, want %v", n, scopes, wantScopes[k])
		}
		w := n.Inputs[1].Const
		packed, err := impl.Params[1].Prepack(w)
		if err != nil {
			t.Fatal(err)
		}
		arg := func(p *loopir.Buffer, width, height int, vals []float64) texArg {
			if p.Scope != loopir.ScopeTexture {
				width = 0
			}
			return texArg{width, height, vals}
		}
		ps := impl.Func.Params
		args := []texArg{arg(ps[0], 6, 2*6, blocked4(x, 1)), arg(ps[1], 8*w.Shape[2]*w.Shape[3], 2, packed.Float64s()), arg(ps[2], 6, 2*6, make([]float64, 8*6*6))}
		out := launchTextures(t, d, impl.Func, args)
		want := convRef(t, x, w, nil, n.Attrs.(*graph.ConvAttrs))
		got := tensor.FromFloat64s(tensor.Float32, want.Shape, out)
		if n.Outputs[0].Type.Block != 0 {
			got = unblocked4(out, want.Shape)
		}
		nt.CloseTensor(t, fmt.Sprintf("%v", n), got, want)
		x = want
		if k == 0 { // the relu between them
			v := x.Float64s()
			for i := range v {
				v[i] = max(v[i], 0)
			}
			x = tensor.FromFloat64s(tensor.Float32, x.Shape, v)
		}
	}
	if len(convs) != 2 {
		t.Fatalf("%d convolutions", len(convs))
	}
}

func TestTextureInjectiveStrategyReadsAndWritesTextures(t *testing.T) {
	d := imagerOrSkip(t)
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
	var relu *graph.Node
	for _, n := range m.Main.Nodes {
		if n.Op == graph.OpRelu {
			relu = n
		}
	}
	shape, err := kernels.PhysicalShape(relu.Inputs[0].Type)
	if err != nil {
		t.Fatal(err)
	}
	phys := make([]loopir.Expr, len(shape))
	for i, s := range shape {
		phys[i] = loopir.Int(s)
	}
	in := []kernels.Input{{T: te.Placeholder("X", tensor.Float32, phys...)}}
	impl, err := gpu.TextureInjectiveStrategy(reg).Build(relu, in, testGPU(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range impl.Func.Params {
		if p.Scope != loopir.ScopeTexture {
			t.Errorf("parameter %s in %s, want a texture", p.Name, p.Scope)
		}
	}
	x := randomTensor(tensor.Shape{1, 8, 6, 6}, 9)
	out := launchTextures(t, d, impl.Func, []texArg{{6, 12, blocked4(x, 1)}, {6, 12, make([]float64, 8*6*6)}})
	v := x.Float64s()
	for i := range v {
		v[i] = max(v[i], 0)
	}
	nt.CloseTensor(t, "relu", unblocked4(out, x.Shape), tensor.FromFloat64s(tensor.Float32, x.Shape, v))
	if _, err := gpu.TextureInjectiveStrategy(reg).Build(m.Main.Nodes[0], nil, testGPU(t)); !errors.Is(err, kernels.ErrNotApplicable) {
		t.Errorf("%v: %v, want ErrNotApplicable", m.Main.Nodes[0], err)
	}
}
