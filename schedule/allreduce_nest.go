package schedule

import (
	"slices"

	"github.com/kilnrt/kiln/loopir"
)

// redNest is the nest of a reduction block's reduction loops below a thread loop:
// loops, outermost first, and the loop all_reduce replaces (top): the first of them, or
// the outermost of the spatial loops of one iteration that hold nothing else directly
// above it (their variables are their start: unit).
type redNest struct {
	path  []*loopir.For // every loop between the thread loop and the block
	loops []*loopir.For
	top   *loopir.For
	unit  map[*loopir.Var]loopir.Expr
	dims  []*loopir.Var
}

// reductionNest finds the loops between the thread loop at and blk: spatial loops, then
// a perfect nest of loops that drive blk's reduction iterators only, with nothing but
// loops and allocations on the way (no condition, no enclosing block).
func (s *Schedule) reductionNest(prim string, at *loopir.For, blk *loopir.Block) (redNest, error) {
	chain := stmtPath(at.Body, blk.Name)
	if chain == nil {
		return redNest{}, s.errf(prim, "loop %s does not enclose block %s", at.Var.Name, blk.Name)
	}
	redVars, spVars := map[*loopir.Var]bool{}, map[*loopir.Var]bool{}
	for i, it := range blk.Iters {
		for _, v := range freeVars(blk.Bindings[i]) {
			if it.Kind == loopir.Reduction {
				redVars[v] = true
			} else {
				spVars[v] = true
			}
		}
	}
	var loops []*loopir.For
	for _, st := range chain[:len(chain)-1] {
		switch x := st.(type) {
		case *loopir.For:
			loops = append(loops, x)
		case *loopir.IfThenElse:
			return redNest{}, s.errf(prim, "block %s is under a condition below loop %s", blk.Name, at.Var.Name)
		case *loopir.Block:
			return redNest{}, s.errf(prim, "block %s is inside block %s", blk.Name, x.Name)
		}
	}
	k := slices.IndexFunc(loops, func(f *loopir.For) bool { return redVars[f.Var] })
	if k < 0 {
		return redNest{}, s.errf(prim, "no loop between %s and block %s drives its reduction", at.Var.Name, blk.Name)
	}
	for _, f := range loops[:k] {
		if f.Kind != loopir.Serial {
			return redNest{}, s.errf(prim, "loop %s around block %s's reduction is %v: the tree's barriers cannot be inside it", f.Var.Name, blk.Name, f.Kind)
		}
	}
	nest := redNest{path: loops, loops: loops[k:], top: loops[k], unit: map[*loopir.Var]loopir.Expr{}, dims: s.f.Dims}
	an := loopir.NewAnalyzer(s.f.Dims)
	for i := k - 1; i >= 0; i-- {
		f := loops[i]
		body, ok := unwrapSeq(f.Body)
		g, isLoop := body.(*loopir.For)
		if e, c := an.Simplify(f.Extent).(*loopir.IntImm); !c || e.V != 1 || !ok || !isLoop || g.Var != loops[i+1].Var {
			break
		}
		nest.top = f
		nest.unit[f.Var] = f.Min
	}
	inNest := map[*loopir.Var]bool{}
	for _, f := range nest.loops {
		inNest[f.Var] = true
	}
	for i, f := range nest.loops {
		switch {
		case !redVars[f.Var] || spVars[f.Var]:
			return redNest{}, s.errf(prim, "loop %s, inside block %s's reduction loops, drives a spatial iterator or none", f.Var.Name, blk.Name)
		case f.Kind != loopir.Serial:
			return redNest{}, s.errf(prim, "reduction loop %s is %v", f.Var.Name, f.Kind)
		}
		for _, v := range append(freeVars(f.Min), freeVars(f.Extent)...) {
			if inNest[v] {
				return redNest{}, s.errf(prim, "the bounds of reduction loop %s depend on loop %s", f.Var.Name, v.Name)
			}
		}
		body, ok := unwrapSeq(f.Body)
		if i+1 < len(nest.loops) {
			g, isLoop := body.(*loopir.For)
			ok = ok && isLoop && g.Var == nest.loops[i+1].Var
		} else {
			b, isBlock := body.(*loopir.Block)
			ok = ok && isBlock && b.Name == blk.Name
		}
		if !ok {
			return redNest{}, s.errf(prim, "reduction loop %s holds more than block %s's reduction", f.Var.Name, blk.Name)
		}
	}
	for _, f := range loops[:k] {
		if redVars[f.Var] {
			return redNest{}, s.errf(prim, "spatial loop %s of block %s is inside a reduction loop", f.Var.Name, blk.Name)
		}
	}
	return nest, nil
}

// unwrapSeq looks through sequences of one statement.
func unwrapSeq(st loopir.Stmt) (loopir.Stmt, bool) {
	for {
		seq, ok := st.(loopir.Seq)
		if !ok {
			return st, true
		}
		if len(seq) != 1 {
			return nil, false
		}
		st = seq[0]
	}
}

// stmtPath is the chain of statements from st down to the named block (the block
// last), or nil when st does not hold it.
func stmtPath(st loopir.Stmt, name string) []loopir.Stmt {
	switch x := st.(type) {
	case loopir.Seq:
		for _, c := range x {
			if p := stmtPath(c, name); p != nil {
				return p
			}
		}
		return nil
	case *loopir.For:
		if p := stmtPath(x.Body, name); p != nil {
			return append([]loopir.Stmt{x}, p...)
		}
	case *loopir.Allocate:
		if p := stmtPath(x.Body, name); p != nil {
			return append([]loopir.Stmt{x}, p...)
		}
	case *loopir.IfThenElse:
		for _, c := range []loopir.Stmt{x.Then, x.Else} {
			if p := stmtPath(c, name); p != nil {
				return append([]loopir.Stmt{x}, p...)
			}
		}
	case *loopir.Block:
		if x.Name == name {
			return []loopir.Stmt{x}
		}
		for _, c := range []loopir.Stmt{x.Init, x.Body} {
			if p := stmtPath(c, name); p != nil {
				return append([]loopir.Stmt{x}, p...)
			}
		}
	}
	return nil
}
