package kernels

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
)

// computeLRN is local response normalization across channels of x [N, C, d...]:
// y = x / (bias + alpha/size · Σ x²)^beta, the sum over the channels
// [c - ⌊(size-1)/2⌋, c + ⌈(size-1)/2⌉] that exist (a guarded read, so the window
// stays inside [0, C)); a window at least as wide as the channels sums over the
// channels, so its size bounds no loop.
func computeLRN(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	a := attrs[graph.LRNAttrs](n)
	x := in[0].T
	if !plainFloat(x.DT) || len(x.Shape) < 2 {
		return nil, Unsupported("%v on %v of rank %d", n.Op, x.DT, len(x.Shape))
	}
	if a.Size < 1 {
		return nil, Unsupported("%v with size %d", n.Op, a.Size)
	}
	dt := x.DT
	channels := x.Shape[1]
	lo := (a.Size - 1) / 2
	hi := a.Size - 1 - lo
	// a window at least as wide as the channels runs over the channels instead (its
	// taps past them read nothing)
	taps, wide := i64(a.Size), false
	if c, ok := channels.(*loopir.IntImm); ok && a.Size >= c.V {
		taps, wide = channels, true
	}
	r := te.RAxis("lrn_k", taps)
	sq := te.Compute("lrn_sumsq", x.Shape, func(i []loopir.Expr) loopir.Expr {
		c := add(sub(i[1], i64(lo)), r.Var)
		in := inside(c, channels)
		if wide {
			c = r.Var
			in = loopir.Bin(loopir.And, loopir.Bin(loopir.GE, c, sub(i[1], i64(lo))), loopir.Bin(loopir.LE, c, add(i[1], i64(hi))))
		}
		safe := loopir.Bin(loopir.Max, loopir.Bin(loopir.Min, c, sub(channels, i64(1))), i64(0))
		idx := append([]loopir.Expr{i[0], safe}, i[2:]...)
		v := x.At(idx...)
		return te.Sum(te.Select(in, te.Mul(v, v), loopir.Float(0, dt)), r)
	})
	coef := loopir.Float(float64(a.Alpha)/float64(a.Size), dt)
	return []*te.Tensor{te.Compute("lrn", x.Shape, func(i []loopir.Expr) loopir.Expr {
		base := te.Add(loopir.Float(float64(a.Bias), dt), te.Mul(coef, sq.At(i...)))
		return te.Div(x.At(i...), te.Pow(base, loopir.Float(float64(a.Beta), dt)))
	})}, nil
}
