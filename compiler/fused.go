package compiler

import (
	"fmt"

	"github.com/kilnrt/kiln/graph"
)

// lowerFused lowers a kiln.Fused node (a group made by fuse-ops) as one kernel: the
// anchor's strategy builds the anchor with the other members as epilogues. When no
// strategy can, or when a member's host shape function reads a value computed inside
// the group (hostShapesReady), the members are lowered one by one (each its own
// kernel), which is always correct.
func (e *emitter) lowerFused(n *graph.Node) error {
	body := n.Attrs.(*graph.FusedAttrs).Body
	if e.c.outer == nil {
		e.c.outer = map[*graph.Value]*graph.Value{}
	}
	for i, p := range body.Params {
		e.c.outer[p] = n.Inputs[i]
	}
	for i, r := range body.Results {
		if e.inPlace[n.Outputs[i]] != nil {
			e.inPlaceAs[r] = n.Outputs[i]
		}
	}
	ok := false
	if e.hostShapesReady(body.Nodes) {
		for _, m := range body.Nodes {
			if err := e.bindRuntimeShapes(m); err != nil {
				return err
			}
		}
		anchor, rest := splitAnchor(body.Nodes)
		var err error
		if ok, err = e.lowerKernel(anchor, rest); err != nil {
			return err
		}
	}
	if !ok {
		for _, m := range body.Nodes {
			e.c.at = m.String()
			if err := e.node(m); err != nil {
				return err
			}
		}
	}
	for i, r := range body.Results {
		reg, found := e.reg[r]
		if !found {
			return fmt.Errorf("BUG: %v: body result %q was not computed", n, r.Name)
		}
		e.reg[n.Outputs[i]] = reg
	}
	return nil
}

// splitAnchor picks the member whose schedule lowers the group: the OutEWiseFusable
// member (a conv or matmul; fuse-ops gives it no producers inside the group), else the
// first member. The others follow in topological order.
func splitAnchor(members []*graph.Node) (*graph.Node, []*graph.Node) {
	for i, m := range members {
		if m.Op.Info().Pattern == graph.OutEWiseFusable {
			rest := append(append([]*graph.Node{}, members[:i]...), members[i+1:]...)
			return m, rest
		}
	}
	return members[0], members[1:]
}
