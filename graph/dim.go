package graph

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/kilnrt/kiln/tensor"
)

// Dim is one extent of a shape: a constant, or a polynomial with integer coefficients over
// named symbols (ONNX dim_param or fresh symbols), e.g. "batch", "s+1", "2*b*s".
// The zero Dim is the constant 0. Dims are immutable values; compare them with Equal.
//
// Arithmetic is checked: a constant or coefficient that leaves int64 makes the result an
// overflowed Dim (Overflowed), which stays overflowed through further arithmetic, is
// neither constant nor divisible, and is refused by CheckTypeSize, so no type carries a
// wrapped-around extent.
type Dim struct {
	c     int64
	terms []term // sorted by monomial key, no zero coefficients
	ovf   bool   // some step of the arithmetic that made it overflowed
}

// overflowed is the result of arithmetic that left int64.
var overflowed = Dim{ovf: true}

// Overflowed reports whether d came from arithmetic that overflowed int64.
func (d Dim) Overflowed() bool { return d.ovf }

type term struct {
	coef int64
	syms []string // sorted, may repeat (b*b)
}

func (t term) key() string { return strings.Join(t.syms, "*") }

// Const returns a constant dim.
func Const(n int64) Dim { return Dim{c: n} }

// Sym returns the dim named by a symbol.
func Sym(name string) Dim { return Dim{terms: []term{{coef: 1, syms: []string{name}}}} }

// IsConst reports whether d has no symbols (and did not overflow).
func (d Dim) IsConst() bool { return len(d.terms) == 0 && !d.ovf }

// Value is the constant value; ok is false for a symbolic or overflowed dim.
func (d Dim) Value() (v int64, ok bool) { return d.c, len(d.terms) == 0 && !d.ovf }

// IsSym reports whether d is exactly one symbol, and returns its name.
func (d Dim) IsSym() (string, bool) {
	if d.c == 0 && len(d.terms) == 1 && d.terms[0].coef == 1 && len(d.terms[0].syms) == 1 {
		return d.terms[0].syms[0], true
	}
	return "", false
}

// Symbols lists the distinct symbols d uses, sorted.
func (d Dim) Symbols() []string {
	var out []string
	for _, t := range d.terms {
		out = append(out, t.syms...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Equal compares canonical forms.
func (d Dim) Equal(o Dim) bool {
	if d.ovf || o.ovf {
		return false // nothing is known about an overflowed extent
	}
	if d.c != o.c || len(d.terms) != len(o.terms) {
		return false
	}
	for i := range d.terms {
		if d.terms[i].coef != o.terms[i].coef || d.terms[i].key() != o.terms[i].key() {
			return false
		}
	}
	return true
}

// The most terms a Dim keeps, and the most symbols in one term. A dim past them (a
// Concat of thousands of distinct symbolic extents, products of sums multiplied out)
// becomes a symbol of its own, unknown to the module, so that shape arithmetic never
// costs more than a bounded polynomial per operation: inference of a model stays linear
// in its nodes, and a shape that needed such a dim is not resolved later. 256 terms
// hold the per-class results of a detection head over COCO's 91 classes concatenated
// (torchvision's SSD and R-CNN exports: one NonZero count per class).
const (
	maxDimTerms = 256
	maxTermSyms = 16
)

var tooLarge atomic.Int64

// tooLargeDim names an extent too large to keep as a polynomial.
func tooLargeDim() Dim { return Sym(fmt.Sprintf("_big%d", tooLarge.Add(1))) }

func normalize(c int64, ts []term) Dim {
	type keyed struct {
		term
		key string
	}
	acc := map[string]int{}
	var out []keyed
	for _, t := range ts {
		if len(t.syms) > maxTermSyms {
			return tooLargeDim()
		}
		k := t.key()
		if i, ok := acc[k]; ok {
			var sum bool
			if out[i].coef, sum = tensor.SignedAdd(out[i].coef, t.coef); !sum {
				return overflowed
			}
			continue
		}
		acc[k] = len(out)
		out = append(out, keyed{t, k})
	}
	out = slices.DeleteFunc(out, func(t keyed) bool { return t.coef == 0 })
	if len(out) > maxDimTerms {
		return tooLargeDim()
	}
	slices.SortFunc(out, func(a, b keyed) int {
		if len(a.syms) != len(b.syms) {
			return len(b.syms) - len(a.syms)
		}
		return strings.Compare(a.key, b.key)
	})
	if len(out) == 0 {
		return Dim{c: c}
	}
	terms := make([]term, len(out))
	for i, t := range out {
		terms[i] = t.term
	}
	return Dim{c: c, terms: terms}
}

// Add returns d+o.
func (d Dim) Add(o Dim) Dim {
	c, ok := tensor.SignedAdd(d.c, o.c)
	if !ok || d.ovf || o.ovf {
		return overflowed
	}
	return normalize(c, append(slices.Clone(d.terms), o.terms...))
}

// Neg returns -d.
func (d Dim) Neg() Dim { return d.Scale(-1) }

// Sub returns d-o.
func (d Dim) Sub(o Dim) Dim { return d.Add(o.Neg()) }

// Scale returns k*d.
func (d Dim) Scale(k int64) Dim {
	if d.ovf {
		return overflowed
	}
	ts := make([]term, len(d.terms))
	for i, t := range d.terms {
		coef, ok := tensor.SignedMul(t.coef, k)
		if !ok {
			return overflowed
		}
		ts[i] = term{coef: coef, syms: t.syms}
	}
	c, ok := tensor.SignedMul(d.c, k)
	if !ok {
		return overflowed
	}
	return normalize(c, ts)
}

// Mul returns d*o.
func (d Dim) Mul(o Dim) Dim {
	if d.ovf || o.ovf {
		return overflowed
	}
	if len(d.terms)*len(o.terms) > maxDimTerms {
		return tooLargeDim()
	}
	bad := false
	mul := func(a, b int64) int64 {
		p, ok := tensor.SignedMul(a, b)
		bad = bad || !ok
		return p
	}
	var ts []term
	for _, a := range d.terms {
		ts = append(ts, term{mul(a.coef, o.c), a.syms})
		for _, b := range o.terms {
			s := append(slices.Clone(a.syms), b.syms...)
			slices.Sort(s)
			ts = append(ts, term{mul(a.coef, b.coef), s})
		}
	}
	for _, b := range o.terms {
		ts = append(ts, term{mul(b.coef, d.c), b.syms})
	}
	c := mul(d.c, o.c)
	if bad {
		return overflowed
	}
	return normalize(c, ts)
}

// Div returns d/o when the division is exact in canonical form (a constant divisor that
// divides every coefficient, or a divisor that equals d or one of its monomial factors).
func (d Dim) Div(o Dim) (Dim, bool) {
	if d.ovf || o.ovf {
		return Dim{}, false
	}
	if v, ok := o.Value(); ok {
		if v == 0 {
			return Dim{}, false
		}
		if d.c%v != 0 {
			return Dim{}, false
		}
		ts := make([]term, len(d.terms))
		for i, t := range d.terms {
			if t.coef%v != 0 {
				return Dim{}, false
			}
			ts[i] = term{t.coef / v, t.syms}
		}
		return normalize(d.c/v, ts), true
	}
	if d.Equal(o) {
		return Const(1), true
	}
	// o = k*monomial: divide each term of d (d must have no constant part).
	if len(o.terms) == 1 && o.c == 0 && d.c == 0 {
		ot := o.terms[0]
		ts := make([]term, len(d.terms))
		for i, t := range d.terms {
			rest, ok := removeSyms(t.syms, ot.syms)
			if !ok || t.coef%ot.coef != 0 {
				return Dim{}, false
			}
			ts[i] = term{t.coef / ot.coef, rest}
		}
		var c int64
		var keep []term
		for _, t := range ts {
			if len(t.syms) == 0 {
				c += t.coef
			} else {
				keep = append(keep, t)
			}
		}
		return normalize(c, keep), true
	}
	return Dim{}, false
}

func removeSyms(from, sub []string) ([]string, bool) {
	rest := slices.Clone(from)
	for _, s := range sub {
		i := slices.Index(rest, s)
		if i < 0 {
			return nil, false
		}
		rest = slices.Delete(rest, i, i+1)
	}
	return rest, true
}

// Subst replaces each symbol of d that s maps by its dim (the others stay): a symbol
// found to equal another extent. Overflow gives the overflowed dim, as the arithmetic
// does.
func (d Dim) Subst(s map[string]Dim) Dim {
	if d.ovf || len(s) == 0 {
		return d
	}
	hit := false
	for _, t := range d.terms {
		for _, x := range t.syms {
			_, ok := s[x]
			hit = hit || ok
		}
	}
	if !hit {
		return d
	}
	out := Const(d.c)
	for _, t := range d.terms {
		p := Const(t.coef)
		for _, x := range t.syms {
			v, ok := s[x]
			if !ok {
				v = Sym(x)
			}
			p = p.Mul(v)
		}
		out = out.Add(p)
	}
	return out
}

// Eval substitutes symbol values; ok is false if a symbol is unbound, or if d or the
// evaluation overflows int64.
func (d Dim) Eval(env map[string]int64) (int64, bool) {
	if d.ovf {
		return 0, false
	}
	v := d.c
	for _, t := range d.terms {
		p := t.coef
		for _, s := range t.syms {
			x, ok := env[s]
			if !ok {
				return 0, false
			}
			if p, ok = tensor.SignedMul(p, x); !ok {
				return 0, false
			}
		}
		var ok bool
		if v, ok = tensor.SignedAdd(v, p); !ok {
			return 0, false
		}
	}
	return v, true
}

// String prints the canonical form: "3", "batch", "s+1", "2*b*s-4".
func (d Dim) String() string {
	if d.ovf {
		return "overflow"
	}
	if len(d.terms) == 0 {
		return strconv.FormatInt(d.c, 10)
	}
	var b strings.Builder
	for i, t := range d.terms {
		coef := t.coef
		if coef < 0 {
			b.WriteString("-")
			coef = -coef
		} else if i > 0 {
			b.WriteString("+")
		}
		if coef != 1 {
			fmt.Fprintf(&b, "%d*", coef)
		}
		b.WriteString(t.key())
	}
	if d.c > 0 {
		fmt.Fprintf(&b, "+%d", d.c)
	} else if d.c < 0 {
		fmt.Fprintf(&b, "%d", d.c)
	}
	return b.String()
}

// ParseDim parses the String form (sums of products of integers and identifiers).
func ParseDim(s string) (Dim, error) {
	s = strings.ReplaceAll(s, " ", "")
	if s == "" {
		return Dim{}, fmt.Errorf("empty dim")
	}
	var out Dim
	i := 0
	for i < len(s) {
		sign := int64(1)
		if s[i] == '+' || s[i] == '-' {
			if s[i] == '-' {
				sign = -1
			}
			i++
		}
		j := i
		for j < len(s) && s[j] != '+' && s[j] != '-' {
			j++
		}
		if j == i {
			return Dim{}, fmt.Errorf("bad dim %q", s)
		}
		prod := Const(sign)
		for _, f := range strings.Split(s[i:j], "*") {
			if f == "" {
				return Dim{}, fmt.Errorf("bad dim %q", s)
			}
			if n, err := strconv.ParseInt(f, 10, 64); err == nil {
				prod = prod.Scale(n)
			} else if isIdent(f) {
				prod = prod.Mul(Sym(f))
			} else {
				return Dim{}, fmt.Errorf("bad factor %q in dim %q", f, s)
			}
		}
		out = out.Add(prod)
		i = j
	}
	return out, nil
}

func isIdent(s string) bool {
	for i, r := range s {
		ok := r == '_' || r == '.' || r == '?' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (i > 0 && r >= '0' && r <= '9')
		if !ok {
			return false
		}
	}
	return s != ""
}

// Term is one monomial of a Dim: Coef times the product of Syms (sorted; a symbol
// repeats for a power).
type Term struct {
	Coef int64
	Syms []string
}

// Poly returns d as its constant and its terms (d = c + Σ terms), for code that turns
// dims into expressions of its own (kernel extents, shape programs).
func (d Dim) Poly() (c int64, terms []Term) {
	for _, t := range d.terms {
		terms = append(terms, Term{Coef: t.coef, Syms: slices.Clone(t.syms)})
	}
	return d.c, terms
}
