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

// ResolveConvTranspose computes the geometry of an ONNX ConvTranspose over input
// spatial extents in and kernel extents k, as the reference does: the full extent is
// stride·(in-1) + output_padding + (k-1)·dilation + 1; with output_shape or a SAME
// auto_pad the output has the requested extent (in·stride for SAME) and the difference
// is padding, its larger half at the end for SAME_UPPER and at the beginning for
// SAME_LOWER (an output_shape with auto_pad NOTSET and an odd total padding is refused:
// ONNX puts the odd element at the beginning, the reference at the end); otherwise
// pads [begin..., end...] are cut from the full extent.
func ResolveConvTranspose(in, k []int64, a *graph.ConvTransposeAttrs) (ConvGeometry, error) {
	sp := len(in)
	if len(a.OutputShape) != 0 && len(a.OutputShape) != sp {
		return ConvGeometry{}, Unsupported("ConvTranspose output_shape %v for %d spatial axes", a.OutputShape, sp)
	}
	switch a.AutoPad {
	case "", "NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER":
	default:
		return ConvGeometry{}, Unsupported("auto_pad %q", a.AutoPad)
	}
	g := ConvGeometry{Group: a.Group}
	for d := range sp {
		s, dl := graph.AttrOr(a.Strides, d, 1), graph.AttrOr(a.Dilations, d, 1)
		if s <= 0 || dl <= 0 || k[d] <= 0 {
			return ConvGeometry{}, Unsupported("stride %d, dilation %d, kernel %d", s, dl, k[d])
		}
		full := s*(in[d]-1) + graph.AttrOr(a.OutputPadding, d, 0) + (k[d]-1)*dl + 1
		var o, pb int64
		if len(a.OutputShape) == sp || a.AutoPad == "SAME_UPPER" || a.AutoPad == "SAME_LOWER" {
			o = in[d] * s
			if len(a.OutputShape) == sp {
				o = a.OutputShape[d]
			}
			total := max(0, full-o)
			pb = total / 2
			switch {
			case a.AutoPad == "SAME_LOWER":
				pb = total - total/2
			case a.AutoPad != "SAME_UPPER" && total%2 == 1:
				// ONNX (and ONNX Runtime since 1.14) put the odd element at the
				// beginning here, the reference evaluator at the end: refuse rather
				// than pick one
				return ConvGeometry{}, Unsupported("ConvTranspose output_shape %v with odd total padding %d on axis %d", a.OutputShape, total, d)
			}
		} else {
			pb = graph.AttrOr(a.Pads, d, 0)
			o = full - pb - graph.AttrOr(a.Pads, d+sp, 0)
		}
		if o <= 0 {
			return ConvGeometry{}, Unsupported("ConvTranspose with an empty output (spatial axis %d)", d)
		}
		g.Strides = append(g.Strides, s)
		g.Dilations = append(g.Dilations, dl)
		g.PadBegin = append(g.PadBegin, pb)
		g.Out = append(g.Out, o)
	}
	return g, nil
}

func computeConvTranspose(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	a := attrs[graph.ConvTransposeAttrs](n)
	x, w, b, xe, we, err := convOperands(n, in, a.KernelShape)
	if err != nil {
		return nil, err
	}
	geo, err := ResolveConvTranspose(xe[1:], we[2:], a)
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
