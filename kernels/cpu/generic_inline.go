package cpu

import "github.com/kilnrt/kiln/loopir"

// transcendental are the intrinsics that cost tens of cycles an element: a stage that
// calls one is worth a buffer when inlining it would repeat it.
var transcendental = map[loopir.Intrinsic]bool{
	loopir.Exp: true, loopir.Log: true, loopir.Tanh: true, loopir.Sigmoid: true, loopir.Erf: true,
	loopir.Pow: true, loopir.Sin: true, loopir.Cos: true, loopir.Asin: true, loopir.Acos: true,
	loopir.Atan: true, loopir.Asinh: true, loopir.Acosh: true, loopir.Atanh: true,
}

// recomputedInline reports whether inlining block name into its consumers would
// recompute a transcendental function many times over: the block's value calls one,
// and a reduction block reads it at an index that leaves out one of the reader's
// iterators (a table of a transform's twiddle factors, read for every frame of an STFT:
// inlined, every frame would compute its own cosines). The stage then keeps its buffer,
// each element computed once.
func recomputedInline(f *loopir.PrimFunc, name string) bool {
	var prod *loopir.Block
	var blocks []*loopir.Block
	loopir.MapStmt(f.Body, func(e loopir.Expr) loopir.Expr { return e }, func(x loopir.Stmt) loopir.Stmt {
		if b, ok := x.(*loopir.Block); ok {
			blocks = append(blocks, b)
			if b.Name == name {
				prod = b
			}
		}
		return nil
	})
	if prod == nil {
		return false
	}
	st, ok := prod.Body.(*loopir.Store)
	if !ok || !callsTranscendental(st.Value) {
		return false
	}
	for _, b := range blocks {
		if b == prod || !hasReduction(b) {
			continue
		}
		found := false
		loopir.MapStmt(b.Body, func(e loopir.Expr) loopir.Expr {
			ld, ok := e.(*loopir.Load)
			if !ok || ld.Buf != st.Buf {
				return e
			}
			for _, it := range b.Iters {
				if c, ok := it.Extent.(*loopir.IntImm); ok && c.V <= 1 {
					continue
				}
				if !usesAny(ld.Index, map[*loopir.Var]bool{it.Var: true}) {
					found = true
				}
			}
			return e
		}, nil)
		if found {
			return true
		}
	}
	return false
}

// callsTranscendental reports whether e calls a transcendental intrinsic.
func callsTranscendental(e loopir.Expr) bool {
	found := false
	loopir.MapExpr(e, func(x loopir.Expr) loopir.Expr {
		if c, ok := x.(*loopir.Call); ok && transcendental[c.Fn] {
			found = true
		}
		return x
	})
	return found
}

// hasReduction reports whether a block has a reduction iterator.
func hasReduction(b *loopir.Block) bool {
	for _, it := range b.Iters {
		if it.Kind == loopir.Reduction {
			return true
		}
	}
	return false
}
