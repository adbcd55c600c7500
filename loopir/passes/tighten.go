package passes

import "github.com/kilnrt/kiln/loopir"

// TightenLoopGuard moves a bound on a loop's own variable out of the guard of its whole
// body into its extent: for v in [lo, lo+ext) { if (b + v < B && rest) { S } }, with b and
// B not mentioning v or the loops inside, becomes for v in [lo, lo + min(ext, B - b - lo))
// { if (rest) { S } } (v <= B as v < B + 1). Split tails leave such guards on epilogue
// loops (a pixel tile of 48 over 784 pixels guards each pixel with tile·48 + p < 784);
// compilers do not vectorize the guarded loop (a 64-bit mask against float lanes), they
// do the bounded one. Serial and vectorized loops only (unrolled loops are already
// written out, and the GPU pipeline leaves its guards to the launch). The iterations
// left are exactly those whose guard held; an extent that comes out negative runs none.
func TightenLoopGuard(f *loopir.PrimFunc) *loopir.PrimFunc {
	body := loopir.MapStmt(f.Body, func(e loopir.Expr) loopir.Expr { return e }, func(s loopir.Stmt) loopir.Stmt {
		loop, guard, bound, ok := guardedLoop(s)
		if !ok || (loop.Kind != loopir.Serial && loop.Kind != loopir.Vectorized) {
			return nil
		}
		var limit loopir.Expr
		var rest []loopir.Expr
		for _, c := range loopir.Conjuncts(guard.Cond) {
			if limit == nil {
				if l, ok := upperLimit(c, loop.Var, bound); ok {
					limit = l
					continue
				}
			}
			rest = append(rest, c)
		}
		if limit == nil {
			return nil
		}
		ext := loopir.Bin(loopir.Min, loop.Extent, loopir.Bin(loopir.Sub, limit, loop.Min))
		var inner loopir.Stmt = guard.Then
		if len(rest) > 0 {
			inner = &loopir.IfThenElse{Cond: and(rest), Then: guard.Then}
		}
		return &loopir.For{Var: loop.Var, Min: loop.Min, Extent: ext, Kind: loop.Kind, Body: inner, Annotations: loop.Annotations}
	})
	return &loopir.PrimFunc{Name: f.Name, Params: f.Params, Dims: f.Dims, Body: body, NoContract: f.NoContract}
}

// upperLimit reads c as v < L: c is x < B or x <= B with x = b + 1·v (affine in v with
// coefficient 1) and b, B free of the variables in bound; L is B - b (plus 1 for <=).
func upperLimit(c loopir.Expr, v *loopir.Var, bound map[*loopir.Var]bool) (loopir.Expr, bool) {
	cmp, ok := c.(*loopir.Binary)
	if !ok || (cmp.Op != loopir.LT && cmp.Op != loopir.LE) || mentions(cmp.B, bound) {
		return nil, false
	}
	base, coefs, ok := loopir.Affine(cmp.A, []*loopir.Var{v})
	if !ok || mentions(base, bound) {
		return nil, false
	}
	if k, ok := coefs[0].(*loopir.IntImm); !ok || k.V != 1 {
		return nil, false
	}
	limit := loopir.Bin(loopir.Sub, cmp.B, base)
	if cmp.Op == loopir.LE {
		limit = loopir.Bin(loopir.Add, limit, loopir.Int(1))
	}
	return limit, true
}
