package passes

import "github.com/kilnrt/kiln/graph"

// DCE removes nodes none of whose outputs is read (by a later node, a subgraph, or a
// result) and constants nobody reads, in every Func.
func DCE(_ *Context, m *graph.Module) error {
	for {
		used := map[*graph.Value]bool{}
		m.Main.Funcs(func(f *graph.Func) {
			for _, n := range f.Nodes {
				for _, v := range n.Inputs {
					used[v] = true
				}
			}
			for _, r := range f.Results {
				used[r] = true
			}
		})
		removed := false
		m.Main.Funcs(func(f *graph.Func) {
			nodes := f.Nodes[:0:0]
			for _, n := range f.Nodes {
				live := false
				for _, o := range n.Outputs {
					live = live || used[o]
				}
				if live {
					nodes = append(nodes, n)
				} else {
					removed = true
				}
			}
			f.Nodes = nodes
			consts := f.Consts[:0:0]
			for _, c := range f.Consts {
				if used[c] {
					consts = append(consts, c)
				} else {
					removed = true
				}
			}
			f.Consts = consts
		})
		if !removed {
			return nil
		}
	}
}
