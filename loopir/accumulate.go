package loopir

import "slices"

// Equal reports whether two expressions are the same tree: variables and buffers by
// identity (two variables that print alike are different), constants by type and value.
func Equal(a, b Expr) bool {
	switch x := a.(type) {
	case *Var:
		return x == b
	case *IntImm:
		y, ok := b.(*IntImm)
		return ok && x.V == y.V && x.DT == y.DT
	case *FloatImm:
		y, ok := b.(*FloatImm)
		return ok && (x.V == y.V || x.V != x.V && y.V != y.V) && x.DT == y.DT
	case *Binary:
		y, ok := b.(*Binary)
		return ok && x.Op == y.Op && Equal(x.A, y.A) && Equal(x.B, y.B)
	case *Not:
		y, ok := b.(*Not)
		return ok && Equal(x.X, y.X)
	case *Select:
		y, ok := b.(*Select)
		return ok && Equal(x.Cond, y.Cond) && Equal(x.T, y.T) && Equal(x.F, y.F)
	case *Cast:
		y, ok := b.(*Cast)
		return ok && x.To == y.To && Equal(x.X, y.X)
	case *Call:
		y, ok := b.(*Call)
		return ok && x.Fn == y.Fn && slices.EqualFunc(x.Args, y.Args, Equal)
	case *Load:
		y, ok := b.(*Load)
		return ok && x.Buf == y.Buf && slices.EqualFunc(x.Index, y.Index, Equal)
	case *Address:
		y, ok := b.(*Address)
		return ok && x.Buf == y.Buf && slices.EqualFunc(x.Index, y.Index, Equal)
	}
	return false
}

// Accumulate is a statement of the form Buf[Index] = Buf[Index] op Operand with op one
// of Add, Max and Min (associative and commutative, so a loop of them may run its
// iterations in any grouping: a vectorized reduction) and an Operand that does not read
// Buf.
type Accumulate struct {
	Store   *Store
	Op      BinOp
	Operand Expr
}

// MatchAccumulate recognizes an Accumulate, looking through a Seq of one statement.
func MatchAccumulate(st Stmt) (Accumulate, bool) {
	for {
		s, ok := st.(Seq)
		if !ok || len(s) != 1 {
			break
		}
		st = s[0]
	}
	s, ok := st.(*Store)
	if !ok {
		return Accumulate{}, false
	}
	b, ok := s.Value.(*Binary)
	if !ok || (b.Op != Add && b.Op != Max && b.Op != Min) {
		return Accumulate{}, false
	}
	self := func(e Expr) bool {
		l, ok := e.(*Load)
		return ok && l.Buf == s.Buf && slices.EqualFunc(l.Index, s.Index, Equal)
	}
	operand := b.B
	switch {
	case self(b.A):
	case self(b.B):
		operand = b.A
	default:
		return Accumulate{}, false
	}
	if Reads(operand, s.Buf) {
		return Accumulate{}, false
	}
	return Accumulate{Store: s, Op: b.Op, Operand: operand}, true
}

// Reads reports whether e loads from buf.
func Reads(e Expr, buf *Buffer) bool {
	found := false
	MapExpr(e, func(x Expr) Expr {
		if l, ok := x.(*Load); ok && l.Buf == buf {
			found = true
		}
		return x
	})
	return found
}

// Uses reports whether e refers to v.
func Uses(e Expr, v *Var) bool {
	found := false
	MapExpr(e, func(x Expr) Expr {
		if x == v {
			found = true
		}
		return x
	})
	return found
}
