package kernels

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
)

// Transposed convolution over N spatial axes, written as a gather: each output element
// sums the input elements whose scattered window covers it. On an axis with stride s > 1
// and dilation 1 only every s-th tap can hit an output position, so the taps are
// enumerated by phase (k = (o + pad) mod s + j·s) and no work is spent on taps that
// cannot contribute; with a dilation the taps are tested for divisibility instead.

// ResolveConvTranspose is the geometry of a ConvTranspose window w over the input
// spatial extents in; graph.TransposedWindow.Axis defines it. An output_shape with
// auto_pad NOTSET and an odd total padding is refused (graph.ErrOddPadding: ONNX puts
// the odd element at the beginning, the reference at the end).
func ResolveConvTranspose(in []int64, w graph.TransposedWindow, group int64) (ConvGeometry, error) {
	g := ConvGeometry{Group: group}
	for d := range in {
		if err := checkWindowAxis(w.Window, d); err != nil {
			return ConvGeometry{}, err
		}
		a, err := w.Axis(d, in[d])
		if err != nil {
			return ConvGeometry{}, Unsupported("ConvTranspose %v", err)
		}
		if a.Out <= 0 {
			return ConvGeometry{}, Unsupported("ConvTranspose with an empty output (spatial axis %d)", d)
		}
		g.Strides = append(g.Strides, w.Strides[d])
		g.Dilations = append(g.Dilations, w.Dilations[d])
		g.PadBegin = append(g.PadBegin, a.PadBegin)
		g.Out = append(g.Out, a.Out)
	}
	return g, nil
}

func computeConvTranspose(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	a := attrs[graph.ConvTransposeAttrs](n)
	x, w, b, xe, we, err := convOperands(n, in, a.KernelShape)
	if err != nil {
		return nil, err
	}
	if sp := len(we) - 2; len(a.OutputShape) != 0 && len(a.OutputShape) != sp {
		return nil, Unsupported("ConvTranspose output_shape %v for %d spatial axes", a.OutputShape, sp)
	}
	win, err := graph.ConvTransposeWindow(a, we[2:])
	if err != nil {
		return nil, Unsupported("%v", err)
	}
	geo, err := ResolveConvTranspose(xe[1:], win, a.Group)
	if err != nil {
		return nil, err
	}
	out, err := ConvTranspose(x, w, b, geo)
	if err != nil {
		return nil, err
	}
	return []*te.Tensor{out}, nil
}

// ConvTranspose is a grouped N-D transposed convolution: x [N, C, in...] (N may be
// symbolic), w [C, M/group, k...], optional bias b [M] (nil: none); the output is
// [N, M, g.Out...] (see ResolveConvTranspose).
func ConvTranspose(x, w, b *te.Tensor, g ConvGeometry) (*te.Tensor, error) {
	xe, err := staticFrom(x, 1)
	if err != nil {
		return nil, err
	}
	we, err := Extents(w)
	if err != nil {
		return nil, err
	}
	sp := len(we) - 2
	if len(xe) != sp+1 || len(g.Out) != sp {
		return nil, Unsupported("ConvTranspose of input %v with weight %v", x.Shape, we)
	}
	c, mg, group := xe[0], we[1], g.Group
	if group <= 0 || we[0] != c || c%group != 0 {
		return nil, Unsupported("ConvTranspose of %d channels with weight %v in %d groups", c, we, group)
	}
	cg, m := c/group, mg*group
	if b != nil {
		if be, err := Extents(b); err != nil || len(be) != 1 || be[0] != m {
			return nil, Unsupported("ConvTranspose bias %v for %d output channels", b.Shape, m)
		}
	}
	p := &windowProduct{x: x, w: w, channels: cg, guardProduct: true}
	if group == 1 {
		p.xChan = func(_, rc loopir.Expr) loopir.Expr { return rc }
		p.wLead = func(oc, rc loopir.Expr) []loopir.Expr { return []loopir.Expr{rc, oc} }
	} else {
		p.xChan = func(oc, rc loopir.Expr) loopir.Expr { return add(mul(div(oc, i64(mg)), i64(cg)), rc) }
		p.wLead = func(oc, rc loopir.Expr) []loopir.Expr {
			return []loopir.Expr{add(mul(div(oc, i64(mg)), i64(cg)), rc), loopir.Bin(loopir.Mod, oc, i64(mg))}
		}
	}
	shape := []loopir.Expr{x.Shape[0], i64(m)}
	for d := range sp {
		shape = append(shape, i64(g.Out[d]))
		p.axes = append(p.axes, transposedAxis(xe[1+d], we[2+d], g.Strides[d], g.Dilations[d], g.PadBegin[d], g.Out[d]))
	}
	return addBias(p.compute("conv_transpose", shape), b), nil
}

// transposedAxis is one spatial axis of a transposed convolution: output o receives
// input i through tap k when o = i·s + k·dl - pb.
func transposedAxis(in, k, s, dl, pb, out int64) tapAxis {
	if s > 1 && dl == 1 {
		// by phase: t = o + pb, k = t mod s + j·s, i = t div s - j
		taps := (k + s - 1) / s
		return tapAxis{
			taps: taps,
			in:   in,
			at: func(o, j loopir.Expr, jhi int64) (loopir.Expr, loopir.Expr, loopir.Expr) {
				t := add(o, i64(pb))
				wk := add(loopir.Bin(loopir.Mod, t, i64(s)), mul(j, i64(s)))
				xi := sub(div(t, i64(s)), j)
				if s-1+jhi*s <= k-1 {
					return xi, wk, nil
				}
				return xi, loopir.Bin(loopir.Min, wk, i64(k-1)), loopir.Bin(loopir.LT, wk, i64(k))
			},
			xRange: func(jlo, jhi int64) (int64, int64) {
				return floorDiv(pb, s) - jhi, floorDiv(out-1+pb, s) - jlo
			},
		}
	}
	return tapAxis{
		taps: k,
		in:   in,
		at: func(o, j loopir.Expr, _ int64) (loopir.Expr, loopir.Expr, loopir.Expr) {
			t := sub(add(o, i64(pb)), mul(j, i64(dl)))
			if s == 1 {
				return t, j, nil
			}
			return div(t, i64(s)), j, loopir.Bin(loopir.EQ, loopir.Bin(loopir.Mod, t, i64(s)), i64(0))
		},
		xRange: func(jlo, jhi int64) (int64, int64) {
			return floorDiv(pb-jhi*dl, s), floorDiv(out-1+pb-jlo*dl, s)
		},
	}
}

// floorDiv divides rounding toward negative infinity, like loopir's Div.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
