package passes

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

// int64Const adds to f a constant named name holding the int64 vector v (a Slice's
// bounds, a Reshape's shape, a Pad's pads) and returns it.
func int64Const(f *graph.Func, name string, v ...int64) *graph.Value {
	c := graph.NewConst(name, tensor.MustFromSlice(tensor.Shape{len(v)}, v))
	f.Consts = append(f.Consts, c)
	return c
}

// replaceNodes rewrites every function of m node by node: a node for which rewrite
// returns nodes is replaced by them, in place, the order of the others kept; a node for
// which it returns nil stays. A function none of whose nodes is replaced keeps its node
// slice.
func replaceNodes(m *graph.Module, rewrite func(f *graph.Func, n *graph.Node) []*graph.Node) {
	m.Main.Funcs(func(f *graph.Func) {
		var nodes []*graph.Node
		for i, n := range f.Nodes {
			repl := rewrite(f, n)
			if repl == nil {
				if nodes != nil {
					nodes = append(nodes, n)
				}
				continue
			}
			if nodes == nil {
				nodes = append(make([]*graph.Node, 0, len(f.Nodes)+len(repl)), f.Nodes[:i]...)
			}
			nodes = append(nodes, repl...)
		}
		if nodes != nil {
			f.Nodes = nodes
		}
	})
}
