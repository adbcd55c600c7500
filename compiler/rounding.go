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

// passesRounding are the arithmetic ops whose compiled kernels round as the reference
// runtimes do when built without contraction (one rounding per binary operation;
// Resize's linear mode in ONNX Runtime's order, kernels.resizeCornerSum): a difference
// in their inputs reaches a rounding op after them, so the kernels that compute their
// inputs are built without contraction too. A dynamically quantized U-Net's decoder
// upsamples a layer's output and adds it to a skip connection before the next
// quantizer.
var passesRounding = map[graph.Op]bool{
	graph.OpAdd: true, graph.OpSub: true, graph.OpMul: true, graph.OpDiv: true, graph.OpResize: true,
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
// for up to the kernels that compute them: through views (same bytes), through ops that
// select their inputs' elements unchanged (graph.Selects: a Relu, MaxPool or Concat
// between a layer's output and the next layer's quantizer passes a one-ulp difference
// on to it bit for bit), through a kiln.Fused node's output to its body's result, and
// from a fused body's parameter to the value its node reads. Built once per compile.
func (c *compile) roundedValues() map[*graph.Value]bool {
	if c.rounded != nil {
		return c.rounded
	}
	c.rounded = map[*graph.Value]bool{}
	outer := map[*graph.Value]*graph.Value{}
	var work []*graph.Value
	c.mod.Main.Funcs(func(g *graph.Func) {
		for _, nd := range g.Nodes {
			if nd.Op == graph.OpFused {
				for i, p := range nd.Attrs.(*graph.FusedAttrs).Body.Params {
					outer[p] = nd.Inputs[i]
				}
			}
			if roundsToIntegers[nd.Op] {
				work = append(work, nd.Input(0))
			}
		}
	})
	for len(work) > 0 {
		v := work[len(work)-1]
		work = work[:len(work)-1]
		if v == nil || c.rounded[v] {
			continue
		}
		c.rounded[v] = true
		switch d := v.Def; {
		case d == nil:
			work = append(work, outer[v])
		case d.Op == graph.OpFused:
			work = append(work, d.Attrs.(*graph.FusedAttrs).Body.Results[slices.Index(d.Outputs, v)])
		case isView(d):
			work = append(work, d.Input(0))
		case selects(d) || passesRounding[d.Op]:
			work = append(work, d.Inputs...)
		}
	}
	return c.rounded
}

// selects reports whether n's outputs are its inputs' elements unchanged (graph.Selects).
func selects(n *graph.Node) bool {
	info := n.Op.Info()
	return info != nil && info.Flags&graph.Selects != 0
}
