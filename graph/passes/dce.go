package passes

import (
	"slices"

	"github.com/kilnrt/kiln/graph"
)

// DCE removes nodes none of whose outputs is read (by a later live node, a subgraph of
// a live node, or a result) and constants nobody live reads, in every Func. One backward
// walk decides it (liveness), so a dead chain of any length goes in linear time.
func DCE(_ *Context, m *graph.Module) error {
	l := newLiveness(false)
	l.fn(m.Main)
	m.Main.Funcs(func(f *graph.Func) {
		// Funcs descends into the nodes kept here, so dead nodes' subgraphs are skipped
		f.Nodes = slices.DeleteFunc(f.Nodes, func(n *graph.Node) bool { return !l.live[n] })
		f.Consts = slices.DeleteFunc(f.Consts, func(c *graph.Value) bool { return !l.used[c] })
	})
	return nil
}

// liveness marks the nodes whose outputs reach a Func result, walking each Func from its
// last node back: a node is live when one of its outputs is used, and a live node uses
// its inputs. A node's subgraphs are walked at the node's place (their nodes read only
// values defined before it), so every reader of a value is seen before its definition.
type liveness struct {
	used map[*graph.Value]bool
	live map[*graph.Node]bool
	// deadBodies also walks the subgraphs of dead nodes, their results counting as
	// uses (recognize's view: it removes nothing, dce does that later)
	deadBodies bool
}

func newLiveness(deadBodies bool) *liveness {
	return &liveness{used: map[*graph.Value]bool{}, live: map[*graph.Node]bool{}, deadBodies: deadBodies}
}

func (l *liveness) fn(f *graph.Func) {
	for _, r := range f.Results {
		l.used[r] = true
	}
	for i := len(f.Nodes) - 1; i >= 0; i-- {
		n := f.Nodes[i]
		live := slices.ContainsFunc(n.Outputs, func(o *graph.Value) bool { return l.used[o] })
		if live {
			l.live[n] = true
			for _, v := range n.Inputs {
				l.used[v] = true
			}
		}
		if live || l.deadBodies {
			for _, sub := range n.Subgraphs() {
				l.fn(sub)
			}
		}
	}
}
