package loopir

import "fmt"

// Substitute replaces Vars in e according to m.
func Substitute(e Expr, m map[*Var]Expr) Expr {
	return MapExpr(e, func(x Expr) Expr {
		if v, ok := x.(*Var); ok {
			if r, ok := m[v]; ok {
				return r
			}
		}
		return x
	})
}

// MapExpr rebuilds e bottom-up, applying f to every node after its children.
func MapExpr(e Expr, f func(Expr) Expr) Expr {
	switch x := e.(type) {
	case *Var, *IntImm, *FloatImm:
		return f(e)
	case *Binary:
		return f(Bin(x.Op, MapExpr(x.A, f), MapExpr(x.B, f)))
	case *Not:
		return f(&Not{X: MapExpr(x.X, f)})
	case *Select:
		return f(&Select{Cond: MapExpr(x.Cond, f), T: MapExpr(x.T, f), F: MapExpr(x.F, f)})
	case *Cast:
		return f(&Cast{To: x.To, X: MapExpr(x.X, f)})
	case *Call:
		args := make([]Expr, len(x.Args))
		for i, a := range x.Args {
			args[i] = MapExpr(a, f)
		}
		return f(&Call{Fn: x.Fn, Args: args})
	case *Load:
		return f(&Load{Buf: x.Buf, Index: mapExprs(x.Index, f)})
	case *Reduce:
		return f(&Reduce{Comb: x.Comb, Source: MapExpr(x.Source, f), Axes: x.Axes})
	case *Address:
		return f(&Address{Buf: x.Buf, Index: mapExprs(x.Index, f)})
	case *TexRead:
		return f(&TexRead{Buf: x.Buf, X: MapExpr(x.X, f), Y: MapExpr(x.Y, f), Lane: MapExpr(x.Lane, f)})
	}
	panic(fmt.Sprintf("BUG: MapExpr: unknown expression %T", e))
}

func mapExprs(es []Expr, f func(Expr) Expr) []Expr {
	out := make([]Expr, len(es))
	for i, e := range es {
		out[i] = MapExpr(e, f)
	}
	return out
}

// MapStmt rebuilds s, applying fe to every expression and fs to every statement after
// its children (fs may return nil to keep the rebuilt node).
func MapStmt(s Stmt, fe func(Expr) Expr, fs func(Stmt) Stmt) Stmt {
	var out Stmt
	switch x := s.(type) {
	case nil:
		return nil
	case Seq:
		seq := make(Seq, len(x))
		for i, c := range x {
			seq[i] = MapStmt(c, fe, fs)
		}
		out = seq
	case *For:
		out = &For{Var: x.Var, Min: MapExpr(x.Min, fe), Extent: MapExpr(x.Extent, fe), Kind: x.Kind, Body: MapStmt(x.Body, fe, fs), Annotations: x.Annotations}
	case *Block:
		nb := *x
		nb.Bindings = mapExprs(x.Bindings, fe)
		if x.Predicate != nil {
			nb.Predicate = MapExpr(x.Predicate, fe)
		}
		nb.Init = MapStmt(x.Init, fe, fs)
		nb.Body = MapStmt(x.Body, fe, fs)
		out = &nb
	case *Store:
		out = &Store{Buf: x.Buf, Index: mapExprs(x.Index, fe), Value: MapExpr(x.Value, fe)}
	case *IfThenElse:
		out = &IfThenElse{Cond: MapExpr(x.Cond, fe), Then: MapStmt(x.Then, fe, fs), Else: MapStmt(x.Else, fe, fs)}
	case *Allocate:
		out = &Allocate{Buf: x.Buf, Body: MapStmt(x.Body, fe, fs)}
	case *IntrinCall:
		out = &IntrinCall{Intrin: x.Intrin, Args: mapExprs(x.Args, fe)}
	case *Barrier:
		out = &Barrier{}
	case *TexWrite:
		w := &TexWrite{Buf: x.Buf, X: MapExpr(x.X, fe), Y: MapExpr(x.Y, fe)}
		for i, v := range x.Value {
			w.Value[i] = MapExpr(v, fe)
		}
		out = w
	default:
		panic(fmt.Sprintf("BUG: MapStmt: unknown statement %T", s))
	}
	if fs != nil {
		if r := fs(out); r != nil {
			return r
		}
	}
	return out
}
