package passes_test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/graph/passes"
)

// texturePolicy: Conv, Relu and fused groups write activations in both packings; Relu reads them,
// Conv reads its data input as an activation and its weight as a texture-weight;
// images up to w×h texels.
func texturePolicy(w, h int64) *passes.ScopePolicy {
	return &passes.ScopePolicy{
		Writes: func(n *graph.Node, p graph.Packing) bool {
			return (n.Op == graph.OpConv || n.Op == graph.OpRelu || n.Op == graph.OpFused) && p != graph.PackOIHW4o
		},
		Reads: func(n *graph.Node, i int, p graph.Packing) bool {
			switch {
			case n.Op == graph.OpRelu || (n.Op == graph.OpConv || n.Op == graph.OpFused) && i == 0:
				return p != graph.PackOIHW4o
			case (n.Op == graph.OpConv || n.Op == graph.OpFused) && i == 1:
				return p == graph.PackOIHW4o
			}
			return false
		},
		MaxWidth: w, MaxHeight: h,
	}
}

// constBody is a constant's values in the printed text, which the tests compare
// without them.
var constBody = regexp.MustCompile(`(?m)^(\s*const [^=]+) = .*$`)

func printed(m *graph.Module) string {
	return constBody.ReplaceAllString(strings.TrimSpace(graph.PrintFunc(m.Main)), "$1")
}

// elements stands in for a constant's values, which the printer abbreviates.
var elements = regexp.MustCompile(`<(\d+) elements>`)

func parseScoped(t *testing.T, text string) *graph.Module {
	t.Helper()
	text = elements.ReplaceAllStringFunc(text, func(s string) string {
		n, _ := strconv.Atoi(elements.FindStringSubmatch(s)[1])
		return "[" + strings.Repeat("0.5, ", n-1) + "0.5]"
	})
	m, err := graph.Parse(`module opsets(""=17)` + "\n" + text)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestAnnotateScopesCases: before/after text and the decisions; a value goes to a
// texture only when its producer writes one and every reader takes one, in the
// packing whose image fits the limits and is the most balanced.
func TestAnnotateScopesCases(t *testing.T) {
	const conv = `func @main(%x: f32[1,8,4,4]@c4, %w: f32[8,8,1,1]) {
  %c = Conv(%x, %w) : f32[1,8,4,4]@c4
  %r = Relu(%c) : f32[1,8,4,4]@c4
  %d = Conv(%r, %w) : f32[1,8,4,4]@c4
  %g = GlobalAveragePool(%d) : f32[1,8,1,1]
  return %g, %r
}`
	// one value, two packings: NCHW4c is 16x4, NHWC4c 32x2
	const chain = `func @main(%x: f32[1,8,2,16]@c4) {
  %a = Relu(%x) : f32[1,8,2,16]@c4
  %b = Relu(%a) : f32[1,8,2,16]@c4
  %c = Relu(%b) : f32[1,8,2,16]@c4
  return %c
}`
	const weights = `func @main(%x: f32[1,4,5,5]@c4) {
  const %w: f32[8,4,3,3] = <288 elements>
  const %v: f32[6,8,1,1] = <48 elements>
  const %u: f32[4,4,1,1] = <16 elements>
  %a = Conv(%x, %w) : f32[1,8,3,3]@c4
  %b = Conv(%a, %v) : f32[1,6,3,3]
  %c = Conv(%x, %u) : f32[1,4,5,5]@c4
  %d = Mul(%u, %u) : f32[4,4,1,1]
  return %b, %c, %d
}`
	cases := []struct {
		name, before, after string
		pol                 *passes.ScopePolicy
		decisions           []string // value: decision
	}{
		{"no policy: everything global", conv, conv, nil, nil},
		{"textures between kernels that take them; a result and a pool input stay global", conv, `func @main(%x: f32[1,8,4,4]@c4, %w: f32[8,8,1,1]) {
  %c = Conv(%x, %w) : f32[1,8,4,4]@c4@tex
  %r = Relu(%c) : f32[1,8,4,4]@c4
  %d = Conv(%r, %w) : f32[1,8,4,4]@c4
  %g = GlobalAveragePool(%d) : f32[1,8,1,1]
  return %g, %r
}`, texturePolicy(16384, 16384), []string{
			"c: texture 4x8",
			"r: global: a function result or read by a subgraph",
			"d: global: a reader takes no texture in a packing its producer writes (the GlobalAveragePool that writes %g reads it from global memory)",
		}},
		{"a device with tall images: the balanced NCHW4c", chain, `func @main(%x: f32[1,8,2,16]@c4) {
  %a = Relu(%x) : f32[1,8,2,16]@c4@tex
  %b = Relu(%a) : f32[1,8,2,16]@c4@tex
  %c = Relu(%b) : f32[1,8,2,16]@c4
  return %c
}`, texturePolicy(16384, 16384), []string{"a: texture 16x4", "b: texture 16x4", "c: global: a function result or read by a subgraph"}},
		{"a device with short images: the NHWC4c that fits", chain, `func @main(%x: f32[1,8,2,16]@c4) {
  %a = Relu(%x) : f32[1,8,2,16]@c4@texnhwc
  %b = Relu(%a) : f32[1,8,2,16]@c4@texnhwc
  %c = Relu(%b) : f32[1,8,2,16]@c4
  return %c
}`, texturePolicy(64, 2), []string{"a: texture-nhwc 32x2", "b: texture-nhwc 32x2", "c: global: a function result or read by a subgraph"}},
		{"images too large for the limit stay global", chain, chain, texturePolicy(8, 8), []string{
			"a: global: no packing fits the device's images (texture 16x4, texture-nhwc 32x2; the limit is 8x8)",
			"b: global: no packing fits the device's images (texture 16x4, texture-nhwc 32x2; the limit is 8x8)",
			"c: global: a function result or read by a subgraph",
		}},
		{"weights: a texture-weight when every reader takes one and the output channels are blocks of 4", weights, `func @main(%x: f32[1,4,5,5]@c4) {
  const %w: f32[8,4,3,3]@c4@texw = <288 elements>
  const %v: f32[6,8,1,1] = <48 elements>
  const %u: f32[4,4,1,1] = <16 elements>
  %a = Conv(%x, %w) : f32[1,8,3,3]@c4@tex
  %b = Conv(%a, %v) : f32[1,6,3,3]
  %c = Conv(%x, %u) : f32[1,4,5,5]@c4
  %d = Mul(%u, %u) : f32[4,4,1,1]
  return %b, %c, %d
}`, texturePolicy(16384, 16384), []string{
			"w: texture-weight 36x2",
			"v: global: not a 4-D tensor in blocks of 4 channels",
			"u: global: a reader takes no texture in a packing its producer writes (the Mul that writes %d reads it from global memory)",
			"a: texture 3x6",
			"b: global: not a 4-D tensor in blocks of 4 channels",
			"c: global: a function result or read by a subgraph",
		}},
		{"a fused body sees its parameters and result where its caller keeps them", `func @main(%x: f32[1,4,8,8]@c4) {
  const %w: f32[4,4,1,1] = <16 elements>
  %s = Fused(%x, %w) {anchor="Conv"} : f32[1,4,8,8]@c4
    body =
      func @fused_conv_relu(%p0: f32[1,4,8,8]@c4, %p1: f32[4,4,1,1]) {
        %c = Conv(%p0, %p1) : f32[1,4,8,8]@c4
        %r = Relu(%c) : f32[1,4,8,8]@c4
        return %r
      }
  %t = Relu(%s) : f32[1,4,8,8]@c4
  return %t
}`, `func @main(%x: f32[1,4,8,8]@c4) {
  const %w: f32[4,4,1,1]@c4@texw = <16 elements>
  %s = Fused(%x, %w) {anchor="Conv"} : f32[1,4,8,8]@c4@tex
    body =
      func @fused_conv_relu(%p0: f32[1,4,8,8]@c4, %p1: f32[4,4,1,1]@c4@texw) {
        %c = Conv(%p0, %p1) : f32[1,4,8,8]@c4
        %r = Relu(%c) : f32[1,4,8,8]@c4@tex
        return %r
      }
  %t = Relu(%s) : f32[1,4,8,8]@c4
  return %t
}`, texturePolicy(16384, 16384), []string{"w: texture-weight 4x1", "s: texture 8x8", "t: global: a function result or read by a subgraph"}},
		{"blocks of 16 stay global", `func @main(%x: f32[1,16,4,4]@c16) {
  %a = Relu(%x) : f32[1,16,4,4]@c16
  %b = Relu(%a) : f32[1,16,4,4]@c16
  return %b
}`, `func @main(%x: f32[1,16,4,4]@c16) {
  %a = Relu(%x) : f32[1,16,4,4]@c16
  %b = Relu(%a) : f32[1,16,4,4]@c16
  return %b
}`, texturePolicy(16384, 16384), []string{
			"a: global: not a 4-D tensor in blocks of 4 channels",
			"b: global: not a 4-D tensor in blocks of 4 channels",
		}},
	}
	for _, c := range cases {
		m := parseScoped(t, c.before)
		var got []string
		ctx := &passes.Context{Check: true, Scopes: c.pol, Scoped: func(d passes.ScopeDecision) {
			got = append(got, fmt.Sprintf("%s: %v", d.Value.Name, d))
		}}
		p := passes.Pipeline{{Name: "annotate-scopes", Run: passes.AnnotateScopes}}
		if err := p.Run(ctx, m); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if out, want := printed(m), constBody.ReplaceAllString(c.after, "$1"); out != want {
			t.Errorf("%s:\ngot\n%s\nwant\n%s", c.name, out, want)
		}
		if strings.Join(got, "\n") != strings.Join(c.decisions, "\n") {
			t.Errorf("%s: decisions\n%s\nwant\n%s", c.name, strings.Join(got, "\n"), strings.Join(c.decisions, "\n"))
		}
		back := parseScoped(t, c.after)
		if printed(back) != constBody.ReplaceAllString(c.after, "$1") {
			t.Errorf("%s: the annotated text does not round-trip", c.name)
		}
		// annotate-scopes again without a policy puts everything back
		if err := p.Run(&passes.Context{Check: true}, m); err != nil {
			t.Fatal(err)
		}
		if out, want := printed(m), constBody.ReplaceAllString(c.before, "$1"); out != want {
			t.Errorf("%s: without a policy, got\n%s\nwant\n%s", c.name, out, want)
		}
	}
}
