package passes

import (
	"fmt"
	"hash/maphash"
	"slices"

	"github.com/kilnrt/kiln/graph"
)

// CSE merges nodes that compute the same thing: same op, equal attributes, the same
// input values, equal output types (sameTypes; nodes with subgraphs and random ops
// excluded). The later node's readers read the earlier node's outputs; dce removes it.
// Results keep their own nodes.
//
// Nodes are bucketed by op, printed attributes, output count and a hash of their input
// values, and compared input by input within a bucket, so a node costs time linear in
// its inputs however many it has.
func CSE(_ *Context, m *graph.Module) error {
	results := resultSet(m)
	fwd := forwarding{}
	seed := maphash.MakeSeed()
	m.Main.Funcs(func(f *graph.Func) {
		seen := map[cseKey][]*graph.Node{}
		for _, n := range f.Nodes {
			fwd.rewire(n)
			info := n.Op.Info()
			if info == nil || info.Flags&(graph.HasSubgraphs|graph.Stochastic) != 0 {
				continue
			}
			key := newCSEKey(seed, n)
			i := slices.IndexFunc(seen[key], func(o *graph.Node) bool { return slices.Equal(o.Inputs, n.Inputs) })
			if i < 0 {
				seen[key] = append(seen[key], n)
				continue
			}
			first := seen[key][i]
			keep := true
			for _, o := range n.Outputs {
				keep = keep && !results[o]
			}
			if !keep || !sameTypes(first.Outputs, n.Outputs) {
				continue
			}
			for i, o := range n.Outputs {
				fwd[o] = first.Outputs[i]
			}
		}
	})
	return nil
}

// cseKey buckets nodes that may compute the same thing; equal inputs decide.
type cseKey struct {
	op     graph.Op
	attrs  string
	outs   int
	ins    int
	inHash uint64
}

func newCSEKey(seed maphash.Seed, n *graph.Node) cseKey {
	h := uint64(len(n.Inputs))
	for _, v := range n.Inputs {
		h = (h ^ maphash.Comparable(seed, v)) * 0x100000001b3
	}
	return cseKey{op: n.Op, attrs: fmt.Sprintf("%#v", n.Attrs), outs: len(n.Outputs), ins: len(n.Inputs), inHash: h}
}

// sameTypes reports whether two nodes' outputs have equal types and known values.
// Nodes that compute the same thing can still differ in type where inference gave each
// output a fresh symbol (NonZero's count, a Reshape to a run-time shape): merging them
// would leave the later node's readers typed with a symbol nothing binds any more, so
// such nodes stay apart.
func sameTypes(a, b []*graph.Value) bool {
	return slices.EqualFunc(a, b, func(x, y *graph.Value) bool {
		return x.Type.Equal(y.Type) && slices.EqualFunc(x.Type.Known, y.Type.Known, graph.Dim.Equal)
	})
}
