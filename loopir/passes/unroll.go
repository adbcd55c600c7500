package passes

import (
	"github.com/kilnrt/kiln/loopir"
)

// maxUnroll is the longest loop UnrollLoops writes out.
const maxUnroll = 16

// UnrollLoops writes out every loop marked Unrolled whose bounds are constants and whose
// extent is at most maxUnroll: one copy of the body per iteration with the loop variable
// replaced by its value (loops inside each copy get fresh variables), so that the
// simplifier then decides what depended on it — selects over the iteration, indices.
// Loops over local allocations, and longer or symbolic loops, stay loops (the C
// compiler's unroll pragma).
func UnrollLoops(f *loopir.PrimFunc) *loopir.PrimFunc {
	return &loopir.PrimFunc{Name: f.Name, Params: f.Params, Dims: f.Dims, Body: unroll(f.Body), NoContract: f.NoContract}
}

func unroll(s loopir.Stmt) loopir.Stmt {
	return loopir.MapStmt(s, func(e loopir.Expr) loopir.Expr { return e }, func(x loopir.Stmt) loopir.Stmt {
		l, ok := x.(*loopir.For)
		if !ok || l.Kind != loopir.Unrolled {
			return nil
		}
		lo, ok1 := l.Min.(*loopir.IntImm)
		n, ok2 := l.Extent.(*loopir.IntImm)
		if !ok1 || !ok2 || n.V > maxUnroll || allocates(l.Body) {
			return nil
		}
		out := make(loopir.Seq, 0, n.V)
		for i := range n.V {
			out = append(out, copyStmt(l.Body, map[*loopir.Var]loopir.Expr{l.Var: &loopir.IntImm{V: lo.V + i, DT: l.Var.DT}}))
		}
		return out
	})
}

// copyStmt copies s with m's substitutions, binding every loop inside to a fresh
// variable of the same name.
func copyStmt(s loopir.Stmt, m map[*loopir.Var]loopir.Expr) loopir.Stmt {
	inner := map[*loopir.Var]loopir.Expr{}
	for k, v := range m {
		inner[k] = v
	}
	loopir.MapStmt(s, func(e loopir.Expr) loopir.Expr { return e }, func(x loopir.Stmt) loopir.Stmt {
		if l, ok := x.(*loopir.For); ok {
			if _, seen := inner[l.Var]; !seen {
				inner[l.Var] = &loopir.Var{Name: l.Var.Name, DT: l.Var.DT}
			}
		}
		return nil
	})
	sub := func(e loopir.Expr) loopir.Expr { return loopir.Substitute(e, inner) }
	return loopir.MapStmt(s, sub, func(x loopir.Stmt) loopir.Stmt {
		if l, ok := x.(*loopir.For); ok {
			if v, ok := inner[l.Var].(*loopir.Var); ok {
				return &loopir.For{Var: v, Min: l.Min, Extent: l.Extent, Kind: l.Kind, Body: l.Body, Annotations: l.Annotations}
			}
		}
		return nil
	})
}

func allocates(s loopir.Stmt) bool {
	found := false
	loopir.MapStmt(s, func(e loopir.Expr) loopir.Expr { return e }, func(x loopir.Stmt) loopir.Stmt {
		if _, ok := x.(*loopir.Allocate); ok {
			found = true
		}
		return nil
	})
	return found
}
