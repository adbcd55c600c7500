package passes

import (
	"strconv"

	"github.com/kilnrt/kiln/graph"
)

// freshNames hands out value names that no value of the module has: base itself, else
// base2, base3, ... The next suffix to try is kept per base, so handing out many names
// of one base costs no rescan of the taken ones. The module's names are collected on
// the first request (most runs of a pass ask for none).
type freshNames struct {
	m    *graph.Module
	used map[string]bool
	next map[string]int
}

// moduleNames hands out names fresh in m.
func moduleNames(m *graph.Module) *freshNames {
	return &freshNames{m: m}
}

// collect takes the names of every parameter, constant and node output.
func (fn *freshNames) collect() {
	fn.used, fn.next = map[string]bool{}, map[string]int{}
	fn.m.Main.Funcs(func(f *graph.Func) {
		for _, v := range f.Params {
			fn.used[v.Name] = true
		}
		for _, v := range f.Consts {
			fn.used[v.Name] = true
		}
		for _, n := range f.Nodes {
			for _, v := range n.Outputs {
				fn.used[v.Name] = true
			}
		}
	})
}

// fresh returns a name not taken yet and takes it.
func (fn *freshNames) fresh(base string) string {
	if fn.used == nil {
		fn.collect()
	}
	name := base
	if fn.used[name] {
		i := max(fn.next[base], 2)
		for name = base + strconv.Itoa(i); fn.used[name]; name = base + strconv.Itoa(i) {
			i++
		}
		fn.next[base] = i + 1
	}
	fn.used[name] = true
	return name
}
