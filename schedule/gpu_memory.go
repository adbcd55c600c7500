package schedule

import (
	"fmt"
	"sort"

	"github.com/kilnrt/kiln/loopir"
)

// threadLoopsAt returns the loops bound to threadIdx axes that enclose loop at, at
// included, outermost first: under them a statement runs once per thread of a block.
func (s *Schedule) threadLoopsAt(at *loopir.For) []*loopir.For {
	var out []*loopir.For
	for _, f := range append(loopsAboveVar(s.f.Body, at.Var), at) {
		if a, ok := f.Kind.Thread(); ok && !a.IsBlock() {
			out = append(out, f)
		}
	}
	return out
}

// storesIn lists the stores of buf in a block (its init and body).
func storesIn(blk *loopir.Block, buf *loopir.Buffer) []*loopir.Store {
	var out []*loopir.Store
	for _, st := range []loopir.Stmt{blk.Init, blk.Body} {
		walk(st, func(x loopir.Stmt) {
			if w, ok := x.(*loopir.Store); ok && w.Buf == buf {
				out = append(out, w)
			}
		})
	}
	return out
}

// compactShared gives the shared buffer buf the shape of region (its constant extents)
// and rebases every access of it by the region's start, an expression of loops that
// enclose every access; the allocation stays where it is (one buffer per block).
func (s *Schedule) compactShared(an *loopir.Analyzer, buf *loopir.Buffer, region []dimRange) {
	shape := make([]loopir.Expr, len(region))
	for d, r := range region {
		shape[d] = loopir.Int(r.Extent)
	}
	nb := &loopir.Buffer{Name: buf.Name, DT: buf.DT, Shape: shape, Scope: buf.Scope, Producer: buf.Producer}
	rebase := func(idx []loopir.Expr) []loopir.Expr {
		if len(idx) != len(region) {
			panic(fmt.Sprintf("BUG: compactShared: %s of rank %d accessed with %d indices", buf.Name, len(region), len(idx)))
		}
		out := make([]loopir.Expr, len(idx))
		for d, x := range idx {
			out[d] = an.Simplify(loopir.Bin(loopir.Sub, x, region[d].Min))
		}
		return out
	}
	regions := func(rs []loopir.Region) []loopir.Region {
		out := make([]loopir.Region, len(rs))
		for i, r := range rs {
			out[i] = r
			if r.Buf != buf {
				continue
			}
			out[i] = loopir.Region{Buf: nb, Ranges: make([][2]loopir.Expr, len(r.Ranges))}
			for d, rg := range r.Ranges {
				if isZero(rg[0]) && loopir.ExprString(rg[1]) == loopir.ExprString(buf.Shape[d]) {
					out[i].Ranges[d] = [2]loopir.Expr{loopir.Int(0), shape[d]} // the whole axis
					continue
				}
				out[i].Ranges[d] = [2]loopir.Expr{loopir.Bin(loopir.Sub, rg[0], region[d].Min), rg[1]}
			}
		}
		return out
	}
	s.f.Body = loopir.MapStmt(s.f.Body, func(e loopir.Expr) loopir.Expr {
		if l, ok := e.(*loopir.Load); ok && l.Buf == buf {
			return &loopir.Load{Buf: nb, Index: rebase(l.Index)}
		}
		return e
	}, func(x loopir.Stmt) loopir.Stmt {
		switch x := x.(type) {
		case *loopir.Store:
			if x.Buf == buf {
				return &loopir.Store{Buf: nb, Index: rebase(x.Index), Value: x.Value}
			}
		case *loopir.Block:
			cp := *x
			cp.Reads, cp.Writes = regions(x.Reads), regions(x.Writes)
			return &cp
		case *loopir.Allocate:
			if x.Buf == buf {
				return &loopir.Allocate{Buf: nb, Body: x.Body}
			}
		}
		return nil
	})
}

// denseCover reports whether each access covers every element of region, so that a
// region computed from writes holds no element that is not written. An access covers
// its box densely when, on each axis, the loops with a non-zero coefficient (each loop
// on one axis only) form a mixed radix: sorted by coefficient, the smallest is ±1 and
// each next is the previous one times its loop's extent; the box is then the region.
func denseCover(an *loopir.Analyzer, accs []access, region []dimRange) error {
	for _, acc := range accs {
		vars := make([]*loopir.Var, len(acc.loops))
		for i, l := range acc.loops {
			vars[i] = l.Var
		}
		axisOf := map[*loopir.Var]int{}
		for d, r := range region {
			_, coefs, ok := loopir.Affine(acc.index[d], vars)
			if !ok {
				return fmt.Errorf("index %s is not affine in the loops", loopir.ExprString(acc.index[d]))
			}
			type term struct{ coef, ext int64 }
			var terms []term
			for i, c := range coefs {
				c = an.Simplify(c)
				if isZero(c) {
					continue
				}
				k, ok1 := c.(*loopir.IntImm)
				ext, ok2 := an.Simplify(acc.loops[i].Extent).(*loopir.IntImm)
				if !ok1 || !ok2 {
					return fmt.Errorf("index %s: loop %s has a symbolic coefficient or extent", loopir.ExprString(acc.index[d]), vars[i].Name)
				}
				if prev, seen := axisOf[vars[i]]; seen && prev != d {
					return fmt.Errorf("loop %s moves axes %d and %d", vars[i].Name, prev, d)
				}
				axisOf[vars[i]] = d
				terms = append(terms, term{abs64(k.V), ext.V})
			}
			sort.Slice(terms, func(a, b int) bool { return terms[a].coef < terms[b].coef })
			span := int64(1)
			for _, t := range terms {
				if t.coef != span {
					return fmt.Errorf("index %s skips elements (stride %d where %d is next)", loopir.ExprString(acc.index[d]), t.coef, span)
				}
				span *= t.ext
			}
			if span != r.Extent {
				return fmt.Errorf("index %s covers %d of the %d elements of axis %d", loopir.ExprString(acc.index[d]), span, r.Extent, d)
			}
		}
	}
	return nil
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
