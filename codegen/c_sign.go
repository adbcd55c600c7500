package codegen

import "github.com/kilnrt/kiln/loopir"

// Signs of integer expressions, for printing floor division as C's own where it agrees.

// isNonNeg reports an integer expression that cannot be negative: constants ≥ 0, loop
// variables of loops starting at ≥ 0, dims, and sums, products, quotients, remainders,
// minima and maxima of such.
func (e *cEmitter) isNonNeg(x loopir.Expr) bool {
	switch x := x.(type) {
	case *loopir.IntImm:
		return x.V >= 0
	case *loopir.Var:
		return e.nonNeg[x]
	case *loopir.Binary:
		switch x.Op {
		case loopir.Add, loopir.Mul, loopir.Min, loopir.Max:
			return e.isNonNeg(x.A) && e.isNonNeg(x.B)
		case loopir.Div, loopir.Mod:
			return e.isNonNeg(x.A) && e.isPositive(x.B)
		}
	}
	return false
}

// isPositive reports an integer expression that is ≥ 1 here: positive constants, dims
// that are factors of an enclosing loop's extent, and products of such, or maxima with
// one of them.
func (e *cEmitter) isPositive(x loopir.Expr) bool {
	switch x := x.(type) {
	case *loopir.IntImm:
		return x.V > 0
	case *loopir.Var:
		return e.positive[x] > 0
	case *loopir.Binary:
		switch x.Op {
		case loopir.Mul:
			return e.isPositive(x.A) && e.isPositive(x.B)
		case loopir.Max:
			return e.isPositive(x.A) || e.isPositive(x.B)
		}
	}
	return false
}

// inside records what running the body of loop s proves, and returns the function that
// forgets it: its extent is at least 1, so when the extent is a product of non-negative
// factors, each dim among them is at least 1 (a symbolic split or fuse divides by such
// extents, and C's own / and % are then floor division, which the C compiler hoists
// and vectorizes around where it cannot with kiln_floordiv).
func (e *cEmitter) inside(s *loopir.For) func() {
	var dims []*loopir.Var
	var factors func(x loopir.Expr) bool
	factors = func(x loopir.Expr) bool {
		if b, ok := x.(*loopir.Binary); ok && b.Op == loopir.Mul {
			return factors(b.A) && factors(b.B)
		}
		if v, ok := x.(*loopir.Var); ok && e.isDim(v) {
			dims = append(dims, v)
		}
		return e.isNonNeg(x)
	}
	if !factors(s.Extent) {
		dims = nil
	}
	if e.positive == nil {
		e.positive = map[*loopir.Var]int{}
	}
	for _, d := range dims {
		e.positive[d]++
	}
	e.loopDepth++
	return func() {
		e.loopDepth--
		for _, d := range dims {
			e.positive[d]--
		}
	}
}

func (e *cEmitter) isDim(v *loopir.Var) bool {
	for _, d := range e.f.Dims {
		if d == v {
			return true
		}
	}
	return false
}
