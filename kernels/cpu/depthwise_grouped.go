package cpu

import (
	"fmt"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// GroupedNCHWc is a grouped convolution (G groups of Cg input and Mg output channels)
// computed on blocks of B output channels that each lie in one group (Mg a multiple of
// B), in the stages of DepthwiseNCHWc:
//
//   - "pad": the input channels of each block's group with zero borders, [N, M/B,
//     H+pt+pb, W+pl+pr, Cg], read through x's storage;
//   - "dwconv": [N, M/B, OH, OW, B] = Σ over the group's input channels and the
//     kernel's rows and columns of pad · w, w being the weights prepacked by
//     PackGroupedWeights, [M/B, Cg, KH, KW, B]: each input element is broadcast across
//     the block's lanes;
//   - "bias" or "unpack" as DepthwiseNCHWc's.
//
// a.Mult is Mg and a.GroupIn is Cg.
func GroupedNCHWc(x, w, bias *te.Tensor, a DepthwiseAttrs) (*te.Tensor, error) {
	ext, err := nchwExtents(x, a.XBlock, "grouped conv2d")
	if err != nil {
		return nil, err
	}
	n, c, h, wd := ext[0], ext[1], ext[2], ext[3]
	bl, mg, cg := a.Block, a.Mult, a.GroupIn
	if bl <= 0 || mg <= 0 || cg <= 0 || mg%bl != 0 || c%cg != 0 {
		return nil, kernels.Unsupported("grouped conv2d: groups of %d→%d channels in blocks of %d", cg, mg, bl)
	}
	m := c / cg * mg
	wext, err := kernels.Extents(w)
	if err != nil {
		return nil, err
	}
	if len(wext) != 5 || wext[0] != m/bl || wext[1] != cg || wext[4] != bl {
		return nil, fmt.Errorf("BUG: grouped conv2d: weights %v for %d channels in blocks of %d", wext, m, bl)
	}
	kh, kw := wext[2], wext[3]
	pt, pl, pb, pr := a.Pads[0], a.Pads[1], a.Pads[2], a.Pads[3]
	sh, sw, dh, dw := a.Strides[0], a.Strides[1], a.Dilations[0], a.Dilations[1]
	oh := (h+pt+pb-dh*(kh-1)-1)/sh + 1
	ow := (wd+pl+pr-dw*(kw-1)-1)/sw + 1
	if oh <= 0 || ow <= 0 {
		return nil, kernels.Unsupported("grouped conv2d: empty output %dx%d", oh, ow)
	}
	read := func(nn, ch, y, xx loopir.Expr) loopir.Expr {
		if a.XBlock == 0 {
			return x.At(nn, ch, y, xx)
		}
		return x.At(nn, div(ch, i64(a.XBlock)), y, xx, loopir.Bin(loopir.Mod, ch, i64(a.XBlock)))
	}
	dt := x.DT
	pad := te.Compute("pad", kernels.Static(n, m/bl, h+pt+pb, wd+pl+pr, cg), func(i []loopir.Expr) loopir.Expr {
		yy, xx := sub(i[2], i64(pt)), sub(i[3], i64(pl))
		// the block's group, then its input channel i[4]
		ch := add(mul(div(mul(i[1], i64(bl)), i64(mg)), i64(cg)), i[4])
		cond := loopir.Bin(loopir.And, inside(yy, i64(h)), inside(xx, i64(wd)))
		return te.Select(cond, read(i[0], ch, clampIndex(yy, h), clampIndex(xx, wd)), loopir.Float(0, dt))
	})
	rc, ry, rx := te.RAxis("rc", i64(cg)), te.RAxis("ry", i64(kh)), te.RAxis("rx", i64(kw))
	conv := te.Compute("dwconv", kernels.Static(n, m/bl, oh, ow, bl), func(i []loopir.Expr) loopir.Expr {
		row := add(mul(i[2], i64(sh)), mul(ry.Var, i64(dh)))
		col := add(mul(i[3], i64(sw)), mul(rx.Var, i64(dw)))
		return te.Sum(te.Mul(pad.At(i[0], i[1], row, col, rc.Var), w.At(i[1], rc.Var, ry.Var, rx.Var, i[4])), rc, ry, rx)
	})
	return blockedResult(conv, bias, m, bl, a.BlockedOut), nil
}

// PackGroupedWeights reorders float32 grouped weights [M, Cg, KH, KW] into the blocked
// layout [M/bl, Cg, KH, KW, bl] that GroupedNCHWc reads.
func PackGroupedWeights(w *tensor.Tensor, bl int64) (*tensor.Tensor, error) {
	v, ok := w.Data.([]float32)
	if !ok || len(w.Shape) != 4 {
		return nil, fmt.Errorf("weights %v%v: want float32 [M, Cg, KH, KW]", w.DType, w.Shape)
	}
	m, cg, kh, kw := int64(w.Shape[0]), int64(w.Shape[1]), int64(w.Shape[2]), int64(w.Shape[3])
	if bl <= 0 || m%bl != 0 {
		return nil, fmt.Errorf("%d output channels are not a multiple of %d", m, bl)
	}
	out := make([]float32, m*cg*kh*kw)
	for o := int64(0); o < m; o++ {
		for ci := int64(0); ci < cg; ci++ {
			for y := int64(0); y < kh; y++ {
				for x := int64(0); x < kw; x++ {
					out[((((o/bl)*cg+ci)*kh+y)*kw+x)*bl+o%bl] = v[((o*cg+ci)*kh+y)*kw+x]
				}
			}
		}
	}
	return tensor.FromSlice(tensor.Shape{int(m / bl), int(cg), int(kh), int(kw), int(bl)}, out)
}

// groupedConv returns the attributes of the blocked grouped convolution n (all but the
// block), or an error wrapping ErrNotApplicable: as depthwiseConv, for G > 1 groups of
// more than one input channel (a.GroupIn) and Mult output channels each.
func groupedConv(n *graph.Node) (DepthwiseAttrs, error) {
	a, _ := n.Attrs.(*graph.ConvAttrs)
	if a == nil || a.Group <= 1 || len(n.Inputs) < 2 || n.Inputs[1] == nil || n.Inputs[1].Const == nil || len(n.Inputs[1].Const.Shape) != 4 || n.Inputs[1].Const.Shape[1] <= 1 {
		return DepthwiseAttrs{}, notApplicable("not a grouped convolution of several channels per group")
	}
	attrs, err := convWindowAttrs(n)
	if err != nil {
		return attrs, err
	}
	m := int64(n.Inputs[1].Const.Shape[0])
	c, ok := n.Inputs[0].Type.Shape[1].Value()
	if !ok || c%a.Group != 0 || m%a.Group != 0 || c/a.Group != int64(n.Inputs[1].Const.Shape[1]) {
		return attrs, notApplicable("group %d over %v channels, weights %v", a.Group, n.Inputs[0].Type.Shape[1], n.Inputs[1].Const.Shape)
	}
	attrs.Mult, attrs.GroupIn = m/a.Group, c/a.Group
	return attrs, nil
}

// groupedBlock is the channel block of the grouped convolution n on t: one vector of
// the target when it divides the group's output channels, else all of them when they
// are at most one vector and a multiple of 4; 0 otherwise.
func groupedBlock(t target.Target, a DepthwiseAttrs) int64 {
	lanes := int64(max(t.VectorBits, 128) / 32)
	switch {
	case a.Mult%lanes == 0:
		return lanes
	case a.Mult < lanes && a.Mult%4 == 0:
		return a.Mult
	}
	return 0
}
