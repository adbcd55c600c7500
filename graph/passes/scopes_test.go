package passes_test

import (
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/graph/passes"
)

// texturePolicy: Conv and Relu read and write textures, nothing else does.
var texturePolicy = &passes.ScopePolicy{
	Writes: func(n *graph.Node) bool { return n.Op == graph.OpConv || n.Op == graph.OpRelu },
	Reads: func(n *graph.Node, i int) bool {
		return n.Op == graph.OpRelu || n.Op == graph.OpConv && i == 0
	},
	Fits: func(t graph.Type) bool { w, _ := t.Shape[3].Value(); return w <= 16 },
}

// TestAnnotateScopesCases: before/after text; a value goes to a texture only when its
// producer writes one and every reader takes one.
func TestAnnotateScopesCases(t *testing.T) {
	const conv = `func @main(%x: f32[1,8,4,4]@c4, %w: f32[8,8,1,1]) {
  %c = Conv(%x, %w) : f32[1,8,4,4]@c4
  %r = Relu(%c) : f32[1,8,4,4]@c4
  %d = Conv(%r, %w) : f32[1,8,4,4]@c4
  %g = GlobalAveragePool(%d) : f32[1,8,1,1]
  return %g, %r
}`
	cases := []struct {
		name, before, after string
		pol                 *passes.ScopePolicy
	}{
		{"no policy: everything global", conv, conv, nil},
		{"textures between kernels that take them; a result and a pool input stay global", conv, `func @main(%x: f32[1,8,4,4]@c4, %w: f32[8,8,1,1]) {
  %c = Conv(%x, %w) : f32[1,8,4,4]@c4@tex
  %r = Relu(%c) : f32[1,8,4,4]@c4
  %d = Conv(%r, %w) : f32[1,8,4,4]@c4
  %g = GlobalAveragePool(%d) : f32[1,8,1,1]
  return %g, %r
}`, texturePolicy},
		{"blocks of 16 and images too wide stay global", `func @main(%x: f32[1,16,4,4]@c16, %y: f32[1,8,4,32]@c4) {
  %a = Relu(%x) : f32[1,16,4,4]@c16
  %b = Relu(%a) : f32[1,16,4,4]@c16
  %c = Relu(%y) : f32[1,8,4,32]@c4
  %d = Relu(%c) : f32[1,8,4,32]@c4
  return %b, %d
}`, `func @main(%x: f32[1,16,4,4]@c16, %y: f32[1,8,4,32]@c4) {
  %a = Relu(%x) : f32[1,16,4,4]@c16
  %b = Relu(%a) : f32[1,16,4,4]@c16
  %c = Relu(%y) : f32[1,8,4,32]@c4
  %d = Relu(%c) : f32[1,8,4,32]@c4
  return %b, %d
}`, texturePolicy},
	}
	for _, c := range cases {
		m, err := graph.Parse(`module opsets(""=17)` + "\n" + c.before)
		if err != nil {
			t.Fatal(err)
		}
		p := passes.Pipeline{{Name: "annotate-scopes", Run: passes.AnnotateScopes}}
		if err := p.Run(&passes.Context{Check: true, Scopes: c.pol}, m); err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(graph.PrintFunc(m.Main)); got != c.after {
			t.Errorf("%s:\ngot\n%s\nwant\n%s", c.name, got, c.after)
		}
		back, err := graph.Parse(`module opsets(""=17)` + "\n" + c.after)
		if err != nil || strings.TrimSpace(graph.PrintFunc(back.Main)) != c.after {
			t.Errorf("%s: the annotated text does not round-trip: %v", c.name, err)
		}
	}
}
