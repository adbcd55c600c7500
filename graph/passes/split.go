package passes

import (
	"fmt"

	"github.com/kilnrt/kiln/graph"
)

// SplitToSlices rewrites each Split into one Slice per output (constant starts, ends
// and axis), when Context.SplitsAsSlices: a target whose kernels write one output each
// (the GPU rules) then runs the parts as kernels of its own, each fusable with its
// consumers. The Split's output values stay (their producer becomes their Slice), so
// readers see no change. A Split whose parts' extents along the axis are not static
// stays as it is; so does every Split when the flag is off.
func SplitToSlices(ctx *Context, m *graph.Module) error {
	if !ctx.SplitsAsSlices {
		return nil
	}
	replaceNodes(m, splitParts)
	return nil
}

// splitParts returns the Slices that compute n's outputs, or nil when n is not a Split
// of static parts.
func splitParts(f *graph.Func, n *graph.Node) []*graph.Node {
	a, ok := n.Attrs.(*graph.SplitAttrs)
	x := n.Input(0)
	if n.Op != graph.OpSplit || !ok || len(n.Outputs) < 2 || x == nil || x.Type.Kind != graph.KindTensor || x.Type.UnknownRank {
		return nil
	}
	rank := int64(len(x.Type.Shape))
	axis := a.Axis
	if axis < 0 {
		axis += rank
	}
	if axis < 0 || axis >= rank {
		return nil
	}
	extents := make([]int64, len(n.Outputs))
	for i, o := range n.Outputs {
		if o == nil || o.Type.Kind != graph.KindTensor || o.Type.UnknownRank || int64(len(o.Type.Shape)) != rank {
			return nil
		}
		e, ok := o.Type.Shape[axis].Value()
		if !ok {
			return nil
		}
		extents[i] = e
	}
	ints := func(name string, v int64) *graph.Value { return int64Const(f, name, v) }
	base := n.Outputs[0].Name // unique, unlike node names
	axes := ints(base+"/split_axis", axis)
	var parts []*graph.Node
	start := int64(0)
	for i, o := range n.Outputs {
		s := &graph.Node{Op: graph.OpSlice, Name: fmt.Sprintf("%s/part%d", n.Name, i), Outputs: []*graph.Value{o},
			Inputs: []*graph.Value{x, ints(fmt.Sprintf("%s/split_start%d", base, i), start), ints(fmt.Sprintf("%s/split_end%d", base, i), start+extents[i]), axes}}
		o.Def = s
		parts = append(parts, s)
		start += extents[i]
	}
	return parts
}
