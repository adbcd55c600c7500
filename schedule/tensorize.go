package schedule

import (
	"fmt"

	"github.com/kilnrt/kiln/loopir"
)

// Tensorize replaces the loop nest rooted at l with a call of the tensor intrinsic in.
// The nest must be perfect (loops down to one block), have as many loops as the
// intrinsic's description, in the same order and with the same constant extents (a
// symbolic extent of the description binds to the actual one), and its block must
// compute what the description's block computes: the same statement and expression tree
// over corresponding buffers, with every access affine in the nest's loops and indexed by
// the same loops as in the description. Strides come from the actual buffers; the
// intrinsic's Unit strides must be 1. A block predicate that bounds a Partial loop
// (`outer + loop < bound`, as inexact splits produce) becomes a run-time extent; a
// predicate that does not mention the nest guards the call. An intrinsic whose block has
// an init matches only a block with the same init and all its reduction loops in the
// nest; one without matches only a block without (decompose the reduction first).
func (s *Schedule) Tensorize(l LoopRV, in *loopir.TensorIntrin) error {
	const prim = "tensorize"
	root, err := s.loop(prim, l)
	if err != nil {
		return err
	}
	call, err := s.matchIntrin(root, in)
	if err != nil {
		return s.errf(prim, "%s onto %s: %v", root.Var.Name, in.Name, err)
	}
	s.replaceLoop(root.Var, func(*loopir.For) loopir.Stmt { return call })
	s.trace.add(prim, []string{string(l)}, []string{in.Name}, nil, nil)
	return nil
}

// tileAccess is one buffer access of the description and the matching actual access.
type tileAccess struct {
	dBuf, aBuf *loopir.Buffer
	dIdx, aIdx []loopir.Expr
}

func (s *Schedule) matchIntrin(root *loopir.For, in *loopir.TensorIntrin) (loopir.Stmt, error) {
	loops, blk, ok := loopir.DescNest(root)
	if !ok {
		return nil, fmt.Errorf("the loop is not a perfect nest around one block")
	}
	dLoops, dBlk, ok := loopir.DescNest(in.Desc.Body)
	if !ok {
		panic("BUG: tensor intrinsic " + in.Name + " has a description that is not a perfect nest")
	}
	if len(loops) != len(dLoops) {
		return nil, fmt.Errorf("the nest has %d loops, the intrinsic %d", len(loops), len(dLoops))
	}
	switch {
	case dBlk.Init == nil && blk.Init != nil:
		return nil, fmt.Errorf("block %s still has its init and %s does not initialize (decompose_reduction first)", blk.Name, in.Name)
	case dBlk.Init != nil && blk.Init == nil:
		return nil, fmt.Errorf("block %s has no init and %s initializes", blk.Name, in.Name)
	}
	an := loopir.NewAnalyzer(s.f.Dims)
	for _, lp := range loopsAbove(s.f.Body, blk.Name) {
		an.BindLoop(lp.Var, lp.Min, lp.Extent)
	}
	isDescDim := map[*loopir.Var]bool{}
	for _, d := range in.Desc.Dims {
		isDescDim[d] = true
	}
	extents := make([]loopir.Expr, len(loops))
	aVars := make([]*loopir.Var, len(loops))
	dVars := make([]*loopir.Var, len(loops))
	for i, lp := range loops {
		aVars[i], dVars[i] = lp.Var, dLoops[i].Var
		if c, ok := an.Simplify(lp.Min).(*loopir.IntImm); !ok || c.V != 0 {
			return nil, fmt.Errorf("loop %s does not start at 0", lp.Var.Name)
		}
		ext := an.Simplify(lp.Extent)
		switch de := dLoops[i].Extent.(type) {
		case *loopir.IntImm:
			if c, ok := ext.(*loopir.IntImm); !ok || c.V != de.V {
				return nil, fmt.Errorf("loop %s has extent %s, the intrinsic's loop %s has %d", lp.Var.Name, loopir.ExprString(ext), dLoops[i].Var.Name, de.V)
			}
		case *loopir.Var:
			if !isDescDim[de] {
				panic("BUG: tensor intrinsic " + in.Name + " has a loop extent that is not a dim")
			}
		default:
			panic("BUG: tensor intrinsic " + in.Name + " has a loop extent that is neither constant nor a dim")
		}
		extents[i] = ext
	}
	// bodies over loop variables
	bind := func(b *loopir.Block) map[*loopir.Var]loopir.Expr {
		m := map[*loopir.Var]loopir.Expr{}
		for i, it := range b.Iters {
			m[it.Var] = b.Bindings[i]
		}
		return m
	}
	aBody := simplifyIndices(an, substituteIn(blk.Body, bind(blk)))
	dBody := substituteIn(dBlk.Body, bind(dBlk))
	m := &intrinMatcher{bufs: map[*loopir.Buffer]*loopir.Buffer{}}
	if !m.stmt(dBody, aBody) {
		return nil, fmt.Errorf("block %s does not compute what the intrinsic's block %s computes", blk.Name, dBlk.Name)
	}
	if blk.Init != nil {
		// the init runs inside the call, so the whole reduction must be in the nest
		inNest := map[*loopir.Var]bool{}
		for _, v := range aVars {
			inNest[v] = true
		}
		for i, it := range blk.Iters {
			if it.Kind != loopir.Reduction {
				continue
			}
			for _, v := range freeVars(blk.Bindings[i]) {
				if !inNest[v] {
					return nil, fmt.Errorf("reduction loop %s of block %s is outside the nest, so the call cannot own the init", v.Name, blk.Name)
				}
			}
		}
		aInit := simplifyIndices(an, substituteIn(blk.Init, bind(blk)))
		dInit := substituteIn(dBlk.Init, bind(dBlk))
		if !m.stmt(dInit, aInit) {
			return nil, fmt.Errorf("block %s's init differs from the intrinsic's", blk.Name)
		}
	}
	// per parameter of the description: tile origin and strides
	type tile struct {
		addr    *loopir.Address
		strides []loopir.Expr
	}
	tiles := map[*loopir.Buffer]tile{}
	zeroAt := func(idx []loopir.Expr) []loopir.Expr {
		z := map[*loopir.Var]loopir.Expr{}
		for _, v := range aVars {
			z[v] = loopir.Int(0)
		}
		out := make([]loopir.Expr, len(idx))
		for i, e := range idx {
			out[i] = an.Simplify(loopir.Substitute(e, z))
		}
		return out
	}
	for _, acc := range m.accesses {
		_, dc, ok := loopir.Affine(flatIndex(acc.dBuf, acc.dIdx), dVars)
		if !ok {
			panic("BUG: tensor intrinsic " + in.Name + " indexes " + acc.dBuf.Name + " non-affinely")
		}
		_, ac, ok := loopir.Affine(flatIndex(acc.aBuf, acc.aIdx), aVars)
		if !ok {
			return nil, fmt.Errorf("the access %s is not affine in the tensorized loops", loopir.ExprString(&loopir.Load{Buf: acc.aBuf, Index: acc.aIdx}))
		}
		strides := make([]loopir.Expr, len(ac))
		for t := range ac {
			strides[t] = an.Simplify(ac[t])
			dz, az := isZero(an.Simplify(dc[t])), isZero(strides[t])
			if dz != az {
				return nil, fmt.Errorf("loop %s indexes %s differently from how the intrinsic's loop %s indexes %s", aVars[t].Name, acc.aBuf.Name, dVars[t].Name, acc.dBuf.Name)
			}
		}
		t := tile{addr: &loopir.Address{Buf: acc.aBuf, Index: zeroAt(acc.aIdx)}, strides: strides}
		if prev, ok := tiles[acc.dBuf]; ok {
			if loopir.ExprString(prev.addr) != loopir.ExprString(t.addr) || loopir.ExprString(&loopir.Call{Args: prev.strides}) != loopir.ExprString(&loopir.Call{Args: t.strides}) {
				return nil, fmt.Errorf("%s is accessed at two different tiles", acc.aBuf.Name)
			}
		}
		tiles[acc.dBuf] = t
	}
	for _, p := range in.Desc.Params {
		if _, ok := tiles[p]; !ok {
			return nil, fmt.Errorf("the block never accesses the intrinsic's parameter %s", p.Name)
		}
	}
	for _, u := range in.Unit {
		p := in.Desc.Params[u[0]]
		if c, ok := tiles[p].strides[u[1]].(*loopir.IntImm); !ok || c.V != 1 {
			return nil, fmt.Errorf("%s must be contiguous along loop %s (stride %s, the intrinsic needs 1)", m.bufs[p].Name, aVars[u[1]].Name, loopir.ExprString(tiles[p].strides[u[1]]))
		}
	}
	for _, f := range in.Strides {
		p := in.Desc.Params[f[0]]
		if c, ok := tiles[p].strides[f[1]].(*loopir.IntImm); !ok || c.V != int64(f[2]) {
			return nil, fmt.Errorf("%s must have stride %d along loop %s (stride %s)", m.bufs[p].Name, f[2], aVars[f[1]].Name, loopir.ExprString(tiles[p].strides[f[1]]))
		}
	}
	guard, err := partialExtents(an, blk.Predicate, aVars, extents, in)
	if err != nil {
		return nil, err
	}
	var args []loopir.Expr
	for _, p := range in.Desc.Params {
		t := tiles[p]
		args = append(args, t.addr)
		args = append(args, t.strides...)
	}
	args = append(args, extents...)
	var out loopir.Stmt = &loopir.IntrinCall{Intrin: in, Args: args}
	if guard != nil {
		out = &loopir.IfThenElse{Cond: guard, Then: out}
	}
	return out, nil
}

// partialExtents turns the conjuncts of a block predicate into run-time extents of Partial
// loops (`base + v < bound` with v a nest loop of stride 1) and returns the conjunction
// of those that do not mention the nest, which guards the call.
func partialExtents(an *loopir.Analyzer, pred loopir.Expr, vars []*loopir.Var, extents []loopir.Expr, in *loopir.TensorIntrin) (loopir.Expr, error) {
	var guard loopir.Expr
	for _, c := range loopir.Conjuncts(pred) {
		if _, coefs, ok := loopir.Affine(c, vars); ok && allZero(an, coefs) {
			if guard == nil {
				guard = c
			} else {
				guard = loopir.Bin(loopir.And, guard, c)
			}
			continue
		}
		cmp, isCmp := c.(*loopir.Binary)
		if !isCmp || cmp.Op != loopir.LT {
			return nil, fmt.Errorf("the block predicate %s constrains the tensorized loops in a form the intrinsic cannot take", loopir.ExprString(c))
		}
		lb, lc, ok1 := loopir.Affine(cmp.A, vars)
		_, rc, ok2 := loopir.Affine(cmp.B, vars)
		if !ok1 || !ok2 || !allZero(an, rc) {
			return nil, fmt.Errorf("the block predicate %s is not of the form outer + loop < bound", loopir.ExprString(c))
		}
		which := -1
		for t, k := range lc {
			k = an.Simplify(k)
			if isZero(k) {
				continue
			}
			if one, ok := k.(*loopir.IntImm); !ok || one.V != 1 || which >= 0 {
				return nil, fmt.Errorf("the block predicate %s is not of the form outer + loop < bound", loopir.ExprString(c))
			}
			which = t
		}
		if t := which; t >= len(in.Partial) || !in.Partial[t] {
			return nil, fmt.Errorf("the block predicate %s bounds loop %s, which the intrinsic runs in full", loopir.ExprString(c), vars[which].Name)
		}
		extents[which] = an.Simplify(loopir.Bin(loopir.Min, extents[which], loopir.Bin(loopir.Sub, cmp.B, lb)))
	}
	return guard, nil
}

func allZero(an *loopir.Analyzer, es []loopir.Expr) bool {
	for _, e := range es {
		if !isZero(an.Simplify(e)) {
			return false
		}
	}
	return true
}

// flatIndex is the element offset of an index (already flat when it is one index into
// a buffer of higher rank).
func flatIndex(b *loopir.Buffer, idx []loopir.Expr) loopir.Expr {
	if len(idx) == 1 && len(b.Shape) != 1 {
		return idx[0]
	}
	return loopir.FlatIndex(b, idx)
}

// intrinMatcher compares a description body with an actual body: same tree, buffers in a
// consistent one-to-one correspondence, constants equal; indices are collected, not
// compared (their strides are checked afterwards).
type intrinMatcher struct {
	bufs     map[*loopir.Buffer]*loopir.Buffer // description → actual
	accesses []tileAccess
}

func (m *intrinMatcher) buf(d, a *loopir.Buffer, dIdx, aIdx []loopir.Expr) bool {
	if d.DT != a.DT {
		return false
	}
	if prev, ok := m.bufs[d]; ok && prev != a {
		return false
	}
	for dd, aa := range m.bufs {
		if aa == a && dd != d {
			return false
		}
	}
	m.bufs[d] = a
	m.accesses = append(m.accesses, tileAccess{dBuf: d, aBuf: a, dIdx: dIdx, aIdx: aIdx})
	return true
}

func (m *intrinMatcher) stmt(d, a loopir.Stmt) bool {
	ds, ok1 := d.(*loopir.Store)
	as, ok2 := a.(*loopir.Store)
	return ok1 && ok2 && m.buf(ds.Buf, as.Buf, ds.Index, as.Index) && m.expr(ds.Value, as.Value)
}

func (m *intrinMatcher) expr(d, a loopir.Expr) bool {
	switch d := d.(type) {
	case *loopir.Load:
		x, ok := a.(*loopir.Load)
		return ok && m.buf(d.Buf, x.Buf, d.Index, x.Index)
	case *loopir.Binary:
		x, ok := a.(*loopir.Binary)
		return ok && x.Op == d.Op && m.expr(d.A, x.A) && m.expr(d.B, x.B)
	case *loopir.FloatImm:
		x, ok := a.(*loopir.FloatImm)
		return ok && x.V == d.V && x.DT == d.DT
	case *loopir.IntImm:
		x, ok := a.(*loopir.IntImm)
		return ok && x.V == d.V && x.DT == d.DT
	case *loopir.Cast:
		x, ok := a.(*loopir.Cast)
		return ok && x.To == d.To && m.expr(d.X, x.X)
	case *loopir.Call:
		x, ok := a.(*loopir.Call)
		if !ok || x.Fn != d.Fn || len(x.Args) != len(d.Args) {
			return false
		}
		for i := range d.Args {
			if !m.expr(d.Args[i], x.Args[i]) {
				return false
			}
		}
		return true
	}
	return false
}

// simplifyIndices simplifies every load and store index (with the loop bounds an knows,
// so that split-then-packed indices like (jo*8 + ji)/8 become jo).
func simplifyIndices(an *loopir.Analyzer, st loopir.Stmt) loopir.Stmt {
	simp := func(idx []loopir.Expr) []loopir.Expr {
		out := make([]loopir.Expr, len(idx))
		for i, e := range idx {
			out[i] = an.Simplify(e)
		}
		return out
	}
	return loopir.MapStmt(st, func(e loopir.Expr) loopir.Expr {
		if l, ok := e.(*loopir.Load); ok {
			return &loopir.Load{Buf: l.Buf, Index: simp(l.Index)}
		}
		return e
	}, func(x loopir.Stmt) loopir.Stmt {
		if st, ok := x.(*loopir.Store); ok {
			return &loopir.Store{Buf: st.Buf, Index: simp(st.Index), Value: st.Value}
		}
		return nil
	})
}
