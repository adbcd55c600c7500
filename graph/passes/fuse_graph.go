package passes

import "github.com/kilnrt/kiln/graph"

// The indexed forward graph and post-dominator tree that fuse-ops works on (TVM's
// IndexedForwardGraph and DominatorTree, rebuilt here over one graph.Func).

// edge is a use of node `from`'s output by node `to`, with the pattern of that use.
type edge struct {
	to      int
	pattern graph.Pattern
}

// fwdGraph indexes one Func's nodes in topological order.
type fwdGraph struct {
	nodes   []*graph.Node
	pattern []graph.Pattern // each node's own pattern (Opaque when it cannot be fused)
	out     [][]edge        // uses of the node's output by later nodes of the Func
	extern  []bool          // the output escapes the Func's nodes: a result, a subgraph capture
	index   map[*graph.Node]int
}

// fusible reports whether a node may join a group at all: one tensor output, no
// subgraphs, a lowerable op.
func fusible(n *graph.Node) bool {
	info := n.Op.Info()
	if info == nil || len(n.Outputs) != 1 || n.Outputs[0].Type.Kind != graph.KindTensor {
		return false
	}
	return info.Flags&(graph.HasSubgraphs|graph.HostOnly|graph.DataDependent|graph.Stochastic) == 0 &&
		info.Pattern != graph.Opaque
}

func newFwdGraph(f *graph.Func, readers map[*graph.Value]int) *fwdGraph {
	g := &fwdGraph{nodes: f.Nodes, index: map[*graph.Node]int{}}
	n := len(f.Nodes)
	g.pattern = make([]graph.Pattern, n)
	g.out = make([][]edge, n)
	g.extern = make([]bool, n)
	for i, nd := range f.Nodes {
		g.index[nd] = i
		g.pattern[i] = graph.Opaque
		if fusible(nd) {
			g.pattern[i] = nd.Op.Info().Pattern
		}
	}
	local := map[*graph.Value]int{} // reads by this Func's own nodes
	for j, nd := range f.Nodes {
		out := nd.Outputs
		for _, v := range nd.Inputs {
			if v == nil || v.Def == nil {
				continue
			}
			i, ok := g.index[v.Def]
			if !ok {
				continue // a value of an enclosing Func
			}
			local[v]++
			p := g.pattern[j]
			// a broadcasting op reads an input of its own shape elementwise
			if p == graph.Broadcast && len(out) == 1 && v.Type.Equal(out[0].Type) { // Equal ignores Known
				p = graph.ElemWise
			}
			g.out[i] = append(g.out[i], edge{to: j, pattern: p})
		}
	}
	for _, r := range f.Results {
		if r.Def != nil {
			if i, ok := g.index[r.Def]; ok {
				g.extern[i] = true
			}
		}
	}
	for i, nd := range f.Nodes {
		for _, o := range nd.Outputs {
			if readers[o] != local[o] { // read by a nested Func
				g.extern[i] = true
			}
		}
		if len(nd.Outputs) != 1 {
			g.extern[i] = true
		}
	}
	return g
}

// domNode is a node's place in the post-dominator tree: parent is the nearest node every
// path from it to the Func's end passes through (-1: none), pattern the strongest
// pattern met on the way there.
type domNode struct {
	parent  int
	depth   int
	pattern graph.Pattern
}

// postDominators builds the tree in reverse topological order: a node's parent is the
// least common ancestor of its consumers.
func postDominators(g *fwdGraph) []domNode {
	t := make([]domNode, len(g.nodes))
	for i := len(g.nodes) - 1; i >= 0; i-- {
		if g.extern[i] || len(g.out[i]) == 0 {
			t[i] = domNode{parent: -1, depth: 1, pattern: graph.Opaque}
			continue
		}
		pat := graph.ElemWise
		parent := -1
		for k, e := range g.out[i] {
			pat = max(pat, e.pattern)
			if k == 0 {
				parent = e.to
				continue
			}
			parent = lca(t, parent, e.to, &pat)
		}
		d := 1
		if parent >= 0 {
			d = t[parent].depth + 1
		}
		t[i] = domNode{parent: parent, depth: d, pattern: pat}
	}
	return t
}

func lca(t []domNode, a, b int, pat *graph.Pattern) int {
	for a != b {
		if a < 0 || b < 0 {
			return -1
		}
		switch {
		case t[a].depth < t[b].depth:
			*pat = max(*pat, t[b].pattern)
			b = t[b].parent
		case t[b].depth < t[a].depth:
			*pat = max(*pat, t[a].pattern)
			a = t[a].parent
		default:
			*pat = max(*pat, t[a].pattern, t[b].pattern)
			a, b = t[a].parent, t[b].parent
		}
	}
	return a
}
