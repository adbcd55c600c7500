package compiler

import (
	"fmt"
	"strings"

	"github.com/kilnrt/kiln/graph"
)

// kernelFor is lowerKernelFor remembered by the structure of what it lowers: the ops,
// attributes and output types of n and its chain, and for each input where it comes from
// (a member of the chain, or outside: its type and, for a constant, its tensor). Lowering
// reads nothing else, so a structure seen before gets the same kernel without lowering
// again: a model made of repeated blocks (or a long chain cut into equal groups) costs
// one lowering per distinct block, not one per block.
func (c *compile) kernelFor(n *graph.Node, chain []*graph.Node) (*kernelUse, error) {
	key := c.kernelKey(n, chain)
	if use, ok := c.kt.byShape[key]; ok {
		if use != nil {
			c.res.Stats.Strategies[use.strategy]++
		}
		return use, nil
	}
	use, err := c.lowerKernelFor(n, chain)
	if err != nil {
		return nil, err
	}
	c.kt.byShape[key] = use
	return use, nil
}

// kernelKey prints the structure kernelFor remembers, and whether the kernel computes
// a rounding op's input (noContract: the same structure prints other code).
func (c *compile) kernelKey(n *graph.Node, chain []*graph.Node) string {
	key := c.chainStructure(n, chain, func(v *graph.Value) string { return fmt.Sprintf("=%p", v.Const) })
	if c.noContract(n, chain) {
		key += "no_contract"
	}
	return key
}

// chainStructure prints the ops, attributes, input types and output types of n and its
// chain, inputs produced inside the chain by stage number; constant names how a constant
// input is printed after its type (by identity for kernelKey, by kind for workloadKey).
func (c *compile) chainStructure(n *graph.Node, chain []*graph.Node, constant func(*graph.Value) string) string {
	var b strings.Builder
	stage := map[*graph.Value]int{}
	for k, m := range append([]*graph.Node{n}, chain...) {
		fmt.Fprintf(&b, "%d %#v(", m.Op, m.Attrs)
		for _, v := range m.Inputs {
			if s, ok := stage[v]; ok && v != nil {
				fmt.Fprintf(&b, "s%d,", s)
				continue
			}
			if v == nil {
				b.WriteString("-,")
				continue
			}
			v = c.resolve(v)
			fmt.Fprintf(&b, "%v", v.Type)
			if v.Const != nil {
				b.WriteString(constant(v))
			}
			b.WriteByte(',')
		}
		b.WriteString(")->")
		for _, o := range m.Outputs {
			fmt.Fprintf(&b, "%v,", o.Type)
		}
		b.WriteByte(';')
		stage[m.Outputs[0]] = k
	}
	return b.String()
}
