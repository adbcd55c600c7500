package codegen

import "github.com/kilnrt/kiln/loopir"

// serialWork is the work below which a parallel loop runs on the calling thread alone:
// about 32k element operations, some 10–30 µs on one core, which is what waking the
// pool's workers and joining them costs on the machines kiln runs on (futex wake-ups in
// virtual machines are slow). Above it the second thread pays for itself.
const serialWork = 1 << 15

// intrinWork is what one tensor-intrinsic call (a GEMM micro-kernel tile) counts as.
const intrinWork = 1 << 12

// callWork is what one math function call (an exp, a tanh, an erf) counts as.
const callWork = 4

// iterationWork estimates the element operations one iteration of a loop body runs:
// stores with the loads and math calls of their values, and intrinsic calls, multiplied
// by the extents of the loops around them (a vectorized loop counts each lane). Loads
// count because a store that gathers its operands from strided addresses (a layout
// repack fused with a residual Add) costs several times a plain copy: counting the
// store alone kept such 30k-element repacks on one thread. ok is false when an extent
// is not a constant or the estimate reaches limit (the caller then never runs the loop
// serially).
func iterationWork(s loopir.Stmt, limit int64) (work int64, ok bool) {
	switch s := s.(type) {
	case nil:
		return 0, true
	case *loopir.Store:
		return 1 + valueWork(s.Value), true
	case *loopir.TexWrite:
		return 1, true
	case *loopir.IntrinCall:
		return intrinWork, intrinWork < limit
	case loopir.Seq:
		for _, c := range s {
			w, ok := iterationWork(c, limit)
			if !ok {
				return 0, false
			}
			work += w
			if work >= limit {
				return 0, false
			}
		}
		return work, true
	case *loopir.For:
		c, isConst := s.Extent.(*loopir.IntImm)
		if !isConst || c.V < 0 {
			return 0, false
		}
		ext := c.V
		w, ok := iterationWork(s.Body, limit)
		if !ok || ext > 0 && w >= (limit+ext-1)/ext {
			return 0, false
		}
		return ext * w, true
	case *loopir.IfThenElse:
		a, ok1 := iterationWork(s.Then, limit)
		b, ok2 := iterationWork(s.Else, limit)
		return max(a, b), ok1 && ok2
	case *loopir.Allocate:
		return iterationWork(s.Body, limit)
	case *loopir.Block:
		w, ok := iterationWork(s.Body, limit)
		if !ok {
			return 0, false
		}
		i, ok := iterationWork(s.Init, limit)
		return w + i, ok && w+i < limit
	}
	return 0, false
}

// valueWork counts the loads and math calls (callWork each) of a stored value.
func valueWork(e loopir.Expr) int64 {
	var w int64
	loopir.MapExpr(e, func(x loopir.Expr) loopir.Expr {
		switch x.(type) {
		case *loopir.Load, *loopir.TexRead:
			w++
		case *loopir.Call:
			w += callWork
		}
		return x
	})
	return w
}
