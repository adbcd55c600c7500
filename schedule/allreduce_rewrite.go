package schedule

import (
	"fmt"
	"slices"

	"github.com/kilnrt/kiln/loopir"
)

// parts are the buffers of a reduction's state: its value, and an arg-reduction's index.
type parts struct{ val, idx *loopir.Buffer }

// newParts allocates a state of n elements in scope.
func (r reduction) newParts(name, scope string, n int64) parts {
	shape := []loopir.Expr{loopir.Int(n)}
	p := parts{val: &loopir.Buffer{Name: name, DT: r.store.Buf.DT, Shape: shape, Scope: scope}}
	if r.index != nil {
		p.idx = &loopir.Buffer{Name: name + "_index", DT: r.index.Buf.DT, Shape: shape, Scope: scope}
	}
	return p
}

// bufs lists the state's buffers.
func (p parts) bufs() []*loopir.Buffer {
	if p.idx == nil {
		return []*loopir.Buffer{p.val}
	}
	return []*loopir.Buffer{p.val, p.idx}
}

// around allocates the state's buffers around st.
func (p parts) around(st loopir.Stmt) loopir.Stmt {
	for _, b := range p.bufs() {
		st = &loopir.Allocate{Buf: b, Body: st}
	}
	return st
}

// at is the state's element i: its value and index (nil without one).
func (p parts) at(i loopir.Expr) (val, idx loopir.Expr) {
	val = &loopir.Load{Buf: p.val, Index: []loopir.Expr{i}}
	if p.idx != nil {
		idx = &loopir.Load{Buf: p.idx, Index: []loopir.Expr{i}}
	}
	return val, idx
}

// regions are the state's element i as block regions.
func (p parts) regions(i loopir.Expr) []loopir.Region {
	var out []loopir.Region
	for _, b := range p.bufs() {
		out = append(out, loopir.Region{Buf: b, Ranges: [][2]loopir.Expr{{i, loopir.Int(1)}}})
	}
	return out
}

// set stores a state (val, idx) at p's element i.
func (p parts) set(i, val, idx loopir.Expr) loopir.Stmt {
	at := []loopir.Expr{i}
	if p.idx == nil {
		return &loopir.Store{Buf: p.val, Index: at, Value: val}
	}
	return loopir.Seq{&loopir.Store{Buf: p.idx, Index: at, Value: idx}, &loopir.Store{Buf: p.val, Index: at, Value: val}}
}

// combineInto combines the element (x, k) into p's element i: p[i] ⊕ x; for an
// arg-reduction, (x, k) replaces it where x is better, or equal at a smaller index (the
// index first, and the test read again after it: a tie then no longer holds, and the
// equal value stays). Where a NaN is better than any number, two NaNs are a tie.
func (r reduction) combineInto(p parts, i, x, k loopir.Expr) loopir.Stmt {
	v, j := p.at(i)
	if p.idx == nil {
		return p.set(i, r.comb.Combine(v, x), nil)
	}
	better, equal := loopir.Bin(r.cmp, x, v), loopir.Bin(loopir.EQ, x, v)
	if r.nan {
		xNaN, vNaN := loopir.Bin(loopir.NE, x, x), loopir.Bin(loopir.NE, v, v)
		better = loopir.Bin(loopir.Or, better, loopir.Bin(loopir.And, xNaN, loopir.Bin(loopir.EQ, v, v)))
		equal = loopir.Bin(loopir.Or, equal, loopir.Bin(loopir.And, xNaN, vNaN))
	}
	take := loopir.Bin(loopir.Or, better, loopir.Bin(loopir.And, equal, loopir.Bin(loopir.LT, k, j)))
	return p.set(i, &loopir.Select{Cond: take, T: x, F: v}, &loopir.Select{Cond: take, T: k, F: j})
}

// rewrite builds what replaces the reduction nest: the thread's partial over the
// elements of the flattened domain congruent to its index, the partials into the
// shared buffers, the tree's levels, and the write-back (the block itself, spatial now).
func (r reduction) rewrite(name string, lane *loopir.Var, threads int64, nest redNest, shared parts) loopir.Stmt {
	an := loopir.NewAnalyzer(nest.dims)
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
	part := r.newParts(name+"_part", loopir.ScopeLocal, 1)
	zero := loopir.Int(0)
	blk := r.blk
	own := map[*loopir.Buffer]bool{r.store.Buf: true}
	if r.index != nil {
		own[r.index.Buf] = true
	}
	var reads []loopir.Region
	for _, rg := range blk.Reads {
		if !own[rg.Buf] {
			reads = append(reads, rg)
		}
	}
	partInit := &loopir.Block{Name: name + "_part_init", Writes: part.regions(zero), Body: part.set(zero, r.init, r.indexInit)}
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
	inIters := func(e loopir.Expr) loopir.Expr {
		if e == nil {
			return nil
		}
		return loopir.Substitute(loopir.Substitute(e, iterSub), sub)
	}
	partBlk.Reads = append(substRegions(substRegions(reads, iterSub), sub), part.regions(zero)...)
	partBlk.Writes = part.regions(zero)
	partBlk.Body = r.combineInto(part, zero, inIters(r.operand), inIters(r.at))
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
	lanes.Reads = part.regions(zero)
	lanes.Writes = shared.regions(t)
	pv, pi := part.at(zero)
	lanes.Body = shared.set(t, pv, pi)
	out := loopir.Seq{part.around(loopir.Seq{
		partInit,
		&loopir.For{Var: round, Min: loopir.Int(0), Extent: rounds, Body: partBlk},
		lanes,
	})}
	for w := threads / 2; w >= 1; w /= 2 {
		tree, t := laneBlock(fmt.Sprintf("%s_tree%d", name, w))
		other := loopir.Bin(loopir.Add, t, loopir.Int(w))
		tree.Predicate = loopir.Bin(loopir.LT, lane, loopir.Int(w))
		tree.Reads = append(shared.regions(t), shared.regions(other)...)
		tree.Writes = shared.regions(t)
		x, k := shared.at(other)
		tree.Body = r.combineInto(shared, t, x, k)
		if seq, ok := tree.Body.(loopir.Seq); ok {
			// an arg-reduction's level in two blocks, the index's then the value's: the
			// value's store follows reads of it and of the index stored before it, for
			// which loopir/passes.InsertBarriers (it cannot tell a thread's own element
			// from another's) wants a barrier: between the blocks, outside the level's
			// condition
			index := *tree
			index.Name, index.Body, index.Writes = tree.Name+"_index", seq[0], tree.Writes[1:]
			tree.Body, tree.Writes = seq[1], tree.Writes[:1]
			out = append(out, &index)
		}
		out = append(out, tree)
	}
	// the write-back: an arg-reduction's partials started from its init, which the tree
	// therefore holds already; a plain one's result is combined with its init
	rv, ri := shared.at(zero)
	wb := &loopir.Block{Name: blk.Name, Writes: blk.Writes, Reads: shared.regions(zero)}
	if r.index == nil {
		wb.Body = &loopir.Store{Buf: r.store.Buf, Index: r.store.Index, Value: r.comb.Combine(r.init, rv)}
	} else {
		wb.Body = loopir.Seq{&loopir.Store{Buf: r.index.Buf, Index: r.index.Index, Value: ri}, &loopir.Store{Buf: r.store.Buf, Index: r.store.Index, Value: rv}}
	}
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
