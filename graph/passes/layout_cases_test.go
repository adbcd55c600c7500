package passes_test

import (
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/graph/passes"
)

// broadcastPolicy is a CPU-like layout policy: Conv is an anchor whose output is stored
// in blocks of 4 when its channels allow; Relu, Sigmoid, Add and Mul accept inputs of
// the output's shape in one block beside others that broadcast (plain or in that
// block); GlobalAveragePool on blocked input writes blocked or plain.
func broadcastPolicy() *passes.LayoutPolicy {
	return &passes.LayoutPolicy{
		Anchor: func(n *graph.Node) ([]int64, int64, bool) {
			if n.Op != graph.OpConv {
				return nil, 0, false
			}
			out := int64(0)
			if c, ok := n.Outputs[0].Type.Shape[1].Value(); ok && c%4 == 0 {
				out = 4
			}
			return []int64{-1, -1}, out, true
		},
		Accepts: func(n *graph.Node, in []int64) (int64, bool) {
			switch n.Op {
			case graph.OpGlobalAveragePool:
				return in[0], in[0] != 0
			case graph.OpConcat:
				for _, b := range in {
					if b != in[0] {
						return 0, false
					}
				}
				return in[0], in[0] != 0
			case graph.OpRelu, graph.OpSigmoid, graph.OpAdd, graph.OpMul:
			default:
				return 0, false
			}
			plain := func(t graph.Type) graph.Type { t.Block = 0; return t }
			out := plain(n.Outputs[0].Type)
			b := int64(0)
			for i, v := range n.Inputs {
				if in[i] != 0 && plain(v.Type).Equal(out) {
					if b != 0 && b != in[i] {
						return 0, false
					}
					b = in[i]
				}
			}
			for i, v := range n.Inputs {
				full := plain(v.Type).Equal(out)
				if full && in[i] != b || !full && in[i] != 0 && in[i] != b {
					return 0, false
				}
			}
			return b, b != 0
		},
		PlainOutput: func(n *graph.Node, in []int64) bool {
			return n.Op == graph.OpGlobalAveragePool
		},
	}
}

// TestAlterLayoutCases: before/after text of alter-layout around squeeze-and-excitation
// blocks, broadcast operands and consumers without a blocked kernel.
func TestAlterLayoutCases(t *testing.T) {
	runTable(t, passes.Pipeline{{Name: "alter-layout", Run: passes.AlterLayout}}, passes.Context{Layout: broadcastPolicy()}, layoutCases)
}

var layoutCases = []textCase{
	{"a squeeze-and-excitation block between two convolutions stays blocked, with no transform",
		`func @main(%x: f32[1,8,5,5], %w: f32[8,8,1,1], %w1: f32[4,8,1,1], %w2: f32[8,4,1,1]) {
  %c = Conv(%x, %w) : f32[1,8,5,5]
  %r = Relu(%c) : f32[1,8,5,5]
  %g = GlobalAveragePool(%r) : f32[1,8,1,1]
  %f1 = Conv(%g, %w1) : f32[1,4,1,1]
  %a1 = Relu(%f1) : f32[1,4,1,1]
  %f2 = Conv(%a1, %w2) : f32[1,8,1,1]
  %s = Sigmoid(%f2) : f32[1,8,1,1]
  %m = Mul(%r, %s) : f32[1,8,5,5]
  %c2 = Conv(%m, %w) : f32[1,8,5,5]
  return %c2
}`, `func @main(%x: f32[1,8,5,5], %w: f32[8,8,1,1], %w1: f32[4,8,1,1], %w2: f32[8,4,1,1]) {
  %c = Conv(%x, %w) : f32[1,8,5,5]@c4
  %r = Relu(%c) : f32[1,8,5,5]@c4
  %g = GlobalAveragePool(%r) : f32[1,8,1,1]@c4
  %f1 = Conv(%g, %w1) : f32[1,4,1,1]@c4
  %a1 = Relu(%f1) : f32[1,4,1,1]@c4
  %f2 = Conv(%a1, %w2) : f32[1,8,1,1]@c4
  %s = Sigmoid(%f2) : f32[1,8,1,1]@c4
  %m = Mul(%r, %s) : f32[1,8,5,5]@c4
  %c2 = Conv(%m, %w) : f32[1,8,5,5]
  return %c2
}`},
	{"a plain per-channel scale of a blocked tensor is read as it is",
		`func @main(%x: f32[1,8,5,5], %w: f32[8,8,1,1], %s: f32[1,8,1,1]) {
  %c = Conv(%x, %w) : f32[1,8,5,5]
  %m = Mul(%c, %s) : f32[1,8,5,5]
  %c2 = Conv(%m, %w) : f32[1,8,5,5]
  return %c2
}`, `func @main(%x: f32[1,8,5,5], %w: f32[8,8,1,1], %s: f32[1,8,1,1]) {
  %c = Conv(%x, %w) : f32[1,8,5,5]@c4
  %m = Mul(%c, %s) : f32[1,8,5,5]@c4
  %c2 = Conv(%m, %w) : f32[1,8,5,5]
  return %c2
}`},
	{"a blocked per-channel scale does not pull its large plain operand into blocks",
		`func @main(%x: f32[1,8,5,5], %w: f32[8,8,1,1]) {
  %g = GlobalAveragePool(%x) : f32[1,8,1,1]
  %f = Conv(%g, %w) : f32[1,8,1,1]
  %s = Sigmoid(%f) : f32[1,8,1,1]
  %m = Mul(%x, %s) : f32[1,8,5,5]
  %c2 = Conv(%m, %w) : f32[1,8,5,5]
  return %c2
}`, `func @main(%x: f32[1,8,5,5], %w: f32[8,8,1,1]) {
  %g = GlobalAveragePool(%x) : f32[1,8,1,1]
  %f = Conv(%g, %w) : f32[1,8,1,1]
  %s = Sigmoid(%f) : f32[1,8,1,1]
  %m = Mul(%x, %s) : f32[1,8,5,5]
  %c2 = Conv(%m, %w) : f32[1,8,5,5]
  return %c2
}`},
	{"a global pool whose reader needs NCHW writes plain",
		`func @main(%x: f32[1,8,5,5], %w: f32[8,8,1,1]) {
  %c = Conv(%x, %w) : f32[1,8,5,5]
  %r = Relu(%c) : f32[1,8,5,5]
  %g = GlobalAveragePool(%r) : f32[1,8,1,1]
  %f = Flatten(%g) : f32[1,8]
  return %f
}`, `func @main(%x: f32[1,8,5,5], %w: f32[8,8,1,1]) {
  %c = Conv(%x, %w) : f32[1,8,5,5]@c4
  %r = Relu(%c) : f32[1,8,5,5]@c4
  %g = GlobalAveragePool(%r) : f32[1,8,1,1]
  %f = Flatten(%g) : f32[1,8]
  return %f
}`},
	{"consumers without a blocked kernel share one transform of the value",
		`func @main(%x: f32[1,8,5,5], %w: f32[8,8,1,1]) {
  %c = Conv(%x, %w) : f32[1,8,5,5]
  %r = Relu(%c) : f32[1,8,5,5]
  %c2 = Conv(%r, %w) : f32[1,8,5,5]
  %s1 = Softmax(%r) : f32[1,8,5,5]
  %s2 = Exp(%r) : f32[1,8,5,5]
  return %c2, %s1, %s2
}`, `func @main(%x: f32[1,8,5,5], %w: f32[8,8,1,1]) {
  %c = Conv(%x, %w) : f32[1,8,5,5]@c4
  %r = Relu(%c) : f32[1,8,5,5]@c4
  %c2 = Conv(%r, %w) : f32[1,8,5,5]
  %"r@c0" = LayoutTransform(%r) : f32[1,8,5,5]
  %s1 = Softmax(%"r@c0") : f32[1,8,5,5]
  %s2 = Exp(%"r@c0") : f32[1,8,5,5]
  return %c2, %s1, %s2
}`},
	{"a concat's plain inputs join the block of its blocked one where the block divides them",
		`func @main(%x: f32[1,8,5,5], %y: f32[1,4,5,5], %w: f32[8,8,1,1], %w2: f32[8,12,1,1]) {
  %c = Conv(%x, %w) : f32[1,8,5,5]
  %k = Concat(%c, %y) {axis=1} : f32[1,12,5,5]
  %c2 = Conv(%k, %w2) : f32[1,8,5,5]
  return %c2
}`, `func @main(%x: f32[1,8,5,5], %y: f32[1,4,5,5], %w: f32[8,8,1,1], %w2: f32[8,12,1,1]) {
  %c = Conv(%x, %w) : f32[1,8,5,5]@c4
  %"y@c4" = LayoutTransform(%y) {block=4} : f32[1,4,5,5]@c4
  %k = Concat(%c, %"y@c4") {axis=1} : f32[1,12,5,5]@c4
  %c2 = Conv(%k, %w2) : f32[1,8,5,5]
  return %c2
}`},
	{"a concat whose plain input the block does not divide runs plain (DenseNet's 64 and 32 channels)",
		`func @main(%x: f32[1,8,5,5], %y: f32[1,6,5,5], %z: f32[1,2,5,5], %w: f32[8,8,1,1], %w2: f32[8,16,1,1]) {
  %c = Conv(%x, %w) : f32[1,8,5,5]
  %k = Concat(%c, %y, %z) {axis=1} : f32[1,16,5,5]
  %c2 = Conv(%k, %w2) : f32[1,8,5,5]
  return %c2
}`, `func @main(%x: f32[1,8,5,5], %y: f32[1,6,5,5], %z: f32[1,2,5,5], %w: f32[8,8,1,1], %w2: f32[8,16,1,1]) {
  %c = Conv(%x, %w) : f32[1,8,5,5]
  %k = Concat(%c, %y, %z) {axis=1} : f32[1,16,5,5]
  %c2 = Conv(%k, %w2) : f32[1,8,5,5]
  return %c2
}`},
}
