package passes

import (
	"fmt"

	"github.com/kilnrt/kiln/graph"
)

// Default limits of fuse-ops (docs/ARCHITECTURE.md, "Fusion").
const (
	defaultFuseOps = 256
)

// FuseLimits bound a fused group: MaxOps members, MaxArgs kernel arguments (inputs plus
// outputs; 0: no limit, as on the CPU, where a kernel takes a pointer array).
type FuseLimits struct {
	MaxOps  int
	MaxArgs int
}

// FuseOps partitions every Func into groups with TVM's rules and replaces each group of
// two or more nodes by one kiln.Fused node whose body is the group (one future kernel).
//
// The rules, on the post-dominator tree (pdom) of each Func, in three phases over the
// nodes in topological order (a group's pattern is its strongest member's):
//   - phase 0: a group with an OutEWiseFusable op (conv, matmul, pooling) fuses into its
//     pdom when every edge there is elementwise and every node on the way is at most
//     Broadcast (bias, activation, residual add);
//   - phases 0 and 1: an ElemWise/Broadcast group fuses into its pdom when the way there
//     is at most Injective and the pdom's group is at most Injective, a reduction, or
//     the tail of an OutEWiseFusable group (a side operand of its epilogue);
//   - phase 1: an Injective group fuses into its pdom when everything on the way is at
//     most Injective;
//   - phase 2 fuses injective groups into tuples; kiln's graph has no tuple ops, so it
//     finds nothing today.
//
// CommReduce groups only receive. A node that is a Func result, is read by a subgraph
// or has several outputs ends its group (its output must reach memory); Opaque nodes and
// nodes with subgraphs never fuse, so no group crosses control flow.
//
// Where kiln differs from TVM: an elementwise producer never fuses into a convolution or
// matmul itself (the CPU strategies pack their data input before the tensorized loop, so
// a producer cannot be inlined there); it may fuse into the anchor's epilogue.
func FuseOps(ctx *Context, m *graph.Module) error {
	lim := ctx.Fuse
	if lim.MaxOps <= 0 {
		lim.MaxOps = defaultFuseOps
	}
	readers := map[*graph.Value]int{}
	m.Main.Funcs(func(f *graph.Func) {
		for _, n := range f.Nodes {
			for _, v := range n.Inputs {
				readers[v]++
			}
		}
	})
	var funcs []*graph.Func
	consts := map[*graph.Value]bool{}
	bodies := map[*graph.Func]bool{} // already fused (a second run): left alone
	m.Main.Funcs(func(f *graph.Func) {
		for _, n := range f.Nodes {
			if n.Op == graph.OpFused {
				bodies[n.Attrs.(*graph.FusedAttrs).Body] = true
			}
		}
		if !bodies[f] {
			funcs = append(funcs, f)
		}
		for _, c := range f.Consts {
			consts[c] = true
		}
	})
	for _, f := range funcs {
		p := newPartition(newFwdGraph(f, readers), lim)
		p.run()
		materialize(f, p, consts)
	}
	// the constants that moved into bodies and nobody else reads go (dce ran before:
	// nothing else is dead)
	return DCE(ctx, m)
}

// group is a union-find set of nodes.
type group struct {
	parent  *group
	pattern graph.Pattern
	size    int
	anchor  int   // the OutEWiseFusable member, -1 when none
	members []int // the nodes, on the root only (kept when MaxArgs is checked)
}

func (g *group) root() *group {
	for g.parent != nil {
		if g.parent.parent != nil {
			g.parent = g.parent.parent
		}
		g = g.parent
	}
	return g
}

type partition struct {
	g      *fwdGraph
	dom    []domNode
	groups []*group
	lim    FuseLimits
	seen   map[int]bool
	edges  int // edges the current tryFuse has walked
}

// pathEdgeBudget bounds the edges one tryFuse walks, per member a group may have: the
// walk from a node to its post-dominator stops at MaxOps nodes (no bigger group is
// allowed), and this bounds the edges among them in a densely connected graph. A real
// model's paths stay far below it; a walk that reaches it does not fuse.
const pathEdgeBudget = 64

func newPartition(g *fwdGraph, lim FuseLimits) *partition {
	p := &partition{g: g, dom: postDominators(g), lim: lim, groups: make([]*group, len(g.nodes))}
	for i := range g.nodes {
		a := -1
		if g.pattern[i] == graph.OutEWiseFusable {
			a = i
		}
		p.groups[i] = &group{pattern: g.pattern[i], size: 1, anchor: a}
		if lim.MaxArgs > 0 {
			p.groups[i].members = []int{i}
		}
	}
	return p
}

func (p *partition) run() {
	for phase := 0; phase < 3; phase++ {
		for i := range p.g.nodes {
			p.visit(phase, i)
		}
	}
}

func (p *partition) visit(phase, i int) {
	gi := p.groups[i].root()
	dom := p.dom[i]
	if gi.pattern == graph.Opaque || dom.parent < 0 {
		return
	}
	sink := dom.parent
	gs := p.groups[sink].root()
	if gs == gi {
		return
	}
	if phase == 2 {
		// injective groups into intermediate tuples: there are no tuple ops
		return
	}
	if gs.pattern == graph.Tuple {
		return
	}
	switch {
	case gi.pattern == graph.OutEWiseFusable:
		if phase != 0 || dom.pattern != graph.ElemWise {
			return
		}
		p.tryFuse(i, sink, func(k graph.Pattern, _ bool) bool { return k <= graph.Broadcast })
	case gi.pattern <= graph.Broadcast:
		if !(dom.pattern <= graph.Injective || dom.pattern == graph.CommReduce) {
			return
		}
		if p.g.pattern[sink] == graph.OutEWiseFusable {
			return // a prologue of a conv/matmul: see FuseOps
		}
		p.tryFuse(i, sink, func(k graph.Pattern, isSink bool) bool {
			if !isSink {
				return k <= graph.Injective
			}
			return k <= graph.CommReduce || k == graph.OutEWiseFusable
		})
	case gi.pattern == graph.Injective || gi.pattern == graph.Tuple:
		if phase != 1 || dom.pattern > graph.Injective {
			return
		}
		p.tryFuse(i, sink, func(k graph.Pattern, _ bool) bool { return k <= graph.Injective })
	}
	// CommReduce (and stronger) groups only receive
}

// tryFuse merges every node on the paths from src to sink into sink's group when each
// satisfies cond (given its group's pattern and whether it is the sink) and the merged
// group stays within the limits.
//
// The walk stops, refusing, as soon as it has seen MaxOps nodes besides src (the merged
// group would be larger) or walked pathEdgeBudget·MaxOps edges, so one call costs at
// most O(MaxOps) nodes whatever the graph.
func (p *partition) tryFuse(src, sink int, cond func(graph.Pattern, bool) bool) {
	p.seen = map[int]bool{}
	p.edges = 0
	for _, e := range p.g.out[src] {
		if !p.checkPath(e.to, sink, cond) {
			return
		}
	}
	path := map[*group]bool{p.groups[src].root(): true}
	for k := range p.seen {
		path[p.groups[k].root()] = true
	}
	if !p.withinLimits(path) {
		return
	}
	target := p.groups[sink].root()
	for g := range path {
		p.merge(g, target)
	}
}

func (p *partition) checkPath(n, sink int, cond func(graph.Pattern, bool) bool) bool {
	if p.seen[n] {
		return true
	}
	p.seen[n] = true
	if len(p.seen) >= p.lim.MaxOps {
		return false // with src, the group would exceed MaxOps members
	}
	if !cond(p.groups[n].root().pattern, n == sink) {
		return false
	}
	if n == sink {
		return true
	}
	if p.edges += len(p.g.out[n]); p.edges > pathEdgeBudget*p.lim.MaxOps {
		return false
	}
	for _, e := range p.g.out[n] {
		if !p.checkPath(e.to, sink, cond) {
			return false
		}
	}
	return true
}

func (p *partition) merge(child, parent *group) {
	child, parent = child.root(), parent.root()
	if child == parent {
		return
	}
	if child.anchor >= 0 && parent.anchor >= 0 {
		panic(fmt.Sprintf("BUG: fuse-ops merges two anchors (nodes %d and %d)", child.anchor, parent.anchor))
	}
	parent.size += child.size
	parent.members = append(parent.members, child.members...)
	child.members = nil
	parent.pattern = max(parent.pattern, child.pattern)
	if child.anchor >= 0 {
		parent.anchor = child.anchor
	}
	child.parent = parent
}

// withinLimits checks the group that merging the given groups would make.
func (p *partition) withinLimits(gs map[*group]bool) bool {
	size := 0
	anchors := 0
	for g := range gs {
		size += g.size
		if g.anchor >= 0 {
			anchors++
		}
	}
	if size > p.lim.MaxOps || anchors > 1 {
		return false
	}
	if p.lim.MaxArgs <= 0 {
		return true
	}
	in := map[*graph.Value]bool{}
	var members []int
	for g := range gs {
		members = append(members, g.members...)
	}
	inside := map[*graph.Node]bool{}
	for _, i := range members {
		inside[p.g.nodes[i]] = true
	}
	for _, i := range members {
		for _, v := range p.g.nodes[i].Inputs {
			if v != nil && (v.Def == nil || !inside[v.Def]) {
				in[v] = true
			}
		}
	}
	return len(in)+1 <= p.lim.MaxArgs
}
