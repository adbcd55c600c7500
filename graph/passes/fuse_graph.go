package passes

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

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
	out     [][]edge        // uses of the node's output by later nodes of the Func, one per consumer
	extern  []bool          // the output escapes the Func's nodes: a result, a subgraph capture
	index   map[*graph.Node]int
}

// fusible reports whether a node may join a group at all: one tensor output, no
// subgraphs, a lowerable op, no strings in or out (text runs on the host).
func fusible(n *graph.Node) bool {
	info := n.Op.Info()
	if info == nil || len(n.Outputs) != 1 || n.Outputs[0].Type.Kind != graph.KindTensor || n.Outputs[0].Type.DType == tensor.String {
		return false
	}
	for _, v := range n.Inputs {
		if v != nil && v.Type.DType == tensor.String {
			return false
		}
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
			// one edge per consumer: a node reading a value many times (a Sum of x, x,
			// ...) adds no work to the walks over edges
			if es := g.out[i]; len(es) > 0 && es[len(es)-1].to == j {
				es[len(es)-1].pattern = max(es[len(es)-1].pattern, p)
				continue
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
// least common ancestor of its consumers. Ancestors are found by binary lifting (each
// node keeps its 2^k-th ancestor and the strongest pattern on the way to it), so a
// node with many consumers costs O(consumers · log n), however deep the tree.
func postDominators(g *fwdGraph) []domNode {
	t := &domTree{nodes: make([]domNode, len(g.nodes))}
	for k := 1; k <= len(g.nodes); k *= 2 {
		t.up = append(t.up, make([]int32, len(g.nodes)))
		t.max = append(t.max, make([]graph.Pattern, len(g.nodes)))
	}
	for i := len(g.nodes) - 1; i >= 0; i-- {
		if g.extern[i] || len(g.out[i]) == 0 {
			t.set(i, domNode{parent: -1, depth: 1, pattern: graph.Opaque})
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
			parent = t.lca(parent, e.to, &pat)
		}
		d := 1
		if parent >= 0 {
			d = t.nodes[parent].depth + 1
		}
		t.set(i, domNode{parent: parent, depth: d, pattern: pat})
	}
	return t.nodes
}

// domTree is the post-dominator tree under construction with its lifting tables:
// up[k][v] is v's 2^k-th ancestor (-1: none), max[k][v] the strongest pattern of the
// nodes stepped from on the way there (v included, the ancestor not).
type domTree struct {
	nodes []domNode
	up    [][]int32
	max   [][]graph.Pattern
}

// set places node v, whose parent (a later node) is placed already.
func (t *domTree) set(v int, d domNode) {
	t.nodes[v] = d
	if len(t.up) == 0 {
		return
	}
	t.up[0][v], t.max[0][v] = int32(d.parent), d.pattern
	for k := 1; k < len(t.up); k++ {
		mid := t.up[k-1][v]
		if mid < 0 {
			t.up[k][v], t.max[k][v] = -1, t.max[k-1][v]
			continue
		}
		t.up[k][v] = t.up[k-1][mid]
		t.max[k][v] = max(t.max[k-1][v], t.max[k-1][mid])
	}
}

// lift moves a up by steps nodes, folding the patterns stepped from into pat.
func (t *domTree) lift(a, steps int, pat *graph.Pattern) int {
	for k := 0; steps > 0 && a >= 0; k++ {
		if steps&1 != 0 {
			*pat = max(*pat, t.max[k][a])
			a = int(t.up[k][a])
		}
		steps >>= 1
	}
	return a
}

// lca returns the least common ancestor of a and b (-1: none), folding into pat the
// patterns of every node stepped from on both ways up.
func (t *domTree) lca(a, b int, pat *graph.Pattern) int {
	if a < 0 || b < 0 {
		return -1
	}
	if da, db := t.nodes[a].depth, t.nodes[b].depth; da > db {
		a = t.lift(a, da-db, pat)
	} else if db > da {
		b = t.lift(b, db-da, pat)
	}
	if a == b {
		return a
	}
	for k := len(t.up) - 1; k >= 0; k-- {
		if ua, ub := t.up[k][a], t.up[k][b]; ua != ub {
			*pat = max(*pat, t.max[k][a], t.max[k][b])
			a, b = int(ua), int(ub)
		}
	}
	*pat = max(*pat, t.nodes[a].pattern, t.nodes[b].pattern)
	return t.nodes[a].parent
}
