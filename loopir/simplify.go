package loopir

import (
	"math"
	"sort"

	"github.com/kilnrt/kiln/tensor"
)

// Bounds is an integer interval [Min, Max]; math.MinInt64/MaxInt64 mean unbounded.
type Bounds struct{ Min, Max int64 }

var unbounded = Bounds{math.MinInt64, math.MaxInt64}

// Analyzer proves facts about integer index expressions from variable ranges: loop
// variables lie in their loop's range and size variables (dims) are non-negative.
type Analyzer struct {
	vars map[*Var]Bounds
}

// NewAnalyzer knows that every dim of f is non-negative.
func NewAnalyzer(dims []*Var) *Analyzer {
	a := &Analyzer{vars: map[*Var]Bounds{}}
	for _, d := range dims {
		a.vars[d] = Bounds{0, math.MaxInt64}
	}
	return a
}

// Bind records a variable's range.
func (a *Analyzer) Bind(v *Var, b Bounds) { a.vars[v] = b }

// BindLoop records the range of a loop variable iterating [min, min+extent).
func (a *Analyzer) BindLoop(v *Var, min, extent Expr) {
	lb, eb := a.Bound(min), a.Bound(extent)
	hi := int64(math.MaxInt64)
	if lb.Max != math.MaxInt64 && eb.Max != math.MaxInt64 {
		hi = lb.Max + eb.Max - 1
	}
	a.Bind(v, Bounds{Min: lb.Min, Max: hi})
}

// Conjuncts splits a condition into the operands of its top-level &&s (nil gives none).
func Conjuncts(e Expr) []Expr {
	if e == nil {
		return nil
	}
	if b, ok := e.(*Binary); ok && b.Op == And {
		return append(Conjuncts(b.A), Conjuncts(b.B)...)
	}
	return []Expr{e}
}

func addSat(x, y int64) int64 {
	s := x + y
	switch {
	case x > 0 && y > 0 && s < 0:
		return math.MaxInt64
	case x < 0 && y < 0 && s >= 0:
		return math.MinInt64
	case x == math.MaxInt64 || y == math.MaxInt64:
		return math.MaxInt64
	case x == math.MinInt64 || y == math.MinInt64:
		return math.MinInt64
	}
	return s
}

func mulSat(x, y int64) int64 {
	if x == 0 || y == 0 {
		return 0
	}
	p := x * y
	if p/y != x || x == math.MinInt64 || y == math.MinInt64 || abs(x) == math.MaxInt64 || abs(y) == math.MaxInt64 {
		if (x > 0) == (y > 0) {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return p
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// Bound computes an interval containing every value of an integer expression.
func (a *Analyzer) Bound(e Expr) Bounds {
	switch e := e.(type) {
	case *IntImm:
		return Bounds{e.V, e.V}
	case *Var:
		if b, ok := a.vars[e]; ok {
			return b
		}
	case *Binary:
		x, y := a.Bound(e.A), a.Bound(e.B)
		switch e.Op {
		case Add:
			return Bounds{addSat(x.Min, y.Min), addSat(x.Max, y.Max)}
		case Sub:
			return Bounds{addSat(x.Min, -y.Max), addSat(x.Max, -y.Min)}
		case Mul:
			c := []int64{mulSat(x.Min, y.Min), mulSat(x.Min, y.Max), mulSat(x.Max, y.Min), mulSat(x.Max, y.Max)}
			sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
			return Bounds{c[0], c[3]}
		case Div:
			if y.Min > 0 && x.Min >= 0 {
				return Bounds{x.Min / y.Max, x.Max / y.Min}
			}
		case Mod:
			if y.Min > 0 && y.Max != math.MaxInt64 {
				if x.Min >= 0 && x.Max < y.Min {
					return x
				}
				return Bounds{0, y.Max - 1}
			}
		case Min:
			return Bounds{min(x.Min, y.Min), min(x.Max, y.Max)}
		case Max:
			return Bounds{max(x.Min, y.Min), max(x.Max, y.Max)}
		}
	}
	return unbounded
}

// Simplify rewrites an expression into a simpler equal one: constants folded, integer
// sums in a canonical order with like terms combined, floor div/mod rules ((c*a + b)/c =
// a + b/c and (c*a + b)%c = b%c always; x/c = 0 and x%c = x when the bounds prove
// 0 <= x < c), comparisons decided by bounds, and round trips of a float through a
// narrow integer removed where its proven range makes them identities (castRule).
func (a *Analyzer) Simplify(e Expr) Expr {
	return MapExpr(e, a.rule)
}

func (a *Analyzer) rule(e Expr) Expr {
	if sel, ok := e.(*Select); ok {
		// a decided condition (a loop unrolled into constants) picks its branch
		if c, ok := sel.Cond.(*IntImm); ok {
			if c.V != 0 {
				return sel.T
			}
			return sel.F
		}
		return e
	}
	if c, ok := e.(*Cast); ok {
		return a.castRule(c)
	}
	b, ok := e.(*Binary)
	if !ok || b.A.DType().IsFloat() {
		return e
	}
	if x, ok := b.A.(*IntImm); ok && b.Op.IsCompare() {
		if y, ok := b.B.(*IntImm); ok {
			if v, ok := compareInts(b.Op, x.V, y.V); ok {
				return &IntImm{V: v, DT: tensor.Bool}
			}
		}
	}
	switch b.Op {
	case Add, Sub, Mul:
		if lin, ok := linearize(b); ok {
			for a.joinDivMod(&lin) {
			}
			return lin.expr(b.DType())
		}
	case Div, Mod:
		c, ok := b.B.(*IntImm)
		if !ok || c.V <= 0 {
			return e
		}
		xb := a.Bound(b.A)
		if xb.Min >= 0 && xb.Max < c.V {
			if b.Op == Div {
				return &IntImm{V: 0, DT: b.DType()}
			}
			return b.A
		}
		if lin, ok := linearize(b.A); ok {
			// split off the terms whose coefficients c divides
			var q, r linear
			q.terms, r.terms = map[string]term{}, map[string]term{}
			for k, t := range lin.terms {
				if t.coef%c.V == 0 {
					q.terms[k] = term{t.atom, t.coef / c.V}
				} else {
					r.terms[k] = t
				}
			}
			q.c, r.c = floorDiv(lin.c, c.V), lin.c-floorDiv(lin.c, c.V)*c.V
			if len(q.terms) == 0 && q.c == 0 {
				return e
			}
			// with floor division, (c*q + r)/c = q + r/c and (c*q + r)%c = r%c for any r
			rest := a.rule(&Binary{Op: b.Op, A: r.expr(b.DType()), B: c})
			if b.Op == Mod {
				return rest
			}
			return a.rule(Bin(Add, q.expr(b.DType()), rest))
		}
	case Min, Max:
		// a clamp whose bounds are proven drops: min(x, y) = x when x <= y everywhere
		x, y := a.Bound(b.A), a.Bound(b.B)
		if x.Max <= y.Min {
			if b.Op == Min {
				return b.A
			}
			return b.B
		}
		if y.Max <= x.Min {
			if b.Op == Min {
				return b.B
			}
			return b.A
		}
	case And, Or:
		// a decided operand (a bound proven by the loop's range) decides or drops
		for _, p := range [][2]Expr{{b.A, b.B}, {b.B, b.A}} {
			c, ok := p[0].(*IntImm)
			if !ok || p[1].DType() != tensor.Bool {
				continue // an integer operand's truth value is not its value
			}
			if (c.V != 0) == (b.Op == And) {
				return p[1] // true && y, false || y
			}
			return &IntImm{V: boolInt(b.Op == Or), DT: tensor.Bool} // false && y, true || y
		}
	case LT, LE, GT, GE, EQ, NE:
		x, y := a.Bound(b.A), a.Bound(b.B)
		if v, ok := decide(b.Op, x, y); ok {
			var n int64
			if v {
				n = 1
			}
			return &IntImm{V: n, DT: tensor.Bool}
		}
	}
	return e
}

// boolInt is 1 for true, 0 for false.
func boolInt(v bool) int64 {
	if v {
		return 1
	}
	return 0
}

// joinDivMod rejoins one pair of terms that a fused loop's index splits a variable into,
// and reports whether it did. With floor division and c, d > 0, for every x:
// (x%c)·s + (x/c)·cs = x·s, and (x%c)·s + ((x/c)%d)·cs = (x%cd)·s. Loops fused into one
// write their old variables as such pieces of the new one; joined, a contiguous access
// reads x·s again.
func (a *Analyzer) joinDivMod(l *linear) bool {
	for k, t := range l.terms {
		m, ok := t.atom.(*Binary)
		if !ok || m.Op != Mod {
			continue
		}
		c, ok := m.B.(*IntImm)
		if !ok || c.V <= 0 {
			continue
		}
		x, s := m.A, t.coef
		cs, ok := mulExact(c.V, s)
		if !ok {
			continue
		}
		if other, ok := l.terms[ExprString(Bin(Div, x, c))]; ok && other.coef == cs {
			delete(l.terms, k)
			delete(l.terms, ExprString(other.atom))
			return l.add(x, s)
		}
		for k2, t2 := range l.terms {
			dm, ok := t2.atom.(*Binary)
			if !ok || dm.Op != Mod || t2.coef != cs {
				continue
			}
			d, ok := dm.B.(*IntImm)
			q, isDiv := dm.A.(*Binary)
			if !ok || d.V <= 0 || !isDiv || q.Op != Div || ExprString(q) != ExprString(Bin(Div, x, c)) {
				continue
			}
			cd, ok := mulExact(c.V, d.V)
			if !ok {
				continue
			}
			delete(l.terms, k)
			delete(l.terms, k2)
			return l.add(a.rule(Bin(Mod, x, &IntImm{V: cd, DT: c.DT})), s)
		}
	}
	return false
}

// mulExact is x·y when it does not overflow.
func mulExact(x, y int64) (int64, bool) {
	p := x * y
	if x != 0 && (p/x != y || (x == -1 && y == math.MinInt64)) {
		return 0, false
	}
	return p, true
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// decide settles a comparison of two intervals when they do not overlap ambiguously.
func decide(op BinOp, x, y Bounds) (bool, bool) {
	switch op {
	case LT:
		if x.Max < y.Min {
			return true, true
		}
		if x.Min >= y.Max {
			return false, true
		}
	case LE:
		if x.Max <= y.Min {
			return true, true
		}
		if x.Min > y.Max {
			return false, true
		}
	case GT:
		return decide(LT, y, x)
	case GE:
		return decide(LE, y, x)
	}
	return false, false
}

// linear is sum(coef*atom) + c over non-linear atoms, keyed by their printed form.
type linear struct {
	terms map[string]term
	c     int64
}

type term struct {
	atom Expr
	coef int64
}

// linearize expands +, -, and multiplication by constants; anything else is an atom.
func linearize(e Expr) (linear, bool) {
	l := linear{terms: map[string]term{}}
	ok := l.add(e, 1)
	return l, ok
}

func (l *linear) add(e Expr, k int64) bool {
	switch e := e.(type) {
	case *IntImm:
		l.c += k * e.V
		return true
	case *Binary:
		switch e.Op {
		case Add:
			return l.add(e.A, k) && l.add(e.B, k)
		case Sub:
			return l.add(e.A, k) && l.add(e.B, -k)
		case Mul:
			if c, ok := e.B.(*IntImm); ok {
				return l.add(e.A, k*c.V)
			}
			if c, ok := e.A.(*IntImm); ok {
				return l.add(e.B, k*c.V)
			}
		}
	}
	key := ExprString(e)
	t := l.terms[key]
	t.atom, t.coef = e, t.coef+k
	if t.coef == 0 {
		delete(l.terms, key)
	} else {
		l.terms[key] = t
	}
	return true
}

// expr rebuilds the canonical form: terms sorted by their printed atom, then the constant.
func (l linear) expr(dt tensor.DType) Expr {
	keys := make([]string, 0, len(l.terms))
	for k := range l.terms {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out Expr
	for _, k := range keys {
		t := l.terms[k]
		var x Expr = t.atom
		if t.coef != 1 {
			x = Bin(Mul, t.atom, &IntImm{V: t.coef, DT: dt})
		}
		if out == nil {
			out = x
		} else {
			out = Bin(Add, out, x)
		}
	}
	if out == nil {
		return &IntImm{V: l.c, DT: dt}
	}
	if l.c != 0 {
		out = Bin(Add, out, &IntImm{V: l.c, DT: dt})
	}
	return out
}

// compareInts decides a comparison of two constants (1 true, 0 false).
func compareInts(op BinOp, x, y int64) (int64, bool) {
	var r bool
	switch op {
	case EQ:
		r = x == y
	case NE:
		r = x != y
	case LT:
		r = x < y
	case LE:
		r = x <= y
	case GT:
		r = x > y
	case GE:
		r = x >= y
	default:
		return 0, false
	}
	if r {
		return 1, true
	}
	return 0, true
}
