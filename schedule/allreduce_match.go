package schedule

import (
	"slices"

	"github.com/kilnrt/kiln/loopir"
)

// reduction is a block matched by matchReduction: its init stores init at the
// accumulator's element, its update combines that element with operand; or, for an
// arg-reduction (index set), a pair of elements, a value and its index, which the
// update replaces by (operand, at) where operand is better (cmp: GT for a maximum, LT
// for a minimum), the index first, while the old value is still there.
type reduction struct {
	blk     *loopir.Block
	store   *loopir.Store // the value's update
	init    loopir.Expr
	comb    loopir.Combiner
	operand loopir.Expr
	// arg-reductions
	index     *loopir.Store // the index's update
	indexInit loopir.Expr
	cmp       loopir.BinOp
	at        loopir.Expr // the index of the element operand
	nan       bool        // a NaN is better than any number (a float arg-reduction)
}

// matchReduction checks that blk is a reduction by an associative and commutative
// combiner of one element (init buf[i] = v; update buf[i] = buf[i] ⊕ operand), or an
// arg-reduction (matchArg).
func (s *Schedule) matchReduction(prim string, blk *loopir.Block) (reduction, error) {
	r := reduction{blk: blk}
	hasRed := false
	for _, it := range blk.Iters {
		hasRed = hasRed || it.Kind == loopir.Reduction
	}
	if !hasRed || blk.Init == nil {
		return r, s.errf(prim, "block %s is not a reduction with an init", blk.Name)
	}
	if a, ok := matchArg(blk); ok {
		return a, nil
	}
	init, ok1 := single(blk.Init)
	upd, ok2 := single(blk.Body)
	if !ok1 || !ok2 || init.Buf != upd.Buf || !slices.EqualFunc(init.Index, upd.Index, loopir.Equal) {
		return r, s.errf(prim, "block %s does not store one element in its init and its update, nor an arg-reduction's value and index", blk.Name)
	}
	r.store, r.init = upd, init.Value
	bin, ok := upd.Value.(*loopir.Binary)
	combs := map[loopir.BinOp]loopir.Combiner{loopir.Add: loopir.SumReduce, loopir.Mul: loopir.ProdReduce, loopir.Max: loopir.MaxReduce, loopir.Min: loopir.MinReduce}
	if ok {
		r.comb, ok = combs[bin.Op]
	}
	self := func(e loopir.Expr) bool {
		l, ok := e.(*loopir.Load)
		return ok && l.Buf == upd.Buf && slices.EqualFunc(l.Index, upd.Index, loopir.Equal)
	}
	switch {
	case !ok:
		return r, s.errf(prim, "block %s's update %s is not a sum, product, max or min", blk.Name, loopir.ExprString(upd.Value))
	case self(bin.A):
		r.operand = bin.B
	case self(bin.B):
		r.operand = bin.A
	default:
		return r, s.errf(prim, "block %s's update does not combine its own element", blk.Name)
	}
	if loopir.Reads(r.operand, upd.Buf) || loopir.Reads(r.init, upd.Buf) {
		return r, s.errf(prim, "block %s's operand reads its accumulator %s", blk.Name, upd.Buf.Name)
	}
	return r, nil
}

// matchArg recognizes an arg-reduction as te lowers it: init value = the identity of
// the max (or min) and index = a constant; update
//
//	index[i] = select(x > value[i], k, index[i])
//	value[i] = select(x > value[i], x, value[i])
//
// (< for a minimum), x and k reading neither buffer; on floats the test is
// x > value[i] || (x != x && value[i] == value[i]) (a NaN is better than any number).
// A thread's elements come in increasing k, so "strictly better" keeps the first of
// equal ones, as the whole scan does; the tree breaks ties by the smaller index.
func matchArg(blk *loopir.Block) (reduction, bool) {
	inits, ok1 := blk.Init.(loopir.Seq)
	upds, ok2 := blk.Body.(loopir.Seq)
	if !ok1 || !ok2 || len(inits) != 2 || len(upds) != 2 {
		return reduction{}, false
	}
	idx, ok1 := upds[0].(*loopir.Store)
	val, ok2 := upds[1].(*loopir.Store)
	if !ok1 || !ok2 || idx.Buf == val.Buf || !slices.EqualFunc(idx.Index, val.Index, loopir.Equal) {
		return reduction{}, false
	}
	load := func(e loopir.Expr, st *loopir.Store) bool {
		l, ok := e.(*loopir.Load)
		return ok && l.Buf == st.Buf && slices.EqualFunc(l.Index, st.Index, loopir.Equal)
	}
	si, ok1 := idx.Value.(*loopir.Select)
	sv, ok2 := val.Value.(*loopir.Select)
	if !ok1 || !ok2 || !loopir.Equal(si.Cond, sv.Cond) || !load(si.F, idx) || !load(sv.F, val) {
		return reduction{}, false
	}
	cond, ok := si.Cond.(*loopir.Binary)
	nan := false
	if ok && cond.Op == loopir.Or {
		// the float form: (x cmp v) || (x != x && v == v)
		both, isAnd := cond.B.(*loopir.Binary)
		var isNaN, notNaN *loopir.Binary
		if isAnd && both.Op == loopir.And {
			isNaN, _ = both.A.(*loopir.Binary)
			notNaN, _ = both.B.(*loopir.Binary)
		}
		if isNaN == nil || notNaN == nil || isNaN.Op != loopir.NE || notNaN.Op != loopir.EQ {
			return reduction{}, false
		}
		cond, ok = cond.A.(*loopir.Binary)
		if !ok || !loopir.Equal(isNaN.A, cond.A) || !loopir.Equal(isNaN.B, cond.A) || !load(notNaN.A, val) || !load(notNaN.B, val) {
			return reduction{}, false
		}
		nan = true
	}
	if !ok || (cond.Op != loopir.GT && cond.Op != loopir.LT) || !load(cond.B, val) || !loopir.Equal(cond.A, sv.T) {
		return reduction{}, false
	}
	for _, e := range []loopir.Expr{cond.A, si.T} {
		if loopir.Reads(e, idx.Buf) || loopir.Reads(e, val.Buf) {
			return reduction{}, false
		}
	}
	comb := loopir.MaxReduce
	if cond.Op == loopir.LT {
		comb = loopir.MinReduce
	}
	r := reduction{blk: blk, store: val, comb: comb, operand: cond.A, index: idx, cmp: cond.Op, at: si.T, nan: nan}
	for _, st := range inits {
		w, ok := st.(*loopir.Store)
		if !ok || !slices.EqualFunc(w.Index, idx.Index, loopir.Equal) {
			return reduction{}, false
		}
		switch {
		case w.Buf == val.Buf && loopir.Equal(w.Value, comb.Identity(val.Buf.DT)):
			r.init = w.Value
		case w.Buf == idx.Buf:
			if _, ok := w.Value.(*loopir.IntImm); !ok {
				return reduction{}, false
			}
			r.indexInit = w.Value
		}
	}
	return r, r.init != nil && r.indexInit != nil
}

// single is the one store of st, looking through sequences of one statement.
func single(st loopir.Stmt) (*loopir.Store, bool) {
	for {
		seq, ok := st.(loopir.Seq)
		if !ok || len(seq) != 1 {
			break
		}
		st = seq[0]
	}
	w, ok := st.(*loopir.Store)
	return w, ok
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
