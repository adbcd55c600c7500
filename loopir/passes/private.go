package passes

import (
	"github.com/kilnrt/kiln/loopir"
)

// maxPrivate is the most elements a thread's private copy of a buffer may hold: private
// memory is registers (and what spills of them), a few hundred words per thread.
const maxPrivate = 1024

// PrivatizeLocal gives every thread of a GPU kernel its own copy of a local buffer: an
// allocation of scope "local" around loops bound to thread axes moves inside the
// innermost of them on the way to the buffer's accesses (through allocations and
// through the one statement of a sequence that touches the buffer), and shrinks to the
// region one thread accesses there: per axis, each index must be affine in the loops
// below that point with constant coefficients and bounds, and the indices must differ
// from each other by constants; the buffer's shape becomes the region's extents and
// every index is rebased to it. A buffer whose region is not of that form, larger than
// maxPrivate elements, with strides, or taken by address keeps its allocation (and
// DeriveLaunch refuses the kernel).
//
// This is the meaning of "local" on a GPU: the iterations of a bound loop are threads
// that run at once, so a schedule that is correct for them never passes a value from
// one iteration to another through a local buffer (compute_at computes, in every
// iteration, what that iteration reads); each thread then needs only its own part.
// Runs after LowerBlocks (indices are over loop variables) and before Flatten.
func PrivatizeLocal(f *loopir.PrimFunc) *loopir.PrimFunc {
	an := loopir.NewAnalyzer(f.Dims)
	body := loopir.MapStmt(f.Body, func(e loopir.Expr) loopir.Expr { return e }, func(s loopir.Stmt) loopir.Stmt {
		a, ok := s.(*loopir.Allocate)
		if !ok || a.Buf.Scope != "local" || a.Buf.Strides != nil {
			return nil
		}
		if r, ok := privatize(an, a); ok {
			return r
		}
		return nil
	})
	return &loopir.PrimFunc{Name: f.Name, Params: f.Params, Dims: f.Dims, Body: body, NoContract: f.NoContract}
}

// privatize moves allocation a below the bound loops on the way to its accesses and
// shrinks it; ok is false when there is no bound loop on the way or the region does
// not qualify.
func privatize(an *loopir.Analyzer, a *loopir.Allocate) (loopir.Stmt, bool) {
	buf := a.Buf
	bound := 0
	var sink func(s loopir.Stmt) (loopir.Stmt, bool)
	sink = func(s loopir.Stmt) (loopir.Stmt, bool) {
		switch x := s.(type) {
		case *loopir.For:
			if _, ok := x.Kind.Thread(); ok {
				bound++
				an.BindLoop(x.Var, x.Min, x.Extent)
				b, ok := sink(x.Body)
				if !ok {
					return nil, false
				}
				return &loopir.For{Var: x.Var, Min: x.Min, Extent: x.Extent, Kind: x.Kind, Body: b, Annotations: x.Annotations}, true
			}
		case *loopir.Allocate:
			b, ok := sink(x.Body)
			if !ok {
				return nil, false
			}
			return &loopir.Allocate{Buf: x.Buf, Body: b}, true
		case loopir.Seq:
			at := -1
			for i, c := range x {
				if touches(c, buf) {
					if at >= 0 {
						at = -1
						break
					}
					at = i
				}
			}
			if at >= 0 {
				b, ok := sink(x[at])
				if !ok {
					return nil, false
				}
				out := append(loopir.Seq{}, x...)
				out[at] = b
				return out, true
			}
		}
		if bound == 0 || hasBoundLoop(s) {
			return nil, false
		}
		return shrink(an, buf, s)
	}
	return sink(a.Body)
}

// shrink allocates buf around s over the region s accesses (see PrivatizeLocal).
func shrink(an *loopir.Analyzer, buf *loopir.Buffer, s loopir.Stmt) (loopir.Stmt, bool) {
	accs, ok := accessesOf(buf, s)
	if !ok || len(accs) == 0 {
		return nil, false
	}
	var vars []*loopir.Var
	ranges := map[*loopir.Var][2]int64{} // the loops of s with constant bounds: first, last
	loopir.MapStmt(s, func(e loopir.Expr) loopir.Expr { return e }, func(x loopir.Stmt) loopir.Stmt {
		if l, ok := x.(*loopir.For); ok {
			lo, ok1 := an.Simplify(l.Min).(*loopir.IntImm)
			n, ok2 := an.Simplify(l.Extent).(*loopir.IntImm)
			if ok1 && ok2 && n.V > 0 {
				ranges[l.Var] = [2]int64{lo.V, lo.V + n.V - 1}
			}
			vars = append(vars, l.Var)
		}
		return nil
	})
	rank := len(buf.Shape)
	ref := make([]loopir.Expr, rank) // per axis, the base every index is measured from
	// measure splits index ix on axis d into its constant distance from ref[d] and
	// constant coefficients over vars
	measure := func(d int, ix loopir.Expr) (int64, []int64, bool) {
		base, coefs, ok := loopir.Affine(ix, vars)
		if !ok {
			return 0, nil, false
		}
		base = an.Simplify(base)
		if ref[d] == nil {
			ref[d] = base
		}
		c := int64(0)
		if !loopir.Equal(base, ref[d]) {
			k, ok := an.Simplify(loopir.Bin(loopir.Sub, base, ref[d])).(*loopir.IntImm)
			if !ok {
				return 0, nil, false
			}
			c = k.V
		}
		ks := make([]int64, len(coefs))
		for i, coef := range coefs {
			k, ok := an.Simplify(coef).(*loopir.IntImm)
			if !ok {
				return 0, nil, false
			}
			if _, bounded := ranges[vars[i]]; k.V != 0 && !bounded {
				return 0, nil, false
			}
			ks[i] = k.V
		}
		return c, ks, true
	}
	lo, hi := make([]int64, rank), make([]int64, rank)
	for n, idx := range accs {
		for d, ix := range idx {
			c, ks, ok := measure(d, ix)
			if !ok {
				return nil, false
			}
			l, h := c, c
			for i, k := range ks {
				r := ranges[vars[i]]
				l, h = l+min(k*r[0], k*r[1]), h+max(k*r[0], k*r[1])
			}
			if n == 0 {
				lo[d], hi[d] = l, h
			} else {
				lo[d], hi[d] = min(lo[d], l), max(hi[d], h)
			}
		}
	}
	shape := make([]loopir.Expr, rank)
	elems := int64(1)
	for d := range rank {
		shape[d] = loopir.Int(hi[d] - lo[d] + 1)
		elems *= hi[d] - lo[d] + 1
	}
	if elems > maxPrivate {
		return nil, false
	}
	nb := &loopir.Buffer{Name: buf.Name, DT: buf.DT, Shape: shape, Scope: buf.Scope, Producer: buf.Producer}
	rebase := func(idx []loopir.Expr) []loopir.Expr {
		out := make([]loopir.Expr, len(idx))
		for d, ix := range idx {
			c, ks, ok := measure(d, ix)
			if !ok {
				panic("BUG: PrivatizeLocal: an index measured before is not affine any more")
			}
			var e loopir.Expr = loopir.Int(c - lo[d])
			for i, k := range ks {
				if k != 0 {
					e = loopir.Bin(loopir.Add, e, loopir.Bin(loopir.Mul, loopir.Int(k), vars[i]))
				}
			}
			out[d] = an.Simplify(e)
		}
		return out
	}
	body := loopir.MapStmt(s, func(e loopir.Expr) loopir.Expr {
		if l, ok := e.(*loopir.Load); ok && l.Buf == buf {
			return &loopir.Load{Buf: nb, Index: rebase(l.Index)}
		}
		return e
	}, func(x loopir.Stmt) loopir.Stmt {
		if st, ok := x.(*loopir.Store); ok && st.Buf == buf {
			return &loopir.Store{Buf: nb, Index: rebase(st.Index), Value: st.Value}
		}
		return nil
	})
	return &loopir.Allocate{Buf: nb, Body: body}, true
}

// accessesOf lists the indices of the loads and stores of buf in s; ok is false when s
// takes buf's address or still holds blocks.
func accessesOf(buf *loopir.Buffer, s loopir.Stmt) ([][]loopir.Expr, bool) {
	var out [][]loopir.Expr
	ok := true
	loopir.MapStmt(s, func(e loopir.Expr) loopir.Expr {
		switch x := e.(type) {
		case *loopir.Load:
			if x.Buf == buf {
				out = append(out, x.Index)
			}
		case *loopir.Address:
			if x.Buf == buf {
				ok = false
			}
		}
		return e
	}, func(x loopir.Stmt) loopir.Stmt {
		switch x := x.(type) {
		case *loopir.Store:
			if x.Buf == buf {
				out = append(out, x.Index)
			}
		case *loopir.Block:
			ok = false
		}
		return nil
	})
	return out, ok
}

// touches reports whether s loads, stores or takes the address of buf.
func touches(s loopir.Stmt, buf *loopir.Buffer) bool {
	accs, ok := accessesOf(buf, s)
	return len(accs) > 0 || !ok
}

// hasBoundLoop reports whether s holds a loop bound to a thread axis.
func hasBoundLoop(s loopir.Stmt) bool {
	found := false
	loopir.MapStmt(s, func(e loopir.Expr) loopir.Expr { return e }, func(x loopir.Stmt) loopir.Stmt {
		if l, ok := x.(*loopir.For); ok {
			if _, bound := l.Kind.Thread(); bound {
				found = true
			}
		}
		return nil
	})
	return found
}
