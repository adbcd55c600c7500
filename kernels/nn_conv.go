package kernels

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
)

// Convolution over N spatial axes (1-D, 2-D, 3-D...), NC... activations and
// M C/group k... weights.

// ConvGeometry is a convolution's resolved window, per spatial axis: stride, dilation,
// padding before the first input element (auto_pad applied) and output extent.
type ConvGeometry struct {
	Strides, Dilations, PadBegin, Out []int64
	Group                             int64
	// OutExpr, when set, holds per axis the output extent of an axis whose input
	// extent is symbolic (Out is then -1 there), nil for a static axis; see
	// ResolveConvSym.
	OutExpr []loopir.Expr
}

// ResolveConv is the geometry of a Conv (or pooling) window w over the input spatial
// extents in; graph.Window.Axis defines it.
func ResolveConv(in []int64, w graph.Window, group int64) (ConvGeometry, error) {
	g := ConvGeometry{Group: group}
	for d := range in {
		if err := checkWindowAxis(w, d); err != nil {
			return ConvGeometry{}, err
		}
		a := w.Axis(d, in[d])
		g.Strides = append(g.Strides, w.Strides[d])
		g.Dilations = append(g.Dilations, w.Dilations[d])
		g.PadBegin = append(g.PadBegin, a.PadBegin)
		g.Out = append(g.Out, a.Out)
	}
	return g, nil
}

// checkWindowAxis refuses an axis of w whose stride, dilation or kernel extent is not
// positive (graph.CheckAttrs refuses such attributes; a weight may still have an empty
// spatial extent).
func checkWindowAxis(w graph.Window, d int) error {
	if s, dl, k := w.Strides[d], w.Dilations[d], w.Kernel[d]; s <= 0 || dl <= 0 || k <= 0 {
		return Unsupported("stride %d, dilation %d, kernel %d", s, dl, k)
	}
	return nil
}

// convWindow is the window of a Conv node over weight extents we, its attribute errors
// as ErrNoKernel (inference refuses them first).
func convWindow(a *graph.ConvAttrs, we []int64) (graph.Window, error) {
	w, err := graph.ConvWindow(a, we[2:])
	if err != nil {
		return graph.Window{}, Unsupported("%v", err)
	}
	return w, nil
}

// convOperands checks the operands of a Conv or ConvTranspose node: float data, data
// and weights of one rank ≥ 3, static channel and spatial extents (xe, from axis 1),
// static weights (we) that agree with kernel_shape; b is the optional bias.
func convOperands(n *graph.Node, in []Input, kernelShape []int64) (x, w, b *te.Tensor, xe, we []int64, err error) {
	x, w = in[0].T, in[1].T
	if len(in) > 2 {
		b = in[2].T
	}
	if err = nnFloat(n.Op, x, w, b); err != nil {
		return
	}
	if len(x.Shape) < 3 || len(w.Shape) != len(x.Shape) {
		err = Unsupported("%v of input rank %d with weight rank %d", n.Op, len(x.Shape), len(w.Shape))
		return
	}
	if xe, err = staticFrom(x, 1); err != nil {
		if n.Op != graph.OpConv || !isStatic(x.Shape[1:2]) {
			return
		}
		// Conv takes symbolic spatial extents (ResolveConvSym): -1 stands for them
		err, xe = nil, []int64{x.Shape[1].(*loopir.IntImm).V}
		for _, e := range x.Shape[2:] {
			xe = append(xe, -1)
			if c, ok := e.(*loopir.IntImm); ok {
				xe[len(xe)-1] = c.V
			}
		}
	}
	if we, err = Extents(w); err != nil {
		return
	}
	for d, ks := range kernelShape {
		if d+2 >= len(we) || ks != we[d+2] {
			err = Unsupported("kernel_shape %v does not match weight %v", kernelShape, we)
			return
		}
	}
	return
}

func computeConv(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	a := attrs[graph.ConvAttrs](n)
	x, w, b, xe, we, err := convOperands(n, in, a.KernelShape)
	if err != nil {
		return nil, err
	}
	win, err := convWindow(a, we)
	if err != nil {
		return nil, err
	}
	var geo ConvGeometry
	if isStatic(x.Shape[2:]) {
		geo, err = ResolveConv(xe[1:], win, a.Group)
	} else {
		geo, err = ResolveConvSym(x.Shape[2:], win, a.Group)
	}
	if err != nil {
		return nil, err
	}
	out, err := Conv(x, w, b, geo)
	if err != nil {
		return nil, err
	}
	return []*te.Tensor{out}, nil
}

// Conv is a grouped N-D convolution: x [N, C, in...] (N may be symbolic, and the
// spatial extents when g comes from ResolveConvSym), w [M, C/group, k...], optional
// bias b [M] (nil: none), added in a final elementwise stage. The window is g (see
// ResolveConv); reads in the padding are guarded and clamped.
func Conv(x, w, b *te.Tensor, g ConvGeometry) (*te.Tensor, error) {
	xe, err := convExtents(x, g)
	if err != nil {
		return nil, err
	}
	we, err := Extents(w)
	if err != nil {
		return nil, err
	}
	sp := len(we) - 2
	if len(xe) != sp+1 || len(g.Out) != sp {
		return nil, Unsupported("Conv of input %v with weight %v", x.Shape, we)
	}
	c, m, cg := xe[0], we[0], we[1]
	group := g.Group
	if group <= 0 || c != cg*group || m%group != 0 {
		return nil, Unsupported("Conv of %d channels with weight %v in %d groups", c, we, group)
	}
	if b != nil {
		if be, err := Extents(b); err != nil || len(be) != 1 || be[0] != m {
			return nil, Unsupported("Conv bias %v for %d output channels", b.Shape, m)
		}
	}
	mg := m / group
	p := &windowProduct{x: x, w: w, channels: cg}
	switch {
	case group == 1:
		p.xChan = func(_, rc loopir.Expr) loopir.Expr { return rc }
	case mg == 1:
		p.xChan = func(oc, rc loopir.Expr) loopir.Expr { return add(mul(oc, i64(cg)), rc) }
	default:
		p.xChan = func(oc, rc loopir.Expr) loopir.Expr { return add(mul(div(oc, i64(mg)), i64(cg)), rc) }
	}
	p.wLead = func(oc, rc loopir.Expr) []loopir.Expr { return []loopir.Expr{oc, rc} }
	shape := []loopir.Expr{x.Shape[0], i64(m)}
	for d := range sp {
		s, dl, pb, o, in := g.Strides[d], g.Dilations[d], g.PadBegin[d], g.Out[d], xe[1+d]
		if g.symbolic(d) {
			shape = append(shape, g.OutExpr[d])
			p.axes = append(p.axes, symTapAxis(x.Shape[2+d], we[2+d], s, dl, pb))
			continue
		}
		if o <= 0 {
			return nil, Unsupported("Conv with an empty output (spatial axis %d)", d)
		}
		shape = append(shape, i64(o))
		p.axes = append(p.axes, tapAxis{
			taps: we[2+d],
			in:   in,
			at: func(oi, j loopir.Expr, _ int64) (loopir.Expr, loopir.Expr, loopir.Expr) {
				return sub(add(mul(oi, i64(s)), mul(j, i64(dl))), i64(pb)), j, nil
			},
			xRange: func(jlo, jhi int64) (int64, int64) {
				return jlo*dl - pb, (o-1)*s + jhi*dl - pb
			},
		})
	}
	return addBias(p.compute("conv", shape), b), nil
}

// staticFrom returns t's extents from axis `from` on, which must be static (the
// leading batch axes may be symbolic).
func staticFrom(t *te.Tensor, from int) ([]int64, error) {
	out := make([]int64, 0, len(t.Shape)-from)
	for d, e := range t.Shape[from:] {
		c, ok := e.(*loopir.IntImm)
		if !ok {
			return nil, Unsupported("%s: extent %d is symbolic (%v); this definition needs it static", t.Name, from+d, e)
		}
		out = append(out, c.V)
	}
	return out, nil
}
