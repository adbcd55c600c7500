package kernels

import (
	"slices"
	"strings"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
)

// Symbolic extents. A kernel's runtime dims are Vars named like the graph's symbols: the
// compiler makes each placeholder's extents from its input's type, and passes every dim
// by name (two Vars of one name get one value). A definition that needs an extent the
// inputs do not show (a Reshape's target, a Range's length) takes it from the node's
// output type through Syms.

// Syms maps the symbols of a kernel to its dim Vars.
type Syms map[string]*loopir.Var

// SymsOf collects the Vars that appear in the inputs' extents, by name.
func SymsOf(in []Input) Syms {
	s := Syms{}
	for _, x := range in {
		if !x.Present() {
			continue
		}
		for _, e := range x.T.Shape {
			loopir.MapExpr(e, func(e loopir.Expr) loopir.Expr {
				if v, ok := e.(*loopir.Var); ok && s[v.Name] == nil {
					s[v.Name] = v
				}
				return e
			})
		}
	}
	return s
}

// SymExpr is d as an expression over the Vars of the inputs' extents (a symbol that no
// input extent carries becomes a fresh te.Dim of its name).
func SymExpr(d graph.Dim, in []Input) loopir.Expr { return SymsOf(in).Expr(d) }

// Expr is d as an expression over s's Vars: c + Σ coef·Π syms. A symbol s lacks gets a
// fresh te.Dim, which s then keeps.
func (s Syms) Expr(d graph.Dim) loopir.Expr {
	c, terms := d.Poly()
	var out loopir.Expr
	for _, t := range terms {
		k := t.Coef
		if out != nil && k < 0 {
			k = -k
		}
		var p loopir.Expr = i64(k)
		for _, name := range t.Syms {
			p = mul(p, s.dim(name))
		}
		switch {
		case out == nil:
			out = p
		case t.Coef < 0:
			out = sub(out, p)
		default:
			out = add(out, p)
		}
	}
	if out == nil {
		return i64(c)
	}
	return add(out, i64(c))
}

// Shape is Expr of every dim.
func (s Syms) Shape(ds []graph.Dim) []loopir.Expr {
	out := make([]loopir.Expr, len(ds))
	for k, d := range ds {
		out[k] = s.Expr(d)
	}
	return out
}

func (s Syms) dim(name string) *loopir.Var {
	if v, ok := s[name]; ok {
		return v
	}
	v := te.Dim(name)
	s[name] = v
	return v
}

// knownInts reads an integer input that is a constant or known over the symbols (a
// kiln.ShapeExpr's value): its elements as expressions. ok is false otherwise.
func knownInts(n *graph.Node, in []Input, i int) ([]loopir.Expr, bool) {
	if v, ok := ConstInts(in, i); ok {
		return Static(v...), true
	}
	known, ok := graph.KnownDims(n, i)
	if !ok {
		return nil, false
	}
	return SymsOf(in).Shape(known), true
}

// isNonNegative reports an expression that is a product of a non-negative constant and
// dims (which are never negative).
func isNonNegative(e loopir.Expr) bool {
	p := productOf(e)
	if p.coef < 0 {
		return false
	}
	for _, a := range p.atoms {
		if _, ok := a.e.(*loopir.Var); !ok {
			return false
		}
	}
	return true
}

// replaceAt is i with entry k replaced by v.
func replaceAt(i []loopir.Expr, k int, v loopir.Expr) []loopir.Expr {
	out := append([]loopir.Expr{}, i...)
	out[k] = v
	return out
}

// outputShape is the node's output k type as extents over the inputs' Vars; ok is false
// when the node carries no such type (a rank that is unknown, or no type of x's dtype:
// a node built without inference).
func outputShape(n *graph.Node, k int, in []Input, x *te.Tensor) ([]loopir.Expr, bool) {
	if k >= len(n.Outputs) || n.Outputs[k] == nil {
		return nil, false
	}
	t := n.Outputs[k].Type
	if t.Kind != graph.KindTensor || t.UnknownRank || t.DType != x.DT {
		return nil, false
	}
	return SymsOf(in).Shape(t.Shape), true
}

// isStatic reports whether every extent is a constant.
func isStatic(ext []loopir.Expr) bool {
	for _, e := range ext {
		if _, ok := e.(*loopir.IntImm); !ok {
			return false
		}
	}
	return true
}

// safeDiv divides by an extent: a symbolic one is taken as at least 1, so that an index
// expression evaluated where the extent is 0 (a guard hoisted above an empty loop) never
// divides by zero; the value is unchanged wherever the extent is positive.
func safeDiv(op loopir.BinOp, x, ext loopir.Expr) loopir.Expr {
	if _, ok := ext.(*loopir.IntImm); !ok {
		ext = loopir.Bin(loopir.Max, ext, i64(1))
	}
	return loopir.Bin(op, x, ext)
}

// product is an extent seen as a constant times a multiset of atoms (Vars, by name, and
// expressions that are not products, by their text): two equal products are equal
// numbers for every value of the dims, so index arithmetic can rely on them.
type product struct {
	coef  int64
	atoms []atom // sorted by key
}

type atom struct {
	key string
	e   loopir.Expr
}

// productOf factors e over Mul nodes.
func productOf(e loopir.Expr) product {
	switch x := e.(type) {
	case *loopir.IntImm:
		return product{coef: x.V}
	case *loopir.Binary:
		if x.Op == loopir.Mul {
			return productOf(x.A).times(productOf(x.B))
		}
	}
	return product{coef: 1, atoms: []atom{{loopir.ExprString(e), e}}}
}

func (p product) times(q product) product {
	atoms := append(slices.Clone(p.atoms), q.atoms...)
	slices.SortFunc(atoms, func(a, b atom) int { return strings.Compare(a.key, b.key) })
	return product{coef: p.coef * q.coef, atoms: atoms}
}

func (p product) equal(q product) bool {
	return p.coef == q.coef && slices.EqualFunc(p.atoms, q.atoms, func(a, b atom) bool { return a.key == b.key })
}

// over returns p/q when q divides p exactly (an integer quotient of the constants and
// q's atoms among p's).
func (p product) over(q product) (product, bool) {
	if q.coef == 0 || p.coef%q.coef != 0 {
		return product{}, false
	}
	rest := slices.Clone(p.atoms)
	for _, a := range q.atoms {
		k := slices.IndexFunc(rest, func(b atom) bool { return b.key == a.key })
		if k < 0 {
			return product{}, false
		}
		rest = slices.Delete(rest, k, k+1)
	}
	return product{coef: p.coef / q.coef, atoms: rest}, true
}

// expr rebuilds the product as an expression.
func (p product) expr() loopir.Expr {
	e := loopir.Expr(i64(p.coef))
	for _, a := range p.atoms {
		e = mul(e, a.e)
	}
	return e
}

// productOfAll is the product of extents.
func productOfAll(ext []loopir.Expr) product {
	p := product{coef: 1}
	for _, e := range ext {
		p = p.times(productOf(e))
	}
	return p
}
