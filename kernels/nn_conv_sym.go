package kernels

import (
	"math"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
)

// Convolution over symbolic spatial extents (a 1-D convolution over a sequence of any
// length): the output extent is an expression of the input's, and every read of the
// input is guarded against both ends and clamped into it.

// ResolveConvSym is ResolveConv over input extents that may be symbolic, with explicit
// (NOTSET) or VALID padding, or SAME with stride 1 on the symbolic axes (its padding
// is then span - 1, whatever the extent): a symbolic axis gets Out -1 and its output
// extent max(0, floor((in + pads - span) / stride) + 1) in OutExpr (SAME: in).
func ResolveConvSym(in []loopir.Expr, w graph.Window, group int64) (ConvGeometry, error) {
	for d, e := range in {
		if _, static := e.(*loopir.IntImm); !static && w.Mode.Same() && w.Strides[d] != 1 {
			return ConvGeometry{}, Unsupported("Conv with auto_pad %s and stride %d over a symbolic extent", w.Mode, w.Strides[d])
		}
	}
	sp := len(in)
	static := make([]int64, sp)
	for d, e := range in {
		if c, ok := e.(*loopir.IntImm); ok {
			static[d] = c.V
		} else { // any extent: the geometry of this axis does not depend on it
			static[d] = w.Span(d)
		}
	}
	g, err := ResolveConv(static, w, group)
	if err != nil {
		return ConvGeometry{}, err
	}
	g.OutExpr = make([]loopir.Expr, sp)
	for d, e := range in {
		if _, ok := e.(*loopir.IntImm); ok {
			continue
		}
		g.Out[d] = -1
		if w.Mode.Same() {
			g.OutExpr[d] = e
			continue
		}
		pb, pe, _ := w.StaticPads(d)
		num := add(e, i64(pb+pe-w.Span(d)))
		g.OutExpr[d] = loopir.Bin(loopir.Max, add(div(num, i64(g.Strides[d])), i64(1)), i64(0))
	}
	return g, nil
}

// symbolic reports an axis whose input extent is symbolic.
func (g ConvGeometry) symbolic(d int) bool { return d < len(g.OutExpr) && g.OutExpr[d] != nil }

// convExtents is x's channel and spatial extents for Conv: static, or -1 on the axes
// that g resolved as symbolic.
func convExtents(x *te.Tensor, g ConvGeometry) ([]int64, error) {
	out := make([]int64, 0, len(x.Shape)-1)
	for d, e := range x.Shape[1:] {
		c, ok := e.(*loopir.IntImm)
		switch {
		case ok:
			out = append(out, c.V)
		case d > 0 && g.symbolic(d-1):
			out = append(out, -1)
		default:
			return nil, Unsupported("%s: extent %d is symbolic (%v); Conv needs it static", x.Name, d+1, e)
		}
	}
	return out, nil
}

// symTapAxis is a convolution axis over an input of symbolic extent in: input index
// o·s + j·dl - pb, guarded on both sides.
func symTapAxis(in loopir.Expr, taps, s, dl, pb int64) tapAxis {
	return tapAxis{
		taps: taps,
		in:   -1,
		inE:  in,
		at: func(oi, j loopir.Expr, _ int64) (loopir.Expr, loopir.Expr, loopir.Expr) {
			return sub(add(mul(oi, i64(s)), mul(j, i64(dl))), i64(pb)), j, nil
		},
		xRange: func(jlo, jhi int64) (int64, int64) { return jlo*dl - pb, math.MaxInt64 },
	}
}
