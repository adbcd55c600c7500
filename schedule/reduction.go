package schedule

import (
	"fmt"
	"slices"

	"github.com/kilnrt/kiln/loopir"
)

// DecomposeReduction moves a reduction block's init out of its reduction loops: a new
// block "<name>_init" runs before loop l, inside copies of the spatial loops that lie
// between l and the block; the update block keeps no init. l must enclose the block and
// every reduction loop of the block must be l or inside it. The init keeps the block
// predicate's conjuncts over spatial loops and drops those over reduction loops only.
func (s *Schedule) DecomposeReduction(b BlockRV, l LoopRV) (BlockRV, error) {
	name, ok := s.blocks[b]
	if !ok {
		return "", s.errf("decompose_reduction", "unknown block %s", b)
	}
	at, err := s.loop("decompose_reduction", l)
	if err != nil {
		return "", err
	}
	blk := findBlock(s.f.Body, name)
	if blk.Init == nil {
		return "", s.errf("decompose_reduction", "block %s has no init", name)
	}
	path := loopsAbove(s.f.Body, name)
	pos := slices.IndexFunc(path, func(f *loopir.For) bool { return f.Var == at.Var })
	if pos < 0 {
		return "", s.errf("decompose_reduction", "loop %s does not enclose block %s", at.Var.Name, name)
	}
	inner := path[pos:]
	reduceVars := map[*loopir.Var]bool{}
	for i, it := range blk.Iters {
		if it.Kind == loopir.Reduction {
			for _, v := range freeVars(blk.Bindings[i]) {
				reduceVars[v] = true
			}
		}
	}
	for _, f := range path[:pos] {
		if reduceVars[f.Var] {
			return "", s.errf("decompose_reduction", "reduction loop %s is outside %s", f.Var.Name, at.Var.Name)
		}
	}
	// copy the spatial loops below l, with fresh variables
	sub := map[*loopir.Var]loopir.Expr{}
	var copies []*loopir.For
	for _, f := range inner {
		if reduceVars[f.Var] {
			continue
		}
		nv := loopir.NewVar(f.Var.Name + "_init")
		sub[f.Var] = nv
		copies = append(copies, &loopir.For{Var: nv, Min: f.Min, Extent: f.Extent, Kind: f.Kind})
	}
	initBlk := &loopir.Block{Name: name + "_init", Writes: blk.Writes, Init: nil, Body: blk.Init}
	for i, it := range blk.Iters {
		if it.Kind == loopir.Spatial {
			initBlk.Iters = append(initBlk.Iters, it)
			initBlk.Bindings = append(initBlk.Bindings, loopir.Substitute(blk.Bindings[i], sub))
		}
	}
	// the init keeps the predicate's spatial conjuncts; conjuncts over reduction loops
	// only (tails of a split reduction) do not concern it
	for _, c := range loopir.Conjuncts(blk.Predicate) {
		nRed, nAll := 0, 0
		for _, v := range freeVars(c) {
			nAll++
			if reduceVars[v] {
				nRed++
			}
		}
		switch {
		case nRed == 0:
			c = loopir.Substitute(c, sub)
			if initBlk.Predicate == nil {
				initBlk.Predicate = c
			} else {
				initBlk.Predicate = loopir.Bin(loopir.And, initBlk.Predicate, c)
			}
		case nRed < nAll:
			return "", s.errf("decompose_reduction", "block %s's predicate %s mixes reduction and spatial loops", name, loopir.ExprString(c))
		}
	}
	var initNest loopir.Stmt = initBlk
	for i := len(copies) - 1; i >= 0; i-- {
		copies[i].Body = initNest
		initNest = copies[i]
	}
	s.f.Body = loopir.MapStmt(s.f.Body, func(e loopir.Expr) loopir.Expr { return e }, func(x loopir.Stmt) loopir.Stmt {
		if bb, ok := x.(*loopir.Block); ok && bb.Name == name {
			nb := *bb
			nb.Init = nil
			return &nb
		}
		return nil
	})
	s.replaceLoop(at.Var, func(f *loopir.For) loopir.Stmt { return loopir.Seq{initNest, f} })
	out := BlockRV(fmt.Sprintf("b%d", s.next))
	s.next++
	s.blocks[out] = initBlk.Name
	s.trace.add("decompose_reduction", []string{string(b), string(l)}, nil, nil, []string{string(out)})
	return out, nil
}
