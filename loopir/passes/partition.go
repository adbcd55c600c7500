package passes

import (
	"math"
	"slices"

	"github.com/kilnrt/kiln/loopir"
)

// Partition limits: a loop splits into at most maxPartitionPieces loops, and one
// function's partitions copy at most maxPartitionStores stores in all (each piece past
// the first is a copy of the loop's body).
const (
	maxPartitionPieces = 3
	maxPartitionStores = 4096
)

// PartitionBoundaryLoops splits a serial loop whose body tests its own variable against
// a bound into the ranges where every such test is decided, each range a loop of its own
// simplified knowing its range: for v in [0, 7) { ... select(16v - 1 >= 0, x[...], 0) ... }
// becomes for v in [0, 1) { ... 0 ... } and for v in [1, 7) { ... x[...] ... }. A
// convolution that reads its input through the zero padding's select (the depthwise
// strategy's inlined pad) then reads it plainly everywhere but at the borders, the clamps
// that kept the discarded reads in bounds gone too.
//
// A test is a conjunct of a select's condition (loopTests) that compares an affine
// function k·v + b (k a non-zero constant) against zero, b free of loads and of the
// loops inside v of non-constant range, and bounded by the ranges of the loops around
// and inside v; its truth is fixed on each side
// of the points where k·v + b crosses zero for b's least and greatest values. Pieces
// are split at those points (at most maxPartitionPieces pieces) when the pieces whose
// every test is decided hold at least half the iterations (a test whose bound is a
// fused loop's remainder may be decided for one iteration only), inner loops after
// outer ones, each piece again; loops whose body checks an index read from data are
// left alone (see UnswitchInvariantSelect), as are loops that call a micro-kernel
// (callsIntrin) and parallel, vectorized and symbolic loops.
// Every iteration runs exactly once, in the same order: the pieces are consecutive.
func PartitionBoundaryLoops(f *loopir.PrimFunc) *loopir.PrimFunc {
	p := &partitioner{a: loopir.NewAnalyzer(f.Dims), budget: maxPartitionStores}
	return &loopir.PrimFunc{Name: f.Name, Params: f.Params, Dims: f.Dims, Body: p.stmt(f.Body), NoContract: f.NoContract}
}

type partitioner struct {
	a      *loopir.Analyzer
	budget int // stores the partitions may still copy
}

// stmt partitions the loops of s, outermost first, binding each loop's range on the
// way down.
func (p *partitioner) stmt(s loopir.Stmt) loopir.Stmt {
	switch s := s.(type) {
	case loopir.Seq:
		out := make(loopir.Seq, len(s))
		for i, c := range s {
			out[i] = p.stmt(c)
		}
		return out
	case *loopir.For:
		if pieces := p.split(s); pieces != nil {
			out := make(loopir.Seq, len(pieces))
			for i, piece := range pieces {
				out[i] = p.loop(piece)
			}
			return out
		}
		return p.loop(s)
	case *loopir.IfThenElse:
		return &loopir.IfThenElse{Cond: s.Cond, Then: p.stmt(s.Then), Else: p.stmt(s.Else)}
	case *loopir.Allocate:
		return &loopir.Allocate{Buf: s.Buf, Body: p.stmt(s.Body)}
	}
	return s
}

// loop partitions the loops inside l, its variable bound to its range.
func (p *partitioner) loop(l *loopir.For) *loopir.For {
	p.a.BindLoop(l.Var, l.Min, l.Extent)
	return &loopir.For{Var: l.Var, Min: l.Min, Extent: l.Extent, Kind: l.Kind, Body: p.stmt(l.Body), Annotations: l.Annotations}
}

// split returns l's pieces, each simplified over its own range, or nil when l stays
// whole: not a serial loop of constant range, no test of its variable changes its truth
// inside the range, too many pieces, or the budget is spent.
func (p *partitioner) split(l *loopir.For) []*loopir.For {
	lo, ok1 := l.Min.(*loopir.IntImm)
	ext, ok2 := l.Extent.(*loopir.IntImm)
	if !ok1 || !ok2 || l.Kind != loopir.Serial || ext.V < 2 || checksIndex(l.Body) || callsIntrin(l.Body) {
		return nil
	}
	hi := lo.V + ext.V
	inner := p.bindInner(l.Body)
	var cuts []int64
	var open [][2]int64 // each test's range of v where its truth depends on b
	for _, c := range loopTests(l.Body) {
		x, ok := p.crossings(c, l.Var, inner)
		if !ok {
			continue
		}
		open = append(open, x)
		for _, x := range x {
			if x > lo.V && x < hi && !slices.Contains(cuts, x) {
				cuts = append(cuts, x)
			}
		}
	}
	if len(cuts) == 0 || len(cuts)+1 > maxPartitionPieces {
		return nil
	}
	slices.Sort(cuts)
	bounds := append(append([]int64{lo.V}, cuts...), hi)
	if decided(bounds, open)*2 < ext.V {
		return nil // most iterations would keep their tests: copies for nothing
	}
	cost := len(cuts) * countStores(l.Body)
	if cost > p.budget {
		return nil
	}
	p.budget -= cost
	pieces := make([]*loopir.For, len(bounds)-1)
	for i := range pieces {
		piece := &loopir.For{Var: l.Var, Min: loopir.Int(bounds[i]), Extent: loopir.Int(bounds[i+1] - bounds[i]), Kind: l.Kind, Body: l.Body, Annotations: l.Annotations}
		pieces[i] = simplifyStmt(p.a, piece).(*loopir.For)
	}
	return pieces
}

// bindInner binds the variables of the loops in s whose range is constant (a unit loop
// the schedule left, a tile's columns) and returns those of the others.
func (p *partitioner) bindInner(s loopir.Stmt) map[*loopir.Var]bool {
	out := map[*loopir.Var]bool{}
	loopir.MapStmt(s, func(e loopir.Expr) loopir.Expr { return e }, func(x loopir.Stmt) loopir.Stmt {
		if f, ok := x.(*loopir.For); ok {
			_, c1 := f.Min.(*loopir.IntImm)
			_, c2 := f.Extent.(*loopir.IntImm)
			if c1 && c2 {
				p.a.BindLoop(f.Var, f.Min, f.Extent)
			} else {
				out[f.Var] = true
			}
		}
		return nil
	})
	return out
}

// crossings are the values of v between which the test c (a comparison of k·v + b, b
// free of v and of inner) may change its truth, in order: for b's least and greatest
// values, the first v at which k·v + b >= 0 holds (k > 0) or fails (k < 0). Below the
// first and from the second on, c's truth is the same for every b; false when c is no
// such test or b is unbounded.
func (p *partitioner) crossings(c loopir.Expr, v *loopir.Var, inner map[*loopir.Var]bool) ([2]int64, bool) {
	e, ok := atLeastZero(c)
	if !ok || !movableCond(e) || mentions(e, inner) {
		return [2]int64{}, false
	}
	base, coefs, ok := loopir.Affine(e, []*loopir.Var{v})
	if !ok {
		return [2]int64{}, false
	}
	k, ok := coefs[0].(*loopir.IntImm)
	if !ok || k.V == 0 {
		return [2]int64{}, false
	}
	b := p.a.Bound(base)
	if b.Min == math.MinInt64 || b.Max == math.MaxInt64 {
		return [2]int64{}, false
	}
	var out [2]int64
	for i, r := range []int64{b.Min, b.Max} {
		if k.V > 0 {
			out[i] = ceilDiv(-r, k.V) // k·v + r >= 0 from here on
		} else {
			out[i] = floorDivInt(r, -k.V) + 1 // |k|·v <= r up to here
		}
	}
	if out[0] > out[1] {
		out[0], out[1] = out[1], out[0]
	}
	return out, true
}

// decided is the number of iterations in the pieces between consecutive bounds that
// lie outside every test's open range (crossings): those whose tests the piece's
// range decides.
func decided(bounds []int64, open [][2]int64) int64 {
	n := int64(0)
	for i := 0; i+1 < len(bounds); i++ {
		lo, hi := bounds[i], bounds[i+1]
		all := true
		for _, o := range open {
			if lo < o[1] && o[0] < hi {
				all = false
				break
			}
		}
		if all {
			n += hi - lo
		}
	}
	return n
}

// atLeastZero rewrites the integer comparison c as e >= 0.
func atLeastZero(c loopir.Expr) (loopir.Expr, bool) {
	b, ok := c.(*loopir.Binary)
	if !ok || b.A.DType().IsFloat() || b.B.DType().IsFloat() {
		return nil, false
	}
	sub := func(x, y loopir.Expr) loopir.Expr { return loopir.Bin(loopir.Sub, x, y) }
	one := loopir.Int(1)
	switch b.Op {
	case loopir.GE:
		return sub(b.A, b.B), true
	case loopir.GT:
		return sub(sub(b.A, b.B), one), true
	case loopir.LE:
		return sub(b.B, b.A), true
	case loopir.LT:
		return sub(sub(b.B, b.A), one), true
	}
	return nil, false
}

// loopTests are the conjuncts of every select's condition in s. A branch's are not: a
// guard around a loop's body becomes its extent (TightenLoopGuard), and a branch costs
// a predicted jump where a select in a vector loop costs a blend per lane and hides
// the loads behind it.
func loopTests(s loopir.Stmt) []loopir.Expr {
	var out []loopir.Expr
	loopir.MapStmt(s, func(e loopir.Expr) loopir.Expr {
		if sel, ok := e.(*loopir.Select); ok {
			out = append(out, loopir.Conjuncts(sel.Cond)...)
		}
		return e
	}, nil)
	return out
}

// callsIntrin reports whether s calls a micro-kernel: a matrix product's loop of row
// tiles split into two loops of calls (bert_tiny's feed-forward product, 6 + 2 tiles)
// took 2.6× the kernel's time, for a reason not established.
func callsIntrin(s loopir.Stmt) bool {
	found := false
	loopir.MapStmt(s, func(e loopir.Expr) loopir.Expr { return e }, func(x loopir.Stmt) loopir.Stmt {
		if _, ok := x.(*loopir.IntrinCall); ok {
			found = true
		}
		return nil
	})
	return found
}

// countStores is the number of stores written in s.
func countStores(s loopir.Stmt) int {
	n := 0
	loopir.MapStmt(s, func(e loopir.Expr) loopir.Expr { return e }, func(x loopir.Stmt) loopir.Stmt {
		if _, ok := x.(*loopir.Store); ok {
			n++
		}
		return nil
	})
	return n
}

// ceilDiv is ⌈a/b⌉ for b > 0; floorDivInt is ⌊a/b⌋ for b > 0.
func ceilDiv(a, b int64) int64 { return -floorDivInt(-a, b) }

func floorDivInt(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
