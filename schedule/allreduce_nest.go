package schedule

import (
	"fmt"
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

// checkAccumulator checks that the accumulator's index and the init value depend on
// no reduction iterator or loop: one element per iteration of the spatial loops.
func (s *Schedule) checkAccumulator(prim string, r reduction, nest redNest) error {
	red := map[*loopir.Var]bool{}
	for _, it := range r.blk.Iters {
		if it.Kind == loopir.Reduction {
			red[it.Var] = true
		}
	}
	for _, f := range nest.loops {
		red[f.Var] = true
	}
	for _, e := range append(slices.Clone(r.store.Index), r.init) {
		for _, v := range freeVars(e) {
			if red[v] {
				return s.errf(prim, "block %s's accumulator index or init value depends on reduction variable %s", r.blk.Name, v.Name)
			}
		}
	}
	return nil
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

// rewrite builds what replaces the reduction nest: the thread's partial over the
// elements of the flattened domain congruent to its index, the partials into the
// shared buffer, the tree's levels, and the write-back (the block itself, spatial now).
func (r reduction) rewrite(name string, lane *loopir.Var, threads int64, nest redNest, shared *loopir.Buffer) loopir.Stmt {
	an := loopir.NewAnalyzer(nest.dims)
	dt := r.store.Buf.DT
	var total loopir.Expr = loopir.Int(1)
	for _, f := range nest.loops {
		total = loopir.Bin(loopir.Mul, total, f.Extent)
	}
	total = an.Simplify(total)
	T := loopir.Int(threads)
	round := loopir.NewVar(name + "_round")
	rounds := an.Simplify(loopir.Bin(loopir.Div, loopir.Bin(loopir.Add, total, loopir.Int(threads-1)), T))
	flat := loopir.Bin(loopir.Add, loopir.Bin(loopir.Mul, round, T), lane)
	// loop j's variable is its min plus digit j of flat in the mixed radix of the extents
	sub := map[*loopir.Var]loopir.Expr{}
	var stride loopir.Expr = loopir.Int(1)
	for j := len(nest.loops) - 1; j >= 0; j-- {
		f := nest.loops[j]
		digit := loopir.Bin(loopir.Div, flat, stride)
		if j > 0 {
			digit = loopir.Bin(loopir.Mod, digit, f.Extent)
		}
		sub[f.Var] = an.Simplify(loopir.Bin(loopir.Add, f.Min, digit))
		stride = loopir.Bin(loopir.Mul, stride, f.Extent)
	}
	part := &loopir.Buffer{Name: name + "_part", DT: dt, Shape: []loopir.Expr{loopir.Int(1)}, Scope: loopir.ScopeLocal}
	zero := []loopir.Expr{loopir.Int(0)}
	one := func(b *loopir.Buffer, at loopir.Expr) loopir.Region {
		return loopir.Region{Buf: b, Ranges: [][2]loopir.Expr{{at, loopir.Int(1)}}}
	}
	blk := r.blk
	var reads []loopir.Region
	for _, rg := range blk.Reads {
		if rg.Buf != r.store.Buf {
			reads = append(reads, rg)
		}
	}
	partInit := &loopir.Block{Name: name + "_part_init", Writes: []loopir.Region{one(part, loopir.Int(0))},
		Body: &loopir.Store{Buf: part, Index: zero, Value: r.comb.Identity(dt)}}
	// the partial keeps b's spatial iterators; its own are the thread (spatial: each
	// thread's partial is its own) and the round (its reduction), b's reduction
	// iterators becoming expressions of them
	laneIt := loopir.IterVar{Var: loopir.NewVar(name + "_t"), Extent: T, Kind: loopir.Spatial}
	roundIt := loopir.IterVar{Var: loopir.NewVar(name + "_k"), Extent: rounds, Kind: loopir.Reduction}
	toIters := map[*loopir.Var]loopir.Expr{lane: laneIt.Var, round: roundIt.Var}
	partBlk := &loopir.Block{Name: name + "_part"}
	iterSub := map[*loopir.Var]loopir.Expr{}
	for i, it := range blk.Iters {
		if it.Kind == loopir.Reduction {
			iterSub[it.Var] = loopir.Substitute(loopir.Substitute(blk.Bindings[i], sub), toIters)
			continue
		}
		partBlk.Iters = append(partBlk.Iters, it)
		partBlk.Bindings = append(partBlk.Bindings, blk.Bindings[i])
	}
	partBlk.Iters = append(partBlk.Iters, laneIt, roundIt)
	partBlk.Bindings = append(partBlk.Bindings, lane, round)
	inIters := func(e loopir.Expr) loopir.Expr { return loopir.Substitute(loopir.Substitute(e, iterSub), sub) }
	partBlk.Reads = append(substRegions(substRegions(reads, iterSub), sub), one(part, loopir.Int(0)))
	partBlk.Writes = []loopir.Region{one(part, loopir.Int(0))}
	partBlk.Body = &loopir.Store{Buf: part, Index: zero,
		Value: r.comb.Combine(&loopir.Load{Buf: part, Index: zero}, inIters(r.operand))}
	// the block's predicate holds for a part (over reduction variables) or the whole of a
	// reduction (over the others): the partial's elements or the write-back
	redVar := map[*loopir.Var]bool{}
	for _, it := range blk.Iters {
		redVar[it.Var] = it.Kind == loopir.Reduction
	}
	for _, f := range nest.loops {
		redVar[f.Var] = true
	}
	var wbPred loopir.Expr
	for _, c := range loopir.Conjuncts(blk.Predicate) {
		partBlk.Predicate = and(partBlk.Predicate, loopir.Substitute(c, sub))
		if !slices.ContainsFunc(freeVars(c), func(v *loopir.Var) bool { return redVar[v] }) {
			wbPred = and(wbPred, c)
		}
	}
	if c, ok := an.Simplify(loopir.Bin(loopir.Mul, rounds, T)).(*loopir.IntImm); !ok || !loopir.Equal(c, total) {
		partBlk.Predicate = and(partBlk.Predicate, loopir.Bin(loopir.LT, flat, total))
	}
	laneBlock := func(bname string) (*loopir.Block, loopir.Expr) {
		it := loopir.IterVar{Var: loopir.NewVar(name + "_lane"), Extent: T, Kind: loopir.Spatial}
		return &loopir.Block{Name: bname, Iters: []loopir.IterVar{it}, Bindings: []loopir.Expr{lane}}, it.Var
	}
	lanes, t := laneBlock(name + "_lanes")
	lanes.Reads = []loopir.Region{one(part, loopir.Int(0))}
	lanes.Writes = []loopir.Region{one(shared, t)}
	lanes.Body = &loopir.Store{Buf: shared, Index: []loopir.Expr{t}, Value: &loopir.Load{Buf: part, Index: zero}}
	out := loopir.Seq{&loopir.Allocate{Buf: part, Body: loopir.Seq{
		partInit,
		&loopir.For{Var: round, Min: loopir.Int(0), Extent: rounds, Body: partBlk},
		lanes,
	}}}
	for w := threads / 2; w >= 1; w /= 2 {
		tree, t := laneBlock(fmt.Sprintf("%s_tree%d", name, w))
		other := loopir.Bin(loopir.Add, t, loopir.Int(w))
		tree.Predicate = loopir.Bin(loopir.LT, lane, loopir.Int(w))
		tree.Reads = []loopir.Region{one(shared, t), one(shared, other)}
		tree.Writes = []loopir.Region{one(shared, t)}
		tree.Body = &loopir.Store{Buf: shared, Index: []loopir.Expr{t},
			Value: r.comb.Combine(&loopir.Load{Buf: shared, Index: []loopir.Expr{t}}, &loopir.Load{Buf: shared, Index: []loopir.Expr{other}})}
		out = append(out, tree)
	}
	wb := &loopir.Block{Name: blk.Name, Writes: blk.Writes,
		Reads: []loopir.Region{one(shared, loopir.Int(0))},
		Body: &loopir.Store{Buf: r.store.Buf, Index: r.store.Index,
			Value: r.comb.Combine(r.init, &loopir.Load{Buf: shared, Index: zero})}}
	for _, rg := range reads {
		if loopir.Reads(r.init, rg.Buf) {
			wb.Reads = append(wb.Reads, rg)
		}
	}
	for i, it := range blk.Iters {
		if it.Kind == loopir.Spatial {
			wb.Iters = append(wb.Iters, it)
			wb.Bindings = append(wb.Bindings, blk.Bindings[i])
		}
	}
	wb.Predicate = wbPred
	if r.store.Buf.Scope != loopir.ScopeLocal {
		wb.Predicate = and(wb.Predicate, loopir.Bin(loopir.EQ, lane, loopir.Int(0)))
	}
	return substituteIn(append(out, wb), nest.unit)
}

// and conjoins c to p (nil: true).
func and(p, c loopir.Expr) loopir.Expr {
	if p == nil {
		return c
	}
	return loopir.Bin(loopir.And, p, c)
}
