package kernels

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// computeGroupNorm is GroupNormalization in its IR form (GroupNormalization-21): the
// channels of each instance form num_groups groups of C/num_groups consecutive
// channels, each group (with its spatial extent) is normalized by its own mean and
// variance in the stash type, the result is converted to X's type, and each channel
// takes its own scale and bias there. A float16 or bfloat16 X (with a float32 stash
// type) takes its scale and bias in float32 and is rounded once, at the end: the code
// generators do no half-float arithmetic. The channel count must be static; the batch
// and spatial extents may be symbolic.
func computeGroupNorm(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	a := attrs[graph.GroupNormAttrs](n)
	x := in[0].T
	if len(x.Shape) < 2 || !x.DT.IsFloat() {
		return nil, Unsupported("%v on %v of rank %d", n.Op, x.DT, len(x.Shape))
	}
	stash, at := tensor.DType(a.StashType), x.DT
	if !plainFloat(stash) {
		return nil, Unsupported("%v with stash_type %v (float32 or float64 only)", n.Op, stash)
	}
	if !plainFloat(at) {
		if stash != tensor.Float32 {
			return nil, Unsupported("%v on %v with stash_type %v (float32 only)", n.Op, x.DT, stash)
		}
		at = tensor.Float32
	}
	if len(in) < 3 {
		return nil, Unsupported("%v with %d inputs", n.Op, len(in))
	}
	if err := channelParams(n, x, in[1:3]); err != nil { // also: the channel count is static
		return nil, err
	}
	c, g := x.Shape[1].(*loopir.IntImm).V, a.NumGroups
	if g < 1 || c%g != 0 {
		return nil, Unsupported("%v: %d channels are not divisible by num_groups=%d", n.Op, c, g)
	}
	k := c / g
	scale, bias := in[1].T, in[2].T
	// The statistics reduce a view of x as [N, G, C/G, D1…Dn] over its trailing axes; the
	// view only shapes the reduction, whose elements are read from x itself.
	view := te.Placeholder("groupnorm_view", x.DT, append([]loopir.Expr{x.Shape[0], i64(g), i64(k)}, x.Shape[2:]...)...)
	r := trailingReduction(view, 2)
	toView := func(i []loopir.Expr) []loopir.Expr { // x's index → the view's
		return append([]loopir.Expr{i[0], loopir.Bin(loopir.Div, i[1], i64(k)), loopir.Bin(loopir.Mod, i[1], i64(k))}, i[2:]...)
	}
	xAt := func(v []loopir.Expr) loopir.Expr { // x at the view's index v, in the stash type
		return asType(stash, x.At(append([]loopir.Expr{v[0], add(mul(v[1], i64(k)), v[2])}, v[3:]...)...))
	}
	sum := r.Compute("groupnorm_sum", te.Sum, func(v, _ []loopir.Expr) loopir.Expr { return xAt(v) })
	mean := r.Apply("groupnorm_mean", func(i []loopir.Expr) loopir.Expr { return te.Div(sum.At(i...), countOf(r, stash)) })
	sq := r.Compute("groupnorm_sumsq", te.Sum, func(v, i []loopir.Expr) loopir.Expr {
		d := te.Sub(xAt(v), mean.At(i...))
		return te.Mul(d, d)
	})
	inv := r.Apply("groupnorm_invstd", func(i []loopir.Expr) loopir.Expr {
		v := te.Add(te.Div(sq.At(i...), countOf(r, stash)), loopir.Float(float64(a.Epsilon), stash))
		return te.Div(loopir.Float(1, stash), te.Sqrt(v))
	})
	return []*te.Tensor{te.Compute("groupnorm", x.Shape, func(i []loopir.Expr) loopir.Expr {
		s := r.ResultIndex(toView(i))
		norm := te.Mul(te.Sub(asType(stash, x.At(i...)), mean.At(s...)), inv.At(s...))
		y := te.Add(te.Mul(asType(at, norm), asType(at, scale.At(i[1]))), asType(at, bias.At(i[1])))
		return asType(x.DT, y)
	})}, nil
}
