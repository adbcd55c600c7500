package cpu

import (
	"fmt"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/intrin"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// GroupedConvBlocked is a grouped convolution whose groups are each one block of input
// channels (cb = Cg) and one block of output channels (mb = Mg), in ConvNCHWBlocked's
// stages, so that the tensorized schedule (ScheduleConvBlocked) runs every group's
// product on the GEMM micro-kernel: "pad" is x repacked into [N, G, H+pt+pb,
// (W+pl+pr)·Cg]; "conv" [N, G, OH, OW, Mg] sums, for output block g, pad's block g
// times w (PackConvWeights of the [M, Cg, KH, KW] weights: [G, 1, KH, KW·Cg, Mg]) over
// the kernel rows and the merged kernel column·channel axis; then "bias" (a.BlockedOut)
// or "unpack" as ConvNCHWBlocked's. Horizontal dilation must be 1.
func GroupedConvBlocked(x, w, bias *te.Tensor, m int64, a ConvBlockedAttrs) (*te.Tensor, error) {
	ext, err := nchwExtents(x, a.XBlock, "grouped conv2d")
	if err != nil {
		return nil, err
	}
	n, c, h, wd := ext[0], ext[1], ext[2], ext[3]
	cb, mb := a.CB, a.MB
	if cb <= 0 || mb <= 0 || c%cb != 0 || m != c/cb*mb || a.Dilations[1] != 1 {
		return nil, kernels.Unsupported("grouped conv2d: %d→%d channels in groups of %d→%d, horizontal dilation %d", c, m, cb, mb, a.Dilations[1])
	}
	wext, err := kernels.Extents(w)
	if err != nil {
		return nil, err
	}
	if len(wext) != 5 || wext[0] != c/cb || wext[1] != 1 || wext[3]%cb != 0 || wext[4] != mb {
		return nil, fmt.Errorf("BUG: grouped conv2d: weights %v for %d→%d channels in groups of %d→%d", wext, c, m, cb, mb)
	}
	kh, kw := wext[2], wext[3]/cb
	pt, pl, pb, pr := a.Pads[0], a.Pads[1], a.Pads[2], a.Pads[3]
	oh := (h+pt+pb-a.Dilations[0]*(kh-1)-1)/a.Strides[0] + 1
	ow := (wd+pl+pr-(kw-1)-1)/a.Strides[1] + 1
	if oh <= 0 || ow <= 0 {
		return nil, kernels.Unsupported("grouped conv2d: empty output %dx%d", oh, ow)
	}
	dt := x.DT
	pad := te.Compute("pad", kernels.Static(n, c/cb, h+pt+pb, (wd+pl+pr)*cb), func(i []loopir.Expr) loopir.Expr {
		yy := sub(i[2], i64(pt))
		xx := sub(div(i[3], i64(cb)), i64(pl))
		ci := loopir.Bin(loopir.Mod, i[3], i64(cb))
		cond := loopir.Bin(loopir.And, inside(yy, i64(h)), inside(xx, i64(wd)))
		return te.Select(cond, groupInput(x, a.XBlock, cb, i[0], i[1], ci, clampIndex(yy, h), clampIndex(xx, wd)), loopir.Float(0, dt))
	})
	// icb has extent 1: the schedule's loop structure is ConvNCHWBlocked's
	icb, ry, rr := te.RAxis("icb", i64(1)), te.RAxis("ry", i64(kh)), te.RAxis("rr", i64(kw*cb))
	conv := te.Compute("conv", kernels.Static(n, c/cb, oh, ow, mb), func(i []loopir.Expr) loopir.Expr {
		row := add(mul(i[2], i64(a.Strides[0])), mul(ry.Var, i64(a.Dilations[0])))
		col := add(mul(i[3], i64(a.Strides[1]*cb)), rr.Var)
		return te.Sum(te.Mul(pad.At(i[0], add(i[1], icb.Var), row, col), w.At(i[1], icb.Var, ry.Var, rr.Var, i[4])), icb, ry, rr)
	})
	return blockedResult(conv, bias, m, mb, a.BlockedOut), nil
}

// groupedGemm returns the attributes of the tensorized grouped convolution n on t and
// its micro-kernel, or an error wrapping ErrNotApplicable: a grouped convolution
// (groupedConv) whose groups' output channels are the width of the tile GemmTile
// chooses for them, with no horizontal dilation.
func groupedGemm(t target.Target, n *graph.Node) (ConvBlockedAttrs, intrin.Gemm, error) {
	ga, err := groupedConv(n)
	if err != nil {
		return ConvBlockedAttrs{}, intrin.Gemm{}, err
	}
	var width int64
	if ot := n.Outputs[0].Type; len(ot.Shape) == 4 {
		width, _ = ot.Shape[3].Value()
	}
	g := intrin.GemmTile(t, ga.Mult, width)
	if g.NR != ga.Mult || ga.Dilations[1] != 1 {
		return ConvBlockedAttrs{}, g, notApplicable("groups of %d output channels on %d-wide tiles, horizontal dilation %d", ga.Mult, g.NR, ga.Dilations[1])
	}
	a := ConvBlockedAttrs{Strides: ga.Strides, Dilations: ga.Dilations, Pads: ga.Pads, CB: ga.GroupIn, MB: g.NR, XBlock: ga.XBlock}
	return a, g, nil
}

// buildGroupedGemm lowers a grouped convolution through GroupedConvBlocked and the
// tensorized schedule, reading its input as it is stored and leaving its output
// blocked (in blocks of one group) when the graph says so.
func buildGroupedGemm(reg *kernels.Registry, n *graph.Node, in []kernels.Input, epi []kernels.Epilogue, t target.Target) (*kernels.Impl, error) {
	attrs, g, err := groupedGemm(t, n)
	if err != nil {
		return nil, err
	}
	if b := n.Outputs[0].Type.Block; b != 0 {
		if b != g.NR {
			return nil, notApplicable("output stored in blocks of %d, the groups have %d channels", b, g.NR)
		}
		attrs.BlockedOut = true
	}
	x, w := in[0], in[1]
	ws := w.Const.Shape
	m := int64(ws[0])
	packed := []int64{m / g.NR, 1, int64(ws[2]), int64(ws[3]) * attrs.CB, g.NR}
	wp := te.Placeholder("w", tensor.Float32, kernels.Static(packed...)...)
	layout := fmt.Sprintf("OIHW→[O/%d,1,H,W·%d,%d]", g.NR, attrs.CB, g.NR)
	bias, params, feeds := convBias(in, []*te.Tensor{x.T, wp}, []kernels.Param{{Input: 0}, {Input: 1, Layout: layout, Prepack: func(v *tensor.Tensor) (*tensor.Tensor, error) {
		return PackConvWeights(v, attrs.CB, attrs.MB)
	}}})
	out, err := GroupedConvBlocked(x.T, wp, bias, m, attrs)
	if err != nil {
		return nil, err
	}
	s, feeds, err := withEpilogues(reg, n, out, params, feeds, epi)
	if err != nil {
		return nil, err
	}
	last, err := inlineChain(s, "pad", "conv")
	if err != nil {
		return nil, err
	}
	if last == "conv" {
		last = ""
	}
	rowEpilogue := last
	if !attrs.BlockedOut {
		rowEpilogue = ""
	}
	if err := ScheduleConvBlocked(s, g, true, rowEpilogue, attrs.CB); err != nil {
		return nil, err
	}
	if last != "" && rowEpilogue == "" {
		if err := scheduleNest(s, last); err != nil {
			return nil, err
		}
	}
	return &kernels.Impl{Func: s.Func(), Trace: s.Trace(), Params: feeds}, nil
}
