package passes

import (
	"github.com/kilnrt/kiln/loopir"
)

// Simplify rewrites every expression with the arithmetic simplifier, knowing each loop
// variable's range and that dims are non-negative; branches whose condition is decided
// are replaced by the branch taken.
func Simplify(f *loopir.PrimFunc) *loopir.PrimFunc {
	a := loopir.NewAnalyzer(f.Dims)
	return &loopir.PrimFunc{Name: f.Name, Params: f.Params, Dims: f.Dims, Body: simplifyStmt(a, f.Body), NoContract: f.NoContract}
}

func simplifyStmt(a *loopir.Analyzer, s loopir.Stmt) loopir.Stmt {
	switch s := s.(type) {
	case nil:
		return nil
	case loopir.Seq:
		out := make(loopir.Seq, 0, len(s))
		for _, c := range s {
			if r := simplifyStmt(a, c); r != nil {
				out = append(out, r)
			}
		}
		return out
	case *loopir.For:
		lo, ext := a.Simplify(s.Min), a.Simplify(s.Extent)
		a.BindLoop(s.Var, lo, ext)
		return &loopir.For{Var: s.Var, Min: lo, Extent: ext, Kind: s.Kind, Body: simplifyStmt(a, s.Body), Annotations: s.Annotations}
	case *loopir.IfThenElse:
		c := a.Simplify(s.Cond)
		if v, ok := c.(*loopir.IntImm); ok {
			if v.V != 0 {
				return simplifyStmt(a, s.Then)
			}
			return simplifyStmt(a, s.Else)
		}
		return &loopir.IfThenElse{Cond: c, Then: simplifyStmt(a, s.Then), Else: simplifyStmt(a, s.Else)}
	case *loopir.Store:
		idx := make([]loopir.Expr, len(s.Index))
		for i, x := range s.Index {
			idx[i] = a.Simplify(x)
		}
		return &loopir.Store{Buf: s.Buf, Index: idx, Value: a.Simplify(s.Value)}
	case *loopir.Allocate:
		return &loopir.Allocate{Buf: s.Buf, Body: simplifyStmt(a, s.Body)}
	case *loopir.TexWrite:
		w := &loopir.TexWrite{Buf: s.Buf, X: a.Simplify(s.X), Y: a.Simplify(s.Y)}
		for i, v := range s.Value {
			w.Value[i] = a.Simplify(v)
		}
		return w
	case *loopir.IntrinCall:
		args := make([]loopir.Expr, len(s.Args))
		for i, x := range s.Args {
			args[i] = a.Simplify(x)
		}
		return &loopir.IntrinCall{Intrin: s.Intrin, Args: args}
	}
	// blocks are lowered before this pass runs; keep anything else as it is
	return s
}
