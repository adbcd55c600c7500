package passes

import (
	"fmt"
	"slices"

	"github.com/kilnrt/kiln/graph"
)

// materialize replaces each group of two or more nodes by a kiln.Fused node placed where
// the group's last member was. The group's inputs become the node's inputs and the
// body's parameters (p0, p1, ...), except constants, which the body holds itself; the
// last member's output values become the node's outputs, so readers need no rewiring,
// and the body returns fresh values of the same names.
func materialize(f *graph.Func, p *partition, consts map[*graph.Value]bool) {
	members := map[*group][]int{}
	for i := range p.g.nodes {
		r := p.groups[i].root()
		members[r] = append(members[r], i)
	}
	replace := map[int]*graph.Node{} // the last member's index → its fused node
	drop := map[int]bool{}
	for _, idx := range members {
		if len(idx) < 2 {
			continue
		}
		slices.Sort(idx)
		replace[idx[len(idx)-1]] = fusedNode(f, p, idx, consts)
		for _, i := range idx[:len(idx)-1] {
			drop[i] = true
		}
	}
	if len(replace) == 0 {
		return
	}
	var nodes []*graph.Node
	for i, n := range f.Nodes {
		switch {
		case replace[i] != nil:
			nodes = append(nodes, replace[i])
		case !drop[i]:
			nodes = append(nodes, n)
		}
	}
	f.Nodes = nodes
}

func fusedNode(f *graph.Func, p *partition, idx []int, consts map[*graph.Value]bool) *graph.Node {
	ns := make([]*graph.Node, len(idx))
	inside := map[*graph.Node]bool{}
	for k, i := range idx {
		ns[k] = p.g.nodes[i]
		inside[ns[k]] = true
	}
	last := ns[len(ns)-1]
	// only the last member's outputs may be read outside the group
	for _, n := range ns[:len(ns)-1] {
		for _, e := range p.g.out[p.g.index[n]] {
			if !inside[p.g.nodes[e.to]] {
				panic(fmt.Sprintf("BUG: fuse-ops: %v is read by %v outside its group", n, p.g.nodes[e.to]))
			}
		}
		if p.g.extern[p.g.index[n]] {
			panic(fmt.Sprintf("BUG: fuse-ops: %v escapes its group", n))
		}
	}
	anchor := ns[0]
	if a := p.groups[idx[0]].root().anchor; a >= 0 {
		anchor = p.g.nodes[a]
	}
	body := &graph.Func{Name: graph.FusedName(ns), Parent: f}
	param := map[*graph.Value]*graph.Value{}
	fused := &graph.Node{Op: graph.OpFused, Name: last.Name}
	for _, n := range ns {
		for i, v := range n.Inputs {
			if v == nil || v.Def != nil && inside[v.Def] {
				continue
			}
			bp, ok := param[v]
			if !ok && consts[v] {
				// a constant stays one inside the body (sharing its data), so strategies
				// see weights they can repack
				bp = &graph.Value{Name: v.Name, Type: v.Type, Const: v.Const}
				param[v] = bp
				body.Consts = append(body.Consts, bp)
				ok = true
			}
			if !ok {
				bp = &graph.Value{Name: fmt.Sprintf("p%d", len(body.Params)), Type: v.Type}
				param[v] = bp
				body.Params = append(body.Params, bp)
				fused.Inputs = append(fused.Inputs, v)
			}
			n.Inputs[i] = bp
		}
	}
	outs := last.Outputs
	inner := make([]*graph.Value, len(outs))
	for i, o := range outs {
		inner[i] = &graph.Value{Name: o.Name, Type: o.Type, Def: last}
		o.Def = fused
	}
	last.Outputs = inner
	body.Nodes = ns
	body.Results = inner
	fused.Outputs = outs
	fused.Attrs = &graph.FusedAttrs{Anchor: anchor.Op.String(), Body: body}
	return fused
}
