package passes

import "github.com/kilnrt/kiln/loopir"

// HoistInvariantIf moves the loop-invariant part of a condition out of a loop whose
// whole body it guards: for v { if a && b { S } } with a independent of v becomes
// if a { for v { if b { S } } }, innermost loops first, so a split's tail predicate ends
// above the loops it does not depend on and the inner loops stay branch-free (and
// vectorizable).
func HoistInvariantIf(f *loopir.PrimFunc) *loopir.PrimFunc {
	body := loopir.MapStmt(f.Body, func(e loopir.Expr) loopir.Expr { return e }, func(s loopir.Stmt) loopir.Stmt {
		loop, guard, bound, ok := guardedLoop(s)
		if !ok {
			return nil
		}
		var inv, rest []loopir.Expr
		for _, c := range loopir.Conjuncts(guard.Cond) {
			if mentions(c, bound) {
				rest = append(rest, c)
			} else {
				inv = append(inv, c)
			}
		}
		if len(inv) == 0 {
			return nil
		}
		var inner loopir.Stmt = guard.Then
		if len(rest) > 0 {
			inner = &loopir.IfThenElse{Cond: and(rest), Then: guard.Then}
		}
		return &loopir.IfThenElse{Cond: and(inv), Then: &loopir.For{Var: loop.Var, Min: loop.Min, Extent: loop.Extent, Kind: loop.Kind, Body: inner, Annotations: loop.Annotations}}
	})
	return &loopir.PrimFunc{Name: f.Name, Params: f.Params, Dims: f.Dims, Body: body, NoContract: f.NoContract}
}

// guardedLoop matches s as a loop whose whole body is one if without else; bound holds
// the loop's variable and those of the loops inside the guarded statement.
func guardedLoop(s loopir.Stmt) (loop *loopir.For, guard *loopir.IfThenElse, bound map[*loopir.Var]bool, ok bool) {
	if loop, ok = s.(*loopir.For); !ok {
		return nil, nil, nil, false
	}
	if guard, ok = loop.Body.(*loopir.IfThenElse); !ok || guard.Else != nil {
		return nil, nil, nil, false
	}
	bound = boundInside(guard.Then)
	bound[loop.Var] = true
	return loop, guard, bound, true
}

func and(es []loopir.Expr) loopir.Expr {
	out := es[0]
	for _, e := range es[1:] {
		out = loopir.Bin(loopir.And, out, e)
	}
	return out
}

// boundInside collects the variables bound by loops inside s.
func boundInside(s loopir.Stmt) map[*loopir.Var]bool {
	out := map[*loopir.Var]bool{}
	loopir.MapStmt(s, func(e loopir.Expr) loopir.Expr { return e }, func(x loopir.Stmt) loopir.Stmt {
		if f, ok := x.(*loopir.For); ok {
			out[f.Var] = true
		}
		return nil
	})
	return out
}

func mentions(e loopir.Expr, vars map[*loopir.Var]bool) bool {
	found := false
	loopir.MapExpr(e, func(x loopir.Expr) loopir.Expr {
		if v, ok := x.(*loopir.Var); ok && vars[v] {
			found = true
		}
		return x
	})
	return found
}
