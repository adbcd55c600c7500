package compiler

import (
	"slices"

	"github.com/kilnrt/kiln/graph"
)

// roundsToIntegers are the ops whose output is their float input rounded to integers:
// one ulp of difference in the input can move it across a rounding boundary and change
// the output by a whole quantization step (amplified by every layer after it).
var roundsToIntegers = map[graph.Op]bool{
	graph.OpQuantizeLinear:        true,
	graph.OpDynamicQuantizeLinear: true,
}

// noContract reports whether the kernel of n and its chain must round every product
// before the add that uses it (loopir.PrimFunc.NoContract), as the graph's separate
// Mul and Add nodes and the reference runtimes do: when it computes a rounding op's
// input, or holds a rounding op. A dynamically quantized network computes each layer's
// float output as cast(accumulator)·scale + bias and quantizes it for the next layer;
// a fused multiply-add there flips roundings, and a MobileNetV2's logits moved by 2%.
func (c *compile) noContract(n *graph.Node, chain []*graph.Node) bool {
	nodes := append([]*graph.Node{n}, chain...)
	for _, m := range nodes {
		if roundsToIntegers[m.Op] {
			return true
		}
	}
	rounded := c.roundedValues()
	for _, o := range nodes[len(nodes)-1].Outputs {
		if rounded[o] {
			return true
		}
	}
	return false
}

// roundedValues are the values a rounding op reads, each with the values it stands
// for up to the kernel that computes it: through views (same bytes), through a
// kiln.Fused node's output to its body's result, and from a fused body's parameter to
// the value its node reads. Built once per compile.
func (c *compile) roundedValues() map[*graph.Value]bool {
	if c.rounded != nil {
		return c.rounded
	}
	c.rounded = map[*graph.Value]bool{}
	outer := map[*graph.Value]*graph.Value{}
	var readers []*graph.Node
	c.mod.Main.Funcs(func(g *graph.Func) {
		for _, nd := range g.Nodes {
			if nd.Op == graph.OpFused {
				for i, p := range nd.Attrs.(*graph.FusedAttrs).Body.Params {
					outer[p] = nd.Inputs[i]
				}
			}
			if roundsToIntegers[nd.Op] {
				readers = append(readers, nd)
			}
		}
	})
	for _, r := range readers {
		v := r.Input(0)
		for v != nil && !c.rounded[v] {
			c.rounded[v] = true
			switch d := v.Def; {
			case d == nil:
				v = outer[v]
			case d.Op == graph.OpFused:
				v = d.Attrs.(*graph.FusedAttrs).Body.Results[slices.Index(d.Outputs, v)]
			case isView(d):
				v = d.Input(0)
			default:
				v = nil
			}
		}
	}
	return c.rounded
}
