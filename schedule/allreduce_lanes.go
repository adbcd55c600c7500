package schedule

import (
	"github.com/kilnrt/kiln/loopir"
)

// laneAnalysis tells which blocks compute the same values in every iteration of a
// thread loop (every thread of a block): those that use neither the loop's variable,
// nor a loop whose bounds do, nor a local buffer (each thread's own) that a block
// depending on them writes. Global and shared buffers read at such an index are the same
// element for every thread.
type laneAnalysis struct {
	varying map[*loopir.Var]bool
	why     map[string]string // the blocks that depend on the loop, and how (by name)
}

func newLaneAnalysis(f *loopir.PrimFunc, at *loopir.For) *laneAnalysis {
	a := &laneAnalysis{varying: map[*loopir.Var]bool{at.Var: true}, why: map[string]string{}}
	walk(at.Body, func(x loopir.Stmt) {
		if g, ok := x.(*loopir.For); ok && (a.uses(g.Min) != "" || a.uses(g.Extent) != "") {
			a.varying[g.Var] = true
		}
	})
	var blocks []*loopir.Block
	writers := map[*loopir.Buffer][]*loopir.Block{}
	walk(f.Body, func(x loopir.Stmt) {
		blk, ok := x.(*loopir.Block)
		if !ok {
			return
		}
		blocks = append(blocks, blk)
		if v := a.direct(blk); v != "" {
			a.why[blk.Name] = "uses " + v
		}
		for _, buf := range blockStores(blk) {
			writers[buf] = append(writers[buf], blk)
		}
	})
	// a block reading a thread's own buffer that a dependent block writes depends too
	for changed := true; changed; {
		changed = false
		for _, blk := range blocks {
			if a.why[blk.Name] != "" {
				continue
			}
			own := map[*loopir.Buffer]bool{}
			for _, buf := range blockStores(blk) {
				own[buf] = true
			}
			for _, buf := range blockLoads(blk) {
				if buf.Scope != loopir.ScopeLocal || own[buf] {
					continue
				}
				for _, w := range writers[buf] {
					if d := a.why[w.Name]; d != "" && a.why[blk.Name] == "" {
						a.why[blk.Name] = "reads " + buf.Name + " from block " + w.Name + ", which " + d
						changed = true
					}
				}
			}
		}
	}
	return a
}

// uses names a varying variable e reads, or "".
func (a *laneAnalysis) uses(e loopir.Expr) string {
	name := ""
	if e != nil {
		loopir.MapExpr(e, func(x loopir.Expr) loopir.Expr {
			if v, ok := x.(*loopir.Var); ok && a.varying[v] && name == "" {
				name = v.Name
			}
			return x
		})
	}
	return name
}

// direct names a varying variable in blk's bindings, predicate or statements.
func (a *laneAnalysis) direct(blk *loopir.Block) string {
	for _, e := range append(append([]loopir.Expr{}, blk.Bindings...), blk.Predicate) {
		if v := a.uses(e); v != "" {
			return v
		}
	}
	found := ""
	for _, st := range []loopir.Stmt{blk.Init, blk.Body} {
		loopir.MapStmt(st, func(e loopir.Expr) loopir.Expr {
			if v, ok := e.(*loopir.Var); ok && a.varying[v] && found == "" {
				found = v.Name
			}
			return e
		}, nil)
	}
	return found
}

// dependence says how blk depends on the thread loop, or "" when it does not.
func (a *laneAnalysis) dependence(blk *loopir.Block) string { return a.why[blk.Name] }

// private reports whether blk writes local buffers only (each thread's own).
func (a *laneAnalysis) private(blk *loopir.Block) bool {
	for _, buf := range blockStores(blk) {
		if buf.Scope != loopir.ScopeLocal {
			return false
		}
	}
	return true
}

// blockStores lists the buffers a block stores into, each once.
func blockStores(blk *loopir.Block) []*loopir.Buffer {
	var out []*loopir.Buffer
	seen := map[*loopir.Buffer]bool{}
	for _, st := range []loopir.Stmt{blk.Init, blk.Body} {
		walk(st, func(y loopir.Stmt) {
			if w, ok := y.(*loopir.Store); ok && !seen[w.Buf] {
				seen[w.Buf] = true
				out = append(out, w.Buf)
			}
		})
	}
	return out
}

// blockLoads lists the buffers a block loads from, each once.
func blockLoads(blk *loopir.Block) []*loopir.Buffer {
	var out []*loopir.Buffer
	seen := map[*loopir.Buffer]bool{}
	for _, st := range []loopir.Stmt{blk.Init, blk.Body} {
		loopir.MapStmt(st, func(e loopir.Expr) loopir.Expr {
			if l, ok := e.(*loopir.Load); ok && !seen[l.Buf] {
				seen[l.Buf] = true
				out = append(out, l.Buf)
			}
			return e
		}, nil)
	}
	return out
}
