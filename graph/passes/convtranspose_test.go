package passes_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/graph/passes"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/tensor"
)

// TestNonOverlappingConvTransposeBecomesConvAndDepthToSpace: a ConvTranspose whose
// stride equals its square kernel becomes a 1×1 Conv and a CRD DepthToSpace (a Conv
// alone for a 1×1 kernel) computing the same values as the reference; overlapping,
// padded, grouped or rectangular windows stay ConvTransposes.
func TestNonOverlappingConvTransposeBecomesConvAndDepthToSpace(t *testing.T) {
	cases := []struct {
		name          string
		c, m, kh, kw  int
		stride, pads  []int64
		group         int64
		bias          bool
		wantRewritten bool
	}{
		{"k2 s2 with bias", 5, 3, 2, 2, []int64{2, 2}, nil, 1, true, true},
		{"k3 s3 without bias", 4, 2, 3, 3, []int64{3, 3}, []int64{0, 0, 0, 0}, 1, false, true},
		{"k1 s1", 3, 6, 1, 1, nil, nil, 1, true, true},
		{"k3 s2 overlaps", 4, 2, 3, 3, []int64{2, 2}, nil, 1, true, false},
		{"k2 s2 padded", 4, 2, 2, 2, []int64{2, 2}, []int64{1, 1, 1, 1}, 1, false, false},
		{"k2 s2 two groups", 4, 2, 2, 2, []int64{2, 2}, nil, 2, false, false},
		{"k2x1 s2x1 rectangular", 4, 2, 2, 1, []int64{2, 1}, nil, 1, false, false},
	}
	for i, c := range cases {
		b := graph.NewBuilder("main")
		x := b.Param("x", graph.TensorType(tensor.Float32, graph.StaticShape(2, int64(c.c), 3, 4)...))
		a := graph.OpConvTranspose.NewAttrs().(*graph.ConvTransposeAttrs)
		a.Strides, a.Pads, a.Group = c.stride, c.pads, c.group
		inputs := []*graph.Value{x, b.Const("w", rnd(uint64(10+i), c.c, c.m/int(c.group), c.kh, c.kw))}
		if c.bias {
			inputs = append(inputs, b.Const("b", rnd(uint64(20+i), c.m)))
		}
		y, err := b.Op1(graph.OpConvTranspose, a, inputs...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		r, _ := b.Op1(graph.OpRelu, nil, y)
		m, err := b.Module(r)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		in := map[string]ref.Value{"x": rnd(uint64(30+i), 2, c.c, 3, 4)}
		want, err := ref.Eval(m, in, ref.Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		p := passes.Pipeline{pass(t, "convtranspose-to-conv"), pass(t, "dce")}
		if err := p.Run(&passes.Context{Check: true}, m); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		text := graph.PrintFunc(m.Main)
		if rewritten := !strings.Contains(text, "ConvTranspose"); rewritten != c.wantRewritten {
			t.Fatalf("%s: rewritten = %v, want %v:\n%s", c.name, rewritten, c.wantRewritten, text)
		}
		if c.wantRewritten {
			wantOps := "Conv"
			if c.kh > 1 {
				wantOps = "Conv DepthToSpace"
			}
			if got := opNames(m.Main); got != wantOps+" Relu" {
				t.Fatalf("%s: ops %q, want %q:\n%s", c.name, got, wantOps+" Relu", text)
			}
		}
		got, err := ref.Eval(m, in, ref.Options{})
		if err != nil {
			t.Fatalf("%s: %v\n%s", c.name, err, text)
		}
		sameAfterRewrite(t, c.name, got[0], want[0])
	}
}

// sameAfterRewrite fails the test unless got (after a rewrite) has want's (before it)
// shape and every element within 1e-5 of it.
func sameAfterRewrite(t *testing.T, name string, got, want ref.Value) {
	t.Helper()
	g, w := got.(*tensor.Tensor), want.(*tensor.Tensor)
	if fmt.Sprint(g.Shape) != fmt.Sprint(w.Shape) {
		t.Fatalf("%s: shape %v after the rewrite, %v before", name, g.Shape, w.Shape)
	}
	gv, wv := g.Float64s(), w.Float64s()
	for j := range wv {
		if d := gv[j] - wv[j]; d > 1e-5 || d < -1e-5 {
			t.Fatalf("%s: element %d: %v after the rewrite, %v before", name, j, gv[j], wv[j])
		}
	}
}

// opNames lists f's node ops in order, space-separated.
func opNames(f *graph.Func) string {
	var ops []string
	for _, n := range f.Nodes {
		ops = append(ops, n.Op.String())
	}
	return strings.Join(ops, " ")
}
