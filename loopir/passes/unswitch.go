package passes

import "github.com/kilnrt/kiln/loopir"

// maxUnswitch bounds the copies UnswitchInvariantSelect makes in one function: a
// select chain of n invariant conditions (a concatenation of n+1 inputs) makes n+1
// copies of its loop. DenseNet-121's widest concatenation joins 25 inputs.
const maxUnswitch = 32

// UnswitchInvariantSelect moves the choice of a select whose condition does not change
// inside a loop out of it: for v { ... select(c, a, b) ... } with c independent of v
// becomes if c { for v { ... a ... } } else { for v { ... b ... } }, on innermost loops
// only (a loop with loops inside would copy them all, and splitting both levels
// multiplies the copies), again on each copy until no such select is left or the
// function has maxUnswitch more loops. A concatenation along channels reads one input per
// vector of lanes then, where its select chain read every input at every element (a
// select evaluates both sides) and hid the lanes' plain copy from the vectorizer; a
// padded copy's bounds test leaves its lane loop the same way.
//
// Only conditions of variables and constants move (no loads, calls, or division by
// anything but a non-zero constant), so evaluating one before a loop that might run no
// iteration reads nothing and cannot trap; loops that allocate are left alone (each
// copy would allocate the buffer again), and so are loops that check an index read from
// data (a checked index whose argument a branch makes constant is hoisted to the
// kernel's start by the C emitter: a copy of the loop for a branch that never runs would
// fail the kernel on an index it never reads, as MaxUnpool's did).
func UnswitchInvariantSelect(f *loopir.PrimFunc) *loopir.PrimFunc {
	budget := maxUnswitch
	body := loopir.MapStmt(f.Body, func(e loopir.Expr) loopir.Expr { return e }, func(s loopir.Stmt) loopir.Stmt {
		loop, ok := s.(*loopir.For)
		if !ok || allocates(loop.Body) || len(boundInside(loop.Body)) > 0 || checksIndex(loop.Body) {
			return nil
		}
		out, changed := unswitch(loop, &budget)
		if !changed {
			return nil
		}
		return out
	})
	return &loopir.PrimFunc{Name: f.Name, Params: f.Params, Dims: f.Dims, Body: body, NoContract: f.NoContract}
}

// unswitch splits loop on the first invariant select condition in its body, then
// splits each copy the same way while budget lasts.
func unswitch(loop *loopir.For, budget *int) (loopir.Stmt, bool) {
	if *budget <= 0 {
		return loop, false
	}
	bound := boundInside(loop.Body)
	bound[loop.Var] = true
	c := invariantSelect(loop.Body, bound)
	if c == nil {
		return loop, false
	}
	*budget--
	key := loopir.ExprString(c)
	then, _ := unswitch(chooseSelect(loop, key, true), budget)
	els, _ := unswitch(chooseSelect(loop, key, false), budget)
	return &loopir.IfThenElse{Cond: c, Then: then, Else: els}, true
}

// invariantSelect returns the condition of a select in s that picks between reads and
// constants (readOrConst: a concatenation's inputs, a padded copy's input or zero; not
// Resize's or GridSample's arithmetic on coordinates and weights, whose kernels would
// grow by as many copies for gcc to compile) whose condition mentions none of bound and
// may be evaluated anywhere (movableCond), or nil: the last such in
// post-order, the head of a select chain before the selects inside it, so that a chain
// of n conditions splits into n+1 copies, each without the chain.
func invariantSelect(s loopir.Stmt, bound map[*loopir.Var]bool) loopir.Expr {
	var found loopir.Expr
	loopir.MapStmt(s, func(e loopir.Expr) loopir.Expr {
		if sel, ok := e.(*loopir.Select); ok && readOrConst(sel.T) && readOrConst(sel.F) && !mentions(sel.Cond, bound) && movableCond(sel.Cond) {
			found = sel.Cond
		}
		return e
	}, nil)
	return found
}

// movableCond: e is built of variables, constants and arithmetic, dividing only by
// non-zero constants.
func movableCond(e loopir.Expr) bool {
	ok := true
	loopir.MapExpr(e, func(x loopir.Expr) loopir.Expr {
		switch x := x.(type) {
		case *loopir.Var, *loopir.IntImm, *loopir.FloatImm, *loopir.Not, *loopir.Cast:
		case *loopir.Binary:
			if x.Op == loopir.Div || x.Op == loopir.Mod {
				if d, isConst := x.B.(*loopir.IntImm); !isConst || d.V == 0 {
					ok = false
				}
			}
		default:
			ok = false
		}
		return x
	})
	return ok
}

// chooseSelect copies loop with every select whose condition prints as key replaced
// by the side taken when the condition is taken.
func chooseSelect(loop *loopir.For, key string, taken bool) *loopir.For {
	pick := func(e loopir.Expr) loopir.Expr {
		if sel, ok := e.(*loopir.Select); ok && loopir.ExprString(sel.Cond) == key {
			if taken {
				return sel.T
			}
			return sel.F
		}
		return e
	}
	return loopir.MapStmt(loop, pick, nil).(*loopir.For)
}

// readOrConst: e is a load whose index calls nothing, a constant, or a select of such
// (a chain), through casts.
func readOrConst(e loopir.Expr) bool {
	switch x := e.(type) {
	case *loopir.Load:
		calls := false
		for _, i := range x.Index {
			loopir.MapExpr(i, func(y loopir.Expr) loopir.Expr {
				if _, ok := y.(*loopir.Call); ok {
					calls = true
				}
				return y
			})
		}
		return !calls
	case *loopir.FloatImm, *loopir.IntImm:
		return true
	case *loopir.Cast:
		return readOrConst(x.X)
	case *loopir.Select:
		return readOrConst(x.T) && readOrConst(x.F)
	}
	return false
}

// checksIndex reports whether s checks an index read from data (loopir.IndexCheck).
func checksIndex(s loopir.Stmt) bool {
	found := false
	loopir.MapStmt(s, func(e loopir.Expr) loopir.Expr {
		if c, ok := e.(*loopir.Call); ok && c.Fn == loopir.IndexCheck {
			found = true
		}
		return e
	}, nil)
	return found
}
