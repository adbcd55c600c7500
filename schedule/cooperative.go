package schedule

import "github.com/kilnrt/kiln/loopir"

// cooperativeNest rebuilds an elementwise producer block over a region of the shared
// buffer it writes, to run under the thread loops of a block: the region's elements,
// numbered row-major, are split into rounds of as many elements as the block has
// threads, and in each round thread t (its linear index over the thread loops, x
// fastest) computes element round·threads + t. One loop over the rounds remains; the
// split's inner part is the threads themselves. The block keeps its iterators, bound
// to the region's minimum plus the element's coordinates, and a predicate where the
// last round is partial or the region passes the buffer's edge.
func (s *Schedule) cooperativeNest(prim string, an *loopir.Analyzer, blk *loopir.Block, region []dimRange, threads []*loopir.For) (loopir.Stmt, error) {
	for _, it := range blk.Iters {
		if it.Kind != loopir.Spatial {
			return nil, s.errf(prim, "block %s reduces: a shared buffer is filled by an elementwise block", blk.Name)
		}
	}
	// the thread's linear index, x fastest: threads nest from z to x in any order
	order := append([]*loopir.For{}, threads...)
	axis := func(f *loopir.For) loopir.ThreadAxis { a, _ := f.Kind.Thread(); return a }
	for i := 1; i < len(order); i++ {
		for j := i; j > 0 && axis(order[j]) > axis(order[j-1]); j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
	var tid loopir.Expr = loopir.Int(0)
	n := int64(1)
	for _, f := range order {
		ext, ok := an.Simplify(f.Extent).(*loopir.IntImm)
		if !ok {
			return nil, s.errf(prim, "loop %s bound to %v has extent %s, not a constant: its threads cannot share a copy", f.Var.Name, axis(f), loopir.ExprString(f.Extent))
		}
		tid = loopir.Bin(loopir.Add, loopir.Bin(loopir.Mul, tid, ext), f.Var)
		n *= ext.V
	}
	total := int64(1)
	for _, r := range region {
		total *= r.Extent
	}
	rounds := (total + n - 1) / n
	round := loopir.NewVar(blk.Name + "_round")
	an.Bind(round, loopir.Bounds{Min: 0, Max: rounds - 1})
	flat := loopir.Bin(loopir.Add, loopir.Bin(loopir.Mul, round, loopir.Int(n)), tid)
	nb := *blk
	nb.Bindings = make([]loopir.Expr, len(blk.Iters))
	nb.Predicate = nil
	if rounds*n != total {
		nb.Predicate = loopir.Bin(loopir.LT, flat, loopir.Int(total))
	}
	stride := total
	for d, it := range blk.Iters {
		stride /= region[d].Extent
		var u loopir.Expr = loopir.Bin(loopir.Div, flat, loopir.Int(stride))
		if d > 0 {
			u = loopir.Bin(loopir.Mod, u, loopir.Int(region[d].Extent))
		}
		x := loopir.Bin(loopir.Add, region[d].Min, u)
		nb.Bindings[d] = x
		for _, c := range []loopir.Expr{loopir.Bin(loopir.GE, x, loopir.Int(0)), loopir.Bin(loopir.LT, x, it.Extent)} {
			if k, ok := an.Simplify(c).(*loopir.IntImm); ok && k.V != 0 {
				continue
			}
			if nb.Predicate == nil {
				nb.Predicate = c
			} else {
				nb.Predicate = loopir.Bin(loopir.And, nb.Predicate, c)
			}
		}
	}
	return &loopir.For{Var: round, Min: loopir.Int(0), Extent: loopir.Int(rounds), Body: &nb}, nil
}

// uniformRegion checks that a shared region is the same for every thread of a block:
// its minimum uses no loop bound to a threadIdx axis, nor a loop whose bounds do.
func (s *Schedule) uniformRegion(prim string, at *loopir.For, region []dimRange) error {
	varying := map[*loopir.Var]bool{}
	for _, f := range append(loopsAboveVar(s.f.Body, at.Var), at) {
		if a, ok := f.Kind.Thread(); ok && !a.IsBlock() {
			varying[f.Var] = true
			continue
		}
		for _, v := range append(freeVars(f.Min), freeVars(f.Extent)...) {
			if varying[v] {
				varying[f.Var] = true
			}
		}
	}
	for d, r := range region {
		for _, v := range freeVars(r.Min) {
			if varying[v] {
				return s.errf(prim, "axis %d of the shared region starts at %s, which differs between the threads of a block (loop %s)", d, loopir.ExprString(r.Min), v.Name)
			}
		}
	}
	return nil
}
