package compiler

import (
	"github.com/kilnrt/kiln/graph"
)

// maxEpilogue bounds a fused chain (an anchor and the elementwise nodes after it).
const maxEpilogue = 8

// fuser finds epilogue chains in one Func: an anchor (a convolution or matrix product,
// or an elementwise op) followed by elementwise nodes, each the only reader of the one
// before, that keep its shape and storage and read nothing computed after the anchor.
// Such a chain runs as one kernel: the intermediate values never reach memory. This is
// the epilogue half of issue #5's FuseOps (TVM's rule that a conv or matmul absorbs the
// elementwise ops after it); the general pass will replace it.
type fuser struct {
	pos      map[*graph.Node]int
	uses     map[*graph.Value]int
	consumer map[*graph.Value]*graph.Node
	fused    map[*graph.Node]bool // nodes lowered inside an earlier kernel
}

func newFuser(root, f *graph.Func) *fuser {
	fu := &fuser{pos: map[*graph.Node]int{}, uses: map[*graph.Value]int{}, consumer: map[*graph.Value]*graph.Node{}, fused: map[*graph.Node]bool{}}
	for i, n := range f.Nodes {
		fu.pos[n] = i
		for _, v := range n.Inputs {
			fu.consumer[v] = n
		}
	}
	// every read anywhere counts: a value read by a subgraph or returned is not private
	root.Funcs(func(g *graph.Func) {
		for _, n := range g.Nodes {
			for _, v := range n.Inputs {
				fu.uses[v]++
			}
		}
		for _, r := range g.Results {
			fu.uses[r] += 2
		}
	})
	return fu
}

func fusable(n *graph.Node) bool {
	info := n.Op.Info()
	return info != nil && len(n.Outputs) == 1 && len(n.Subgraphs()) == 0 && !isView(n) &&
		n.Outputs[0].Type.Kind == graph.KindTensor && info.Flags&graph.HostOnly == 0
}

func elementwise(n *graph.Node) bool {
	p := n.Op.Info().Pattern
	return fusable(n) && (p == graph.ElemWise || p == graph.Broadcast)
}

// chain returns the epilogue nodes after anchor n (empty when none).
func (fu *fuser) chain(n *graph.Node) []*graph.Node {
	if !fusable(n) || (n.Op.Info().Pattern != graph.OutEWiseFusable && !elementwise(n)) || n.Op == graph.OpLayoutTransform {
		return nil
	}
	start := fu.pos[n]
	var out []*graph.Node
	tail := n
	for len(out) < maxEpilogue {
		v := tail.Outputs[0]
		next, ok := fu.consumer[v]
		if !ok || fu.uses[v] != 1 || !elementwise(next) {
			break
		}
		self, other := -1, true
		for i, in := range next.Inputs {
			switch {
			case in == v && self < 0:
				self = i
			case in == v:
				other = false // read twice
			case in != nil && in.Def != nil:
				if p, here := fu.pos[in.Def]; here && p >= start {
					other = false // computed after the anchor: not ready when it runs
				}
			}
		}
		ot := next.Outputs[0].Type
		if self < 0 || !other || !ot.Equal(withoutKnown(v.Type)) && !sameStorage(ot, v.Type) {
			break
		}
		out = append(out, next)
		tail = next
	}
	return out
}

func withoutKnown(t graph.Type) graph.Type {
	t.Known = nil
	return t
}

// sameStorage: equal extents and storage order (the element type may change: a Cast
// or a comparison at the end of a chain).
func sameStorage(a, b graph.Type) bool {
	sa, ok1 := a.ConstShape()
	sb, ok2 := b.ConstShape()
	return ok1 && ok2 && sa.Equal(sb) && a.Block == b.Block
}
