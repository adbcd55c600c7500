package kernels

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// Dropout is the identity, with a mask of all true, unless training_mode is on and the
// ratio is not 0; both may be run-time inputs, so the kernel decides per run. In
// training mode with a positive ratio an element is dropped (0, mask false) when its
// draw u is below the ratio, and kept scaled by 1/(1-ratio) otherwise. The draw is a
// documented, seeded and reproducible function of the element's row-major index i and
// the seed attribute s, in int64 arithmetic modulo the prime P = 2^31-1 with A = 48271:
//
//	h = i mod P; x1 = (h·A + s mod P + 1) mod P; x2 = x1² mod P
//	x3 = (x2·A + h) mod P; u = (x3² mod P) / P
//
// It is not the generator of any other runtime, so a random run matches no stored
// reference output: the reference evaluator refuses such a run, and a comparison with
// one is not a test.

// Dropout's generator constants (see above).
const (
	dropoutP = 2147483647
	dropoutA = 48271
)

func computeDropout(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	x := in[0].T
	if !plainFloat(x.DT) {
		return nil, Unsupported("%v on %v", n.Op, x.DT)
	}
	// active is the run-time condition "training with a positive ratio", nil when it
	// is false at compile time; ratio is the ratio as a float64 expression
	var ratio loopir.Expr = loopir.Float(0.5, tensor.Float64)
	var active loopir.Expr
	if len(in) > 1 && in[1].Present() {
		r, err := dropoutScalar(n, in[1], "ratio")
		if err != nil {
			return nil, err
		}
		if !plainFloat(r.DType()) {
			return nil, Unsupported("%v with a %v ratio", n.Op, r.DType())
		}
		ratio = te.Cast(tensor.Float64, r)
	}
	if len(in) > 2 && in[2].Present() {
		t, err := dropoutScalar(n, in[2], "training_mode")
		if err != nil {
			return nil, err
		}
		on := loopir.Bin(loopir.NE, t, &loopir.IntImm{V: 0, DT: t.DType()})
		active = loopir.Bin(loopir.And, on, loopir.Bin(loopir.NE, ratio, loopir.Float(0, tensor.Float64)))
		if constZero(in[2]) || constZero(in[1]) {
			active = nil
		}
	}
	if active == nil {
		mask := te.Compute("dropout_mask", x.Shape, func([]loopir.Expr) loopir.Expr {
			return &loopir.IntImm{V: 1, DT: tensor.Bool}
		})
		return []*te.Tensor{copyOf(x), mask}, nil
	}
	seed := attrs[graph.DropoutAttrs](n).Seed % dropoutP
	if seed < 0 {
		seed += dropoutP
	}
	keep := func(i []loopir.Expr) loopir.Expr {
		u := te.Cast(tensor.Float64, dropoutDraw(linearIndex(i, x.Shape), seed))
		kept := loopir.Bin(loopir.GE, u, te.Mul(ratio, loopir.Float(dropoutP, tensor.Float64)))
		return loopir.Bin(loopir.Or, loopir.Bin(loopir.EQ, active, &loopir.IntImm{V: 0, DT: active.DType()}), kept)
	}
	y := te.Compute("dropout", x.Shape, func(i []loopir.Expr) loopir.Expr {
		scale := te.Select(active, te.Div(loopir.Float(1, tensor.Float64), te.Sub(loopir.Float(1, tensor.Float64), ratio)), loopir.Float(1, tensor.Float64))
		v := x.At(i...)
		if x.DT != tensor.Float64 {
			scale = te.Cast(x.DT, scale)
		}
		return te.Select(keep(i), te.Mul(v, scale), loopir.Float(0, x.DT))
	})
	mask := te.Compute("dropout_mask", x.Shape, keep)
	return []*te.Tensor{y, mask}, nil
}

// constZero reports a constant input of one element equal to 0.
func constZero(in Input) bool {
	return in.Const != nil && in.Const.Len() == 1 && in.Const.Float64s()[0] == 0
}

// dropoutScalar reads a one-element input (a scalar or a vector of one).
func dropoutScalar(n *graph.Node, in Input, what string) (loopir.Expr, error) {
	idx := make([]loopir.Expr, len(in.T.Shape))
	for k, e := range in.T.Shape {
		if !isOne(e) {
			return nil, Unsupported("%v with a %s of extent %v", n.Op, what, e)
		}
		idx[k] = i64(0)
	}
	return in.T.At(idx...), nil
}

// dropoutDraw is the draw of the element at linear index i (before the division by P).
func dropoutDraw(i loopir.Expr, seed int64) loopir.Expr {
	mod := func(v loopir.Expr) loopir.Expr { return loopir.Bin(loopir.Mod, v, i64(dropoutP)) }
	h := mod(i)
	x1 := mod(add(mul(h, i64(dropoutA)), i64(seed+1)))
	x2 := mod(mul(x1, x1))
	x3 := mod(add(mul(x2, i64(dropoutA)), h))
	return mod(mul(x3, x3))
}

// linearIndex is the row-major linear index of i in shape.
func linearIndex(i, shape []loopir.Expr) loopir.Expr {
	var lin loopir.Expr = i64(0)
	for k := range i {
		lin = add(mul(lin, shape[k]), i[k])
	}
	return lin
}
