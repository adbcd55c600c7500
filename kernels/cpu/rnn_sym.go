package cpu

import (
	"strings"

	"github.com/kilnrt/kiln/loopir"
)

// Symbolic sequence length and batch of the recurrent kernels. X's first two
// extents may be expressions over the kernel's dims; input and hidden sizes come from
// the weights and stay static. With both extents constant every helper here returns
// what the static kernel always used, so its code is unchanged. Where an extent is
// symbolic: loops run to the expression, scratch buffers are allocated at run time
// (the C dialect mallocs a local buffer of its expression size) with every symbolic
// extent taken as at least 1, so that no allocation is empty; the products run on
// micro-kernels chosen at run time per block of rows (rnnVector.microGemmSym); and a
// projection that would run in parallel above rnnParallelWork tests its work at run
// time.

// rnnConst is e's value when e is a constant.
func rnnConst(e loopir.Expr) (int64, bool) {
	c, ok := e.(*loopir.IntImm)
	if !ok {
		return 0, false
	}
	return c.V, true
}

// rnnIsZero reports a constant 0 extent.
func rnnIsZero(e loopir.Expr) bool {
	v, ok := rnnConst(e)
	return ok && v == 0
}

// rnnAtLeast1 is a scratch extent: e itself when constant, else max(e, 1).
func rnnAtLeast1(e loopir.Expr) loopir.Expr {
	if _, ok := rnnConst(e); ok {
		return e
	}
	return loopir.Bin(loopir.Max, e, loopir.Int(1))
}

// rnnMul multiplies extents (constants fold).
func rnnMul(a loopir.Expr, b ...int64) loopir.Expr {
	for _, x := range b {
		a = loopir.Bin(loopir.Mul, a, loopir.Int(x))
	}
	return a
}

// rnnShapeString prints extents as a static shape prints ([2 3 4]).
func rnnShapeString(s []loopir.Expr) string {
	parts := make([]string, len(s))
	for i, e := range s {
		parts[i] = loopir.ExprString(e)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// rnnDims lists the Vars of the parameters' extents in order of appearance: the
// kernel's runtime dims (none for a static kernel).
func rnnDims(params []*loopir.Buffer) []*loopir.Var {
	var dims []*loopir.Var
	seen := map[*loopir.Var]bool{}
	for _, b := range params {
		for _, e := range b.Shape {
			loopir.MapExpr(e, func(e loopir.Expr) loopir.Expr {
				if v, ok := e.(*loopir.Var); ok && !seen[v] {
					seen[v] = true
					dims = append(dims, v)
				}
				return e
			})
		}
	}
	return dims
}

// rnnRenameLoops renames the loop variables of body that share a name with a dim:
// the arithmetic simplifier tells variables apart by their printed form, so a loop
// variable s inside a kernel with the dim s would be taken for it. The variables are
// the builder's own (fresh for this kernel), so they are renamed in place; a static
// kernel has no dims and keeps its names.
func rnnRenameLoops(body loopir.Stmt, dims []*loopir.Var) {
	if len(dims) == 0 {
		return
	}
	taken := map[string]bool{}
	for _, d := range dims {
		taken[d.Name] = true
	}
	loopir.MapStmt(body, func(e loopir.Expr) loopir.Expr { return e }, func(s loopir.Stmt) loopir.Stmt {
		if f, ok := s.(*loopir.For); ok && taken[f.Var.Name] {
			name := f.Var.Name + "_l"
			for taken[name] {
				name += "_"
			}
			f.Var.Name = name
		}
		return nil
	})
}
