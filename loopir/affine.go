package loopir

// Affine splits an integer expression into base + Σ coefs[i]·vars[i], where the base and
// the coefficients do not mention vars (they may mention other variables and dims).
// ok is false when e is not affine in vars (a product of two terms that both depend on
// vars, or a var under a division, modulo, min, max, select or load).
func Affine(e Expr, vars []*Var) (base Expr, coefs []Expr, ok bool) {
	pos := make(map[*Var]int, len(vars))
	for i, v := range vars {
		pos[v] = i
	}
	a, ok := affine(e, pos, len(vars))
	if !ok {
		return nil, nil, false
	}
	coefs = make([]Expr, len(vars))
	for i, c := range a.coefs {
		if c == nil {
			c = Int(0)
		}
		coefs[i] = c
	}
	return a.base, coefs, true
}

type affineForm struct {
	base  Expr
	coefs []Expr // nil entries are zero
}

func (a affineForm) constant() bool {
	for _, c := range a.coefs {
		if c != nil {
			return false
		}
	}
	return true
}

func affine(e Expr, pos map[*Var]int, n int) (affineForm, bool) {
	out := affineForm{base: Int(0), coefs: make([]Expr, n)}
	mentions := false
	MapExpr(e, func(x Expr) Expr {
		if v, ok := x.(*Var); ok {
			if _, ok := pos[v]; ok {
				mentions = true
			}
		}
		return x
	})
	if !mentions {
		out.base = e
		return out, true
	}
	switch x := e.(type) {
	case *Var:
		out.coefs[pos[x]] = Int(1)
		return out, true
	case *Binary:
		switch x.Op {
		case Add, Sub:
			l, ok1 := affine(x.A, pos, n)
			r, ok2 := affine(x.B, pos, n)
			if !ok1 || !ok2 {
				return out, false
			}
			out.base = Bin(x.Op, l.base, r.base)
			for i := range out.coefs {
				out.coefs[i] = addCoef(x.Op, l.coefs[i], r.coefs[i])
			}
			return out, true
		case Mul:
			l, ok1 := affine(x.A, pos, n)
			r, ok2 := affine(x.B, pos, n)
			if !ok1 || !ok2 {
				return out, false
			}
			if !l.constant() && !r.constant() {
				return out, false
			}
			if l.constant() {
				l, r = r, l // r is the constant factor
			}
			out.base = Bin(Mul, l.base, r.base)
			for i, c := range l.coefs {
				if c != nil {
					out.coefs[i] = Bin(Mul, c, r.base)
				}
			}
			return out, true
		}
	}
	return out, false
}

func addCoef(op BinOp, a, b Expr) Expr {
	switch {
	case b == nil:
		return a
	case a == nil && op == Add:
		return b
	case a == nil:
		return Bin(Sub, Int(0), b)
	}
	return Bin(op, a, b)
}
