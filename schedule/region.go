package schedule

import (
	"fmt"
	"math"

	"github.com/kilnrt/kiln/loopir"
)

// access is one load or store of a buffer, its index in terms of loop variables, and the
// loops (below some root) that enclose it.
type access struct {
	index []loopir.Expr
	loops []*loopir.For
}

// collectAccesses finds the loads (or, with stores, the stores) of buf under st, with
// block iterators replaced by their bindings. An intrinsic call touching buf is an error:
// its footprint is not a point per iteration.
func collectAccesses(st loopir.Stmt, buf *loopir.Buffer, stores bool) ([]access, error) {
	var out []access
	var err error
	var rec func(st loopir.Stmt, loops []*loopir.For, m map[*loopir.Var]loopir.Expr)
	scanExpr := func(e loopir.Expr, loops []*loopir.For, m map[*loopir.Var]loopir.Expr) {
		if e == nil || stores {
			return
		}
		loopir.MapExpr(e, func(x loopir.Expr) loopir.Expr {
			if l, ok := x.(*loopir.Load); ok && l.Buf == buf {
				idx := make([]loopir.Expr, len(l.Index))
				for i, v := range l.Index {
					idx[i] = loopir.Substitute(v, m)
				}
				out = append(out, access{index: idx, loops: append([]*loopir.For{}, loops...)})
			}
			return x
		})
	}
	rec = func(st loopir.Stmt, loops []*loopir.For, m map[*loopir.Var]loopir.Expr) {
		switch x := st.(type) {
		case loopir.Seq:
			for _, c := range x {
				rec(c, loops, m)
			}
		case *loopir.For:
			rec(x.Body, append(loops, x), m)
		case *loopir.IfThenElse:
			scanExpr(x.Cond, loops, m)
			rec(x.Then, loops, m)
			rec(x.Else, loops, m)
		case *loopir.Allocate:
			rec(x.Body, loops, m)
		case *loopir.Block:
			inner := map[*loopir.Var]loopir.Expr{}
			for k, v := range m {
				inner[k] = v
			}
			for i, it := range x.Iters {
				inner[it.Var] = loopir.Substitute(x.Bindings[i], m)
			}
			rec(x.Init, loops, inner)
			rec(x.Body, loops, inner)
		case *loopir.Store:
			if stores && x.Buf == buf {
				idx := make([]loopir.Expr, len(x.Index))
				for i, v := range x.Index {
					idx[i] = loopir.Substitute(v, m)
				}
				out = append(out, access{index: idx, loops: append([]*loopir.For{}, loops...)})
			}
			for _, i := range x.Index {
				scanExpr(i, loops, m)
			}
			scanExpr(x.Value, loops, m)
		case *loopir.IntrinCall:
			for _, a := range x.Args {
				if ad, ok := a.(*loopir.Address); ok && ad.Buf == buf {
					err = fmt.Errorf("%s is accessed by intrinsic %s", buf.Name, x.Intrin.Name)
				}
			}
		}
	}
	rec(st, nil, map[*loopir.Var]loopir.Expr{})
	return out, err
}

// dimRange is [Min, Min+Extent) of one buffer axis, Extent constant.
type dimRange struct {
	Min    loopir.Expr
	Extent int64
}

// coverRegion bounds the accesses per axis over their enclosing loops: each index must be
// affine in those loops with constant coefficients and the loops must have constant
// extents; the union of several accesses must differ by constants.
func coverRegion(an *loopir.Analyzer, accs []access, rank int) ([]dimRange, error) {
	lo := make([]loopir.Expr, rank)
	hi := make([]loopir.Expr, rank)
	for _, acc := range accs {
		vars := make([]*loopir.Var, len(acc.loops))
		for i, l := range acc.loops {
			vars[i] = l.Var
		}
		for d := 0; d < rank; d++ {
			loops := acc.loops
			base, coefs, ok := loopir.Affine(acc.index[d], vars)
			if !ok {
				// a division or modulo of the loops' variables by a constant (a paired
				// depthwise convolution's column v/B) is bounded by its interval
				idx, extra := boundQuotients(acc.index[d], acc.loops)
				loops = append(append([]*loopir.For{}, acc.loops...), extra...)
				all := append([]*loopir.Var{}, vars...)
				for _, l := range extra {
					all = append(all, l.Var)
				}
				if base, coefs, ok = loopir.Affine(idx, all); !ok {
					return nil, fmt.Errorf("index %s is not affine in the loops", loopir.ExprString(acc.index[d]))
				}
			}
			l, h := base, base
			for i, c := range coefs {
				c = an.Simplify(c)
				if isZero(c) {
					continue
				}
				k, ok1 := c.(*loopir.IntImm)
				ext, ok2 := an.Simplify(loops[i].Extent).(*loopir.IntImm)
				if !ok1 || !ok2 {
					return nil, fmt.Errorf("index %s: loop %s has a symbolic coefficient or extent", loopir.ExprString(acc.index[d]), loops[i].Var.Name)
				}
				start := loopir.Bin(loopir.Mul, loops[i].Min, k)
				l, h = loopir.Bin(loopir.Add, l, start), loopir.Bin(loopir.Add, h, start)
				span := loopir.Int(k.V * (ext.V - 1))
				if k.V < 0 {
					l = loopir.Bin(loopir.Add, l, span)
				} else {
					h = loopir.Bin(loopir.Add, h, span)
				}
			}
			l, h = an.Simplify(l), an.Simplify(h)
			if lo[d] == nil {
				lo[d], hi[d] = l, h
				continue
			}
			var err error
			if lo[d], err = pick(an, lo[d], l, true); err != nil {
				return nil, err
			}
			if hi[d], err = pick(an, hi[d], h, false); err != nil {
				return nil, err
			}
		}
	}
	out := make([]dimRange, rank)
	for d := range out {
		if lo[d] == nil {
			return nil, fmt.Errorf("no access")
		}
		ext, ok := an.Simplify(loopir.Bin(loopir.Add, loopir.Bin(loopir.Sub, hi[d], lo[d]), loopir.Int(1))).(*loopir.IntImm)
		if !ok {
			return nil, fmt.Errorf("axis %d: the region's extent %s is not constant", d, loopir.ExprString(loopir.Bin(loopir.Sub, hi[d], lo[d])))
		}
		out[d] = dimRange{Min: lo[d], Extent: ext.V}
	}
	return out, nil
}

// boundQuotients replaces in index each division or modulo by a positive constant of an
// expression of the loops' variables alone (loops with constant bounds) by a variable of
// a new loop over the quotient's interval, so that the index is affine in the loops and
// those: the region it covers then holds every value the quotient takes (and perhaps
// more, where the interval has holes).
func boundQuotients(index loopir.Expr, loops []*loopir.For) (loopir.Expr, []*loopir.For) {
	an := loopir.NewAnalyzer(nil)
	inner := map[*loopir.Var]bool{}
	for _, l := range loops {
		lo, ok1 := l.Min.(*loopir.IntImm)
		ext, ok2 := l.Extent.(*loopir.IntImm)
		if !ok1 || !ok2 || ext.V <= 0 {
			continue
		}
		an.Bind(l.Var, loopir.Bounds{Min: lo.V, Max: lo.V + ext.V - 1})
		inner[l.Var] = true
	}
	var extra []*loopir.For
	out := loopir.MapExpr(index, func(x loopir.Expr) loopir.Expr {
		b, ok := x.(*loopir.Binary)
		if !ok || b.Op != loopir.Div && b.Op != loopir.Mod {
			return x
		}
		if c, ok := b.B.(*loopir.IntImm); !ok || c.V <= 0 || !onlyVars(b.A, inner) {
			return x
		}
		r := an.Bound(b)
		if r.Min < 0 || r.Max < r.Min || r.Max == math.MaxInt64 {
			return x
		}
		v := &loopir.Var{Name: fmt.Sprintf("q%d", len(extra)), DT: b.DType()}
		extra = append(extra, &loopir.For{Var: v, Min: loopir.Int(r.Min), Extent: loopir.Int(r.Max - r.Min + 1)})
		return v
	})
	return out, extra
}

// onlyVars reports whether every variable of e is one of vars.
func onlyVars(e loopir.Expr, vars map[*loopir.Var]bool) bool {
	ok := true
	loopir.MapExpr(e, func(x loopir.Expr) loopir.Expr {
		if v, isVar := x.(*loopir.Var); isVar && !vars[v] {
			ok = false
		}
		return x
	})
	return ok
}

// pick returns the smaller (or larger) of two bounds that differ by a constant.
func pick(an *loopir.Analyzer, a, b loopir.Expr, smaller bool) (loopir.Expr, error) {
	d, ok := an.Simplify(loopir.Bin(loopir.Sub, b, a)).(*loopir.IntImm)
	if !ok {
		return nil, fmt.Errorf("bounds %s and %s do not differ by a constant", loopir.ExprString(a), loopir.ExprString(b))
	}
	if (d.V < 0) == smaller {
		return b, nil
	}
	return a, nil
}
