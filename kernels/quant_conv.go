package kernels

import (
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
)

// flatConv is a 2-D convolution of stride 1 over the shifted input x written over the
// flattened padded image, the form whose innermost loop is long and contiguous however
// small the image: x is zero-padded into "x_padded" [N, C, Hp·Wp + tail], rows of Wp
// columns (the span the windows read); the product runs over the flat output index
// q < Hout·Wp, reading x_padded at q + r·dh·Wp + s·dw for tap (r, s), so each tap reads
// a contiguous run (the Wp − Wout columns past each row's end are computed and
// dropped; the tail keeps the last reads in bounds); a final stage picks out[n, m, h, w]
// = acc[n, m, h·Wp + w]. ok is false where it does not apply (another rank or stride,
// a symbolic channel or batch-independent extent, an empty output).
func flatConv(x, w *te.Tensor, xe, we []int64, g ConvGeometry) (*te.Tensor, bool) {
	if len(xe) != 2 || len(we) != 4 || g.Strides[0] != 1 || g.Strides[1] != 1 || g.Out[0] <= 0 || g.Out[1] <= 0 {
		return nil, false
	}
	c, ok := x.Shape[1].(*loopir.IntImm)
	if !ok {
		return nil, false
	}
	m, cg, kh, kw := we[0], we[1], we[2], we[3]
	group := g.Group
	if group <= 0 || c.V != cg*group || m%group != 0 {
		return nil, false
	}
	mg := m / group
	dh, dw := g.Dilations[0], g.Dilations[1]
	oh, ow := g.Out[0], g.Out[1]
	wp := (ow - 1) + (kw-1)*dw + 1
	hp := (oh - 1) + (kh-1)*dh + 1
	tail := (kw - 1) * dw
	xp := te.Compute("x_padded", []loopir.Expr{x.Shape[0], x.Shape[1], i64(hp*wp + tail)}, func(i []loopir.Expr) loopir.Expr {
		h := sub(div(i[2], i64(wp)), i64(g.PadBegin[0]))
		col := sub(loopir.Bin(loopir.Mod, i[2], i64(wp)), i64(g.PadBegin[1]))
		in := nnAnd(loopir.Bin(loopir.LT, i[2], i64(hp*wp)),
			nnAnd(nnAnd(loopir.Bin(loopir.GE, h, i64(0)), loopir.Bin(loopir.LT, h, i64(xe[0]))),
				nnAnd(loopir.Bin(loopir.GE, col, i64(0)), loopir.Bin(loopir.LT, col, i64(xe[1])))))
		v := x.At(i[0], i[1], nnClamp(h, xe[0]), nnClamp(col, xe[1]))
		return te.Select(in, v, lit(0, v))
	})
	chanOf := func(oc, rc loopir.Expr) loopir.Expr {
		switch {
		case group == 1:
			return rc
		case mg == 1:
			return add(mul(oc, i64(cg)), rc)
		}
		return add(mul(div(oc, i64(mg)), i64(cg)), rc)
	}
	acc := te.Compute("conv_flat", []loopir.Expr{x.Shape[0], i64(m), i64(oh * wp)}, func(i []loopir.Expr) loopir.Expr {
		return contract("rc", i64(cg), func(rc loopir.Expr) loopir.Expr {
			var terms []loopir.Expr
			for r := range kh {
				for s := range kw {
					at := add(i[2], i64(r*dh*wp+s*dw))
					terms = append(terms, te.Mul(xp.At(i[0], chanOf(i[1], rc), at), w.At(i[1], rc, i64(r), i64(s))))
				}
			}
			return nnSum(terms)
		})
	})
	return te.Compute("conv", []loopir.Expr{x.Shape[0], i64(m), i64(oh), i64(ow)}, func(i []loopir.Expr) loopir.Expr {
		return acc.At(i[0], i[1], add(mul(i[2], i64(wp)), i[3]))
	}), true
}
