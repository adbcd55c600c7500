package onnx

import (
	"container/heap"
	"fmt"
	"slices"
	"strings"

	"github.com/kilnrt/kiln/loader/onnx/onnxpb"
)

// sortNodes returns g's nodes in an order where each node follows the nodes of g that
// produce the values it reads, either as inputs or from inside its subgraphs (a subgraph
// may read values of every enclosing graph). ONNX requires that order, but tools emit
// models that break it (Cast nodes appended at the end of the list) and ONNX Runtime
// sorts them; so does kiln. The sort is stable: among the nodes whose inputs are ready,
// the one earliest in the file comes first, so a list already in order is unchanged.
// A name no node of g produces is left to the scope (a graph input, an initializer, an
// outer value, or an error there). A cycle is an error naming the nodes on it.
func (im *importer) sortNodes(g *onnxpb.GraphProto) ([]*onnxpb.NodeProto, error) {
	nodes := g.GetNode()
	producer := make(map[string]int, len(nodes))
	for i, np := range nodes {
		for _, o := range np.GetOutput() {
			if _, dup := producer[o]; o != "" && !dup {
				producer[o] = i
			}
		}
	}
	succ := make([][]int, len(nodes))
	indeg := make([]int, len(nodes))
	sorted := true
	for i, np := range nodes {
		for _, name := range im.nodeReads(np) {
			if p, ok := producer[name]; ok {
				succ[p] = append(succ[p], i)
				indeg[i]++
				sorted = sorted && p < i
			}
		}
	}
	if sorted {
		return nodes, nil
	}
	ready := &indexHeap{}
	for i, d := range indeg {
		if d == 0 {
			heap.Push(ready, i)
		}
	}
	order := make([]*onnxpb.NodeProto, 0, len(nodes))
	for ready.Len() > 0 {
		i := heap.Pop(ready).(int)
		order = append(order, nodes[i])
		for _, s := range succ[i] {
			if indeg[s]--; indeg[s] == 0 {
				heap.Push(ready, s)
			}
		}
	}
	if len(order) < len(nodes) {
		return nil, invalidf("the nodes form a cycle: %s", cycleString(nodes, succ, indeg))
	}
	return order, nil
}

// nodeReads lists the names np reads: its inputs and the free names of its subgraphs.
func (im *importer) nodeReads(np *onnxpb.NodeProto) []string {
	reads := slices.Clone(np.GetInput())
	for _, a := range np.GetAttribute() {
		if a.GetG() != nil {
			reads = append(reads, im.freeNames(a.GetG())...)
		}
		for _, sg := range a.GetGraphs() {
			reads = append(reads, im.freeNames(sg)...)
		}
	}
	return reads
}

// freeNames lists the names g's nodes (its subgraphs' included) read that g itself does
// not define: the values g takes from its enclosing graphs. Results are memoized, so
// nested subgraphs are walked once however deep they are.
func (im *importer) freeNames(g *onnxpb.GraphProto) []string {
	if names, ok := im.free[g]; ok {
		return names
	}
	defined := map[string]bool{"": true}
	for _, in := range g.GetInput() {
		defined[in.GetName()] = true
	}
	for _, tp := range g.GetInitializer() {
		defined[tp.GetName()] = true
	}
	for _, np := range g.GetNode() {
		for _, o := range np.GetOutput() {
			defined[o] = true
		}
	}
	var free []string
	seen := map[string]bool{}
	for _, np := range g.GetNode() {
		for _, name := range im.nodeReads(np) {
			if !defined[name] && !seen[name] {
				seen[name] = true
				free = append(free, name)
			}
		}
	}
	if im.free == nil {
		im.free = map[*onnxpb.GraphProto][]string{}
	}
	im.free[g] = free
	return free
}

// cycleString names the nodes of one cycle among the nodes a topological sort left
// (those with a positive in-degree): each of them has a predecessor among them, so
// walking predecessors from any of them must come back to a node already visited.
func cycleString(nodes []*onnxpb.NodeProto, succ [][]int, indeg []int) string {
	pred := make([]int, len(nodes))
	for i := range pred {
		pred[i] = -1
	}
	start := -1
	for p, ss := range succ {
		if indeg[p] == 0 {
			continue
		}
		for _, s := range ss {
			if indeg[s] > 0 {
				pred[s] = p
			}
		}
		if start < 0 {
			start = p
		}
	}
	if start < 0 {
		panic("BUG: cycleString called with every node sorted")
	}
	pos := map[int]int{}
	var walk []int
	for i := start; ; i = pred[i] {
		if k, seen := pos[i]; seen {
			walk = walk[k:]
			break
		}
		pos[i] = len(walk)
		walk = append(walk, i)
	}
	slices.Reverse(walk) // predecessors first
	first := slices.Index(walk, slices.Min(walk))
	walk = append(walk[first:], walk[:first]...) // from the node earliest in the file
	names := make([]string, 0, len(walk)+1)
	for _, i := range append(walk, walk[0]) {
		names = append(names, nodeLabel(nodes, i))
	}
	return strings.Join(names, " -> ")
}

// nodeLabel names node i for an error: its name, or its position and op when unnamed.
func nodeLabel(nodes []*onnxpb.NodeProto, i int) string {
	if name := nodes[i].GetName(); name != "" {
		return fmt.Sprintf("%q", name)
	}
	return fmt.Sprintf("#%d (%s)", i, nodes[i].GetOpType())
}

// indexHeap is a min-heap of node indices.
type indexHeap []int

func (h indexHeap) Len() int           { return len(h) }
func (h indexHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h indexHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *indexHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *indexHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
