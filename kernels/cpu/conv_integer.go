package cpu

import (
	"fmt"
	"strings"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/intrin"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/schedule"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// The blocked integer convolution: ConvInteger (and QLinearConv, its requantization
// after the accumulator) as the float32 blocked convolution computes (blocked.go), on
// int16 operands in pairs and the integer micro-kernel
// (intrin.GemmInt). x − x_zero_point is copied into the padded, channel-blocked stage
// as int16 (zeros in the borders: the padding is the zero point); the constant weights
// minus their zero point are packed on the host as int16 pairs; each tile's whole
// reduction runs in one call, its int32 sums exact. Epilogues (the Cast to float and
// the scales' Mul that follow a dynamically quantized convolution) run on the result
// as on the float convolution's.

// integerInputs are the positions of an integer convolution's weights and zero points
// among its node's inputs (the data is input 0).
type integerInputs struct{ w, zx, zw int }

// integerInputsOf gives them for ConvInteger and QLinearConv.
func integerInputsOf(op graph.Op) integerInputs {
	if op == graph.OpQLinearConv {
		return integerInputs{w: 3, zx: 2, zw: 5}
	}
	return integerInputs{w: 1, zx: 2, zw: 3}
}

// convIntegerFits returns the blocked attributes of integer convolution n (its operands
// at idx) with micro-kernel g, or an error wrapping ErrNotApplicable: a 2-D convolution
// of static shapes and one group over 8-bit data (plain NCHW, or stored in channel
// blocks: XBlock, read in blocks of that size), constant 8-bit weights, a per-tensor
// data zero point and a constant per-tensor or per-output-channel weight zero point,
// explicit or VALID padding, and a merged reduction (kernel columns × channel block)
// in whole groups of the micro-kernel. The result is left in blocks where the graph
// stores it so (BlockedOut, OutBlock). The layout policy asks it of graph nodes
// (integerAnchor), the strategy of the node it lowers: both read n's values only.
func convIntegerFits(n *graph.Node, idx integerInputs, g intrin.GemmInt, group int64) (ConvBlockedAttrs, error) {
	var attrs ConvBlockedAttrs
	a, _ := n.Attrs.(*graph.ConvAttrs)
	input := func(i int) *graph.Value {
		if i < len(n.Inputs) {
			return n.Inputs[i]
		}
		return nil
	}
	xv, wv := input(0), input(idx.w)
	if a == nil || xv == nil || wv == nil || wv.Const == nil || len(n.Outputs) != 1 {
		return attrs, notApplicable("integer convolution without constant weights")
	}
	x, w, y := xv.Type, wv.Const, n.Outputs[0].Type
	if !eightBit(x.DType) || !eightBit(w.DType) || len(x.Shape) != 4 || len(w.Shape) != 4 {
		return attrs, notApplicable("2-D 8-bit integer convolution")
	}
	if !x.IsStatic() || !y.IsStatic() {
		return attrs, notApplicable("static data and result")
	}
	if zx := input(idx.zx); zx != nil {
		if s, ok := zx.Type.ConstShape(); !ok || s.NumElements() != 1 || zx.Type.DType != x.DType {
			return attrs, notApplicable("data zero point per channel or of another type")
		}
	}
	if zw := input(idx.zw); zw != nil {
		if zw.Type.DType != w.DType {
			return attrs, notApplicable("weight zero point of another type")
		}
		if zw.Const == nil {
			return attrs, notApplicable("weight zero point computed at run time")
		}
		if k := zw.Const.Shape.NumElements(); k != 1 && k != w.Shape[0] {
			return attrs, notApplicable("weight zero point of %d values", k)
		}
	}
	win, err := staticPadWindow(a, w.Shape)
	if err != nil || a.Group != 1 {
		return attrs, notApplicable("group %d, auto_pad %s", a.Group, a.AutoPad)
	}
	copy(attrs.Strides[:], win.Strides)
	copy(attrs.Dilations[:], win.Dilations)
	attrs.Pads[0], attrs.Pads[2], _ = win.StaticPads(0)
	attrs.Pads[1], attrs.Pads[3], _ = win.StaticPads(1)
	c, _ := x.Shape[1].Value()
	if c <= 0 || w.Shape.NumElements() == 0 {
		// an empty convolution (a hostile or degenerate model) is the padded strategy's
		return attrs, notApplicable("empty weights %v over %d channels", w.Shape, c)
	}
	attrs.CB, attrs.MB, attrs.XBlock = inputBlock(c), g.NR, x.Block
	if x.Block != 0 {
		attrs.CB = x.Block // the padded copy copies whole blocks, or x is read in place
	} else if int64(w.Shape[3])*attrs.CB%group != 0 && attrs.CB == c {
		attrs.CB = (c + group - 1) / group * group // one block padded past c (a stem's 3 channels in 4)
	}
	if int64(w.Shape[3])*attrs.CB%group != 0 {
		return attrs, notApplicable("reduction run of %d kernel columns × %d channels in groups of %d", w.Shape[3], attrs.CB, group)
	}
	m := int64(w.Shape[0])
	if b := y.Block; b != 0 {
		switch {
		case b == g.NR:
		case g.NR%b == 0 && m%b == 0:
			attrs.OutBlock = b // repacked from the tiles' blocks
		default:
			return attrs, fmt.Errorf("BUG: %v: output stored in blocks of %d, the micro-kernel computes %d", n, b, g.NR)
		}
		attrs.BlockedOut = true
	}
	attrs.SplitOut = !attrs.BlockedOut && SplitBlock(m, g.NR) != 0
	return attrs, nil
}

// integerConv picks the micro-kernel of integer convolution n on t (its operands at
// idx) and its blocked attributes: the 8-bit one (intrin.GemmU8S8, group 4) where the
// target has it, the data is uint8, the weights minus their zero point fit int8 and the
// reduction runs in quads, else the int16 pairs' (group 2); an error wrapping
// ErrNotApplicable when neither takes n.
func integerConv(t target.Target, n *graph.Node, idx integerInputs) (intrin.GemmInt, int64, ConvBlockedAttrs, error) {
	var w, zw *tensor.Tensor
	if idx.w < len(n.Inputs) && n.Inputs[idx.w] != nil {
		w = n.Inputs[idx.w].Const
	}
	if idx.zw < len(n.Inputs) && n.Inputs[idx.zw] != nil {
		zw = n.Inputs[idx.zw].Const
	}
	if w == nil || len(w.Shape) != 4 || len(n.Inputs) == 0 || n.Inputs[0] == nil {
		return intrin.GemmInt{}, 0, ConvBlockedAttrs{}, notApplicable("integer convolution without constant 4-D weights")
	}
	m := int64(w.Shape[0])
	if q, ok := intrin.GemmU8S8Tile(t, m); ok && n.Inputs[0].Type.DType == tensor.Uint8 && fitsInt8(w, zw) {
		if attrs, err := convIntegerFits(n, idx, q, 4); err == nil {
			return q, 4, attrs, nil
		}
	}
	g := intrin.GemmIntTile(t, m)
	attrs, err := convIntegerFits(n, idx, g, 2)
	return g, 2, attrs, err
}

// integerAnchor is the layout policy's answer for an integer convolution: its data read
// as it is stored and its result in blocks of the micro-kernel's width (or of one
// vector, repacked, where the width divides the output channels not), when the blocked
// integer convolution takes it.
func integerAnchor(t target.Target, n *graph.Node) (out int64, ok bool) {
	if n.Op != graph.OpQLinearConv {
		return 0, false
	}
	if probe, err := integerDepthwiseProbe(n); err == nil {
		// the depthwise one computes and stores in the float depthwise's block
		if _, b, err := groupsBlock(t, probe, false); err == nil {
			return b, true
		}
	}
	idx := integerInputsOf(n.Op)
	probe := *n // the question is asked before the output's block is chosen
	probe.Outputs = []*graph.Value{{Type: n.Outputs[0].Type}}
	probe.Outputs[0].Type.Block = 0
	g, _, _, err := integerConv(t, &probe, idx)
	if err != nil {
		return 0, false
	}
	m := int64(n.Inputs[idx.w].Const.Shape[0])
	switch lanes := channelMultiple(t); {
	case m%g.NR == 0:
		return g.NR, true
	case lanes != 0 && m%lanes == 0 && g.NR%lanes == 0:
		return lanes, true
	}
	return 0, true
}

func eightBit(dt tensor.DType) bool { return dt == tensor.Uint8 || dt == tensor.Int8 }

// numElements is a static tensor's element count (-1 when an extent is symbolic).
func numElements(t *te.Tensor) int64 {
	ext, err := kernels.Extents(t)
	if err != nil {
		return -1
	}
	k := int64(1)
	for _, e := range ext {
		k *= e
	}
	return k
}

// buildConvInteger lowers ConvInteger, and QLinearConv with its requantization
// (kernels.QLinearConvRequantize) after it, through ConvIntegerBlocked.
func buildConvInteger(reg *kernels.Registry, n *graph.Node, in []kernels.Input, epi []kernels.Epilogue, t target.Target) (*kernels.Impl, error) {
	idx := integerInputsOf(n.Op)
	g, group, attrs, err := integerConv(t, n, idx)
	if err != nil {
		return nil, err
	}
	w := in[idx.w].Const
	m, kh, kw := int64(w.Shape[0]), int64(w.Shape[2]), int64(w.Shape[3])
	var zw *tensor.Tensor
	if len(in) > idx.zw {
		zw = in[idx.zw].Const
	}
	var zx *te.Tensor
	if len(in) > idx.zx && in[idx.zx].T != nil && !allZero(in[idx.zx].Const) {
		zx = in[idx.zx].T
	}
	xt := in[0].T
	if group == 4 && attrs.XBlock != 0 && attrs.inPlace(kw) {
		// read in place: the blocks' storage viewed as rows of W·cb
		ext, err := kernels.Extents(xt)
		if err != nil || len(ext) != 5 {
			return nil, notApplicable("blocked data %v", xt.Shape)
		}
		xt = te.Placeholder("x", xt.DT, kernels.Static(ext[0], ext[1], ext[2], ext[3]*ext[4])...)
	}
	var out *te.Tensor
	var params []*te.Tensor
	var feeds []kernels.Param
	if group == 4 {
		out, params, feeds, err = convU8S8Stages(xt, in, idx, zx, zw, m, kh, kw, attrs, g.NR)
	} else {
		packed := []int64{(m + g.NR - 1) / g.NR, (int64(w.Shape[1]) + attrs.CB - 1) / attrs.CB, kh, kw * attrs.CB / 2, g.NR, 2}
		wp := te.Placeholder("w", tensor.Int16, kernels.Static(packed...)...)
		layout := fmt.Sprintf("OIHW−%s→i16[O/%d,I/%d,H,W·%d/2,%d,2]", zeroPointText(zw), g.NR, attrs.CB, attrs.CB, g.NR)
		params = []*te.Tensor{xt, wp}
		feeds = []kernels.Param{{Input: 0}, {Input: idx.w, Layout: layout, Prepack: func(v *tensor.Tensor) (*tensor.Tensor, error) {
			return PackConvWeightsInt16(v, zw, attrs.CB, g.NR)
		}}}
		if zx != nil {
			params, feeds = append(params, zx), append(feeds, kernels.Param{Input: idx.zx})
		}
		out, err = ConvIntegerBlocked(xt, zx, wp, nil, m, kh, kw, 2, attrs)
	}
	if err != nil {
		return nil, err
	}
	if n.Op == graph.OpQLinearConv {
		// on the result's own view: a split one, [N, M/sb, sb, OH, OW], numbers its
		// channels by block and lane
		var channel func(i []loopir.Expr) loopir.Expr
		switch {
		case attrs.SplitOut:
			sb := SplitBlock(m, g.NR)
			channel = func(i []loopir.Expr) loopir.Expr { return add(mul(i[1], i64(sb)), i[2]) }
		case attrs.BlockedOut:
			// [N, M/b, OH, OW, b]: the stored block, or the tiles' own
			b := attrs.OutBlock
			if b == 0 {
				b = g.NR
			}
			channel = func(i []loopir.Expr) loopir.Expr { return add(mul(i[1], i64(b)), i[4]) }
		}
		if out, params, feeds, err = requantizeQLinearConv(n, in, out, channel, m, params, feeds); err != nil {
			return nil, err
		}
	}
	s, feeds, last, rowEpilogue, err := lowerConvResult(reg, n, out, params, feeds, epi, attrs, m, g.NR)
	if err != nil {
		return nil, err
	}
	if err := scheduleConvInteger(s, g, rowEpilogue, attrs, attrs.SplitOut && channelsInner(n)); err != nil {
		return nil, err
	}
	if last != "" && rowEpilogue == "" {
		if err := scheduleNest(s, last); err != nil {
			return nil, err
		}
	}
	return &kernels.Impl{Func: s.Func(), Trace: s.Trace(), Params: feeds}, nil
}

// requantizeQLinearConv applies QLinearConv n's requantization to its accumulator acc
// of m output channels (kernels.QLinearConvRequantize; channel numbers acc's channels,
// nil for NCHW) and adds what it reads to params and feeds: with constant scales (a
// QDQ network's), their quotient per channel, prepacked once; the scales, the output
// zero point and the bias.
func requantizeQLinearConv(n *graph.Node, in []kernels.Input, acc *te.Tensor, channel func(i []loopir.Expr) loopir.Expr, m int64, params []*te.Tensor, feeds []kernels.Param) (*te.Tensor, []*te.Tensor, []kernels.Param, error) {
	var mult *te.Tensor
	if sx, sy := in[1].Const, in[6].Const; sx != nil && in[4].Const != nil && sy != nil && sx.Shape.NumElements() == 1 && sy.Shape.NumElements() == 1 {
		mult = te.Placeholder("requant_scale", tensor.Float64, kernels.Static(m)...)
		params = append(params, mult)
		feeds = append(feeds, kernels.Param{Input: 4, Layout: fmt.Sprintf("%v·w_scale/%v→f64[O]", sx.Float64s()[0], sy.Float64s()[0]),
			Prepack: func(v *tensor.Tensor) (*tensor.Tensor, error) {
				return kernels.RequantizeMultipliers(sx, v, sy, int(m))
			}})
	}
	out, err := kernels.QLinearConvRequantize(n, in, acc, channel, mult)
	if err != nil {
		return nil, nil, nil, err
	}
	for _, i := range []int{1, 4, 6, 7, 8} {
		if i < len(in) && in[i].T != nil {
			params, feeds = append(params, in[i].T), append(feeds, kernels.Param{Input: i})
		}
	}
	return out, params, feeds, nil
}

// allZero reports whether a constant holds zeros only (false for nil: not a constant).
func allZero(c *tensor.Tensor) bool {
	if c == nil {
		return false
	}
	for _, v := range c.Float64s() {
		if v != 0 {
			return false
		}
	}
	return true
}

// zeroPointText names a weight zero point in the packed layout's name, so that two
// nodes share one packed copy only when their weights and zero points are the same.
func zeroPointText(zw *tensor.Tensor) string {
	if zw == nil {
		return "0"
	}
	v := zw.Float64s()
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprint(x)
	}
	return "(" + strings.Join(parts, ",") + ")"
}

// ConvIntegerBlocked is the integer convolution of 8-bit data x (NCHW, or stored in
// blocks of a.XBlock = a.CB, or read in place: the merged view [N, C/cb, H, W·cb] of
// those blocks, with g = 4 and no padding) minus its zero point zx (a one-element
// tensor, nil for none) with prepacked weights wp, in the stages of ConvNCHWBlocked,
// its reduction's innermost axis a group of g operands the micro-kernel takes together:
//
//   - g = 2 (intrin.GemmI16): "pad" is x − zx as int16 with zero borders, wp the int16
//     pairs of PackConvWeightsInt16 [⌈M/mb⌉, C/cb, KH, KW·cb/2, mb, 2];
//   - g = 4 (intrin.GemmU8S8): "pad" is uint8 x as stored with zx in the borders, wp the
//     int8 quads of PackConvWeightsInt8 [⌈M/mb⌉, C/cb, KH, KW·cb/4, mb, 4]; the caller
//     passes bias = −zx·Σ(w − zw) per output channel, which makes the sum Σ (x − zx)·(w − zw).
//
// The padded copy (none when x is read in place) is laid out by output column with
// horizontal dilation; "conv" is [N, ⌈M/mb⌉, OH, OW, mb] int32 summed over (input block, kernel row, merged
// column·channel group, group element); the result is convResult's, bias added.
func ConvIntegerBlocked(x, zx, wp, bias *te.Tensor, m, kh, kw, g int64, a ConvBlockedAttrs) (*te.Tensor, error) {
	ext, merged, err := blockedDataExtents(x, a.XBlock, "blocked integer conv2d")
	if err != nil {
		return nil, err
	}
	n, c, h, wd := ext[0], ext[1], ext[2], ext[3]
	cb, mb := a.CB, a.MB
	if cb <= 0 || c%cb != 0 && (c > cb || a.XBlock != 0) || (g != 2 && g != 4) || kw*cb%g != 0 || a.XBlock != 0 && a.XBlock != cb {
		return nil, fmt.Errorf("BUG: blocked integer conv2d: %d channels (stored in blocks of %d) in blocks of %d, %d kernel columns in groups of %d", c, a.XBlock, cb, kw, g)
	}
	pt, pl, pb, pr := a.Pads[0], a.Pads[1], a.Pads[2], a.Pads[3]
	oh := (h+pt+pb-a.Dilations[0]*(kh-1)-1)/a.Strides[0] + 1
	ow := (wd+pl+pr-a.Dilations[1]*(kw-1)-1)/a.Strides[1] + 1
	if oh <= 0 || ow <= 0 {
		return nil, kernels.Unsupported("blocked integer conv2d: empty output %dx%d", oh, ow)
	}
	// plain data of fewer channels than a group needs (a stem's 3) computes in one block
	// padded past c: the padded channels' weights are zero
	blocks := (c + cb - 1) / cb
	icb, ry := te.RAxis("icb", i64(blocks)), te.RAxis("ry", i64(kh))
	rr, re := te.RAxis("rr", i64(kw*cb/g)), te.RAxis("re", i64(g))
	if inPlace := g == 4 && a.XBlock != 0 && a.inPlace(kw); merged != inPlace {
		return nil, fmt.Errorf("BUG: blocked integer conv2d: data %v read in place %v, merged %v", x.Shape, inPlace, merged)
	}
	if merged {
		// the 8-bit micro-kernel reads x itself: blocked uint8 data [N, C/cb, H, W, cb]
		// is the padded copy's [N, C/cb, H, W·cb] (no padding: nothing to fill)
		conv := te.Compute("conv", kernels.Static(n, (m+mb-1)/mb, oh, ow, mb), func(i []loopir.Expr) loopir.Expr {
			row := add(mul(i[2], i64(a.Strides[0])), mul(ry.Var, i64(a.Dilations[0])))
			col := add(add(mul(i[3], i64(a.Strides[1]*cb)), mul(rr.Var, i64(g))), re.Var)
			return te.Sum(te.Mul(te.Cast(tensor.Int32, x.At(i[0], icb.Var, row, col)),
				te.Cast(tensor.Int32, wp.At(i[1], icb.Var, ry.Var, rr.Var, i[4], re.Var))), icb, ry, rr, re)
		})
		return convResult(conv, bias, m, mb, a)
	}
	read := func(nn, ch, y, xx loopir.Expr) loopir.Expr {
		if a.XBlock == 0 {
			return x.At(nn, ch, y, xx)
		}
		return x.At(nn, div(ch, i64(a.XBlock)), y, xx, loopir.Bin(loopir.Mod, ch, i64(a.XBlock)))
	}
	cols, colStride := (wd+pl+pr)*cb, a.Strides[1]*cb
	if a.columns(kw) {
		cols, colStride = ow*kw*cb, kw*cb
	}
	var zero loopir.Expr // the zero point's value (nil: none)
	if zx != nil {
		zi := make([]loopir.Expr, len(zx.Shape))
		for k := range zi {
			zi[k] = i64(0)
		}
		zero = zx.At(zi...)
	}
	pad := te.Compute("pad", kernels.Static(n, blocks, h+pt+pb, cols), func(i []loopir.Expr) loopir.Expr {
		yy := sub(i[2], i64(pt))
		xx := sub(div(i[3], i64(cb)), i64(pl))
		if a.columns(kw) {
			// column q = ox·KW + kx of the row reads input column ox·s + kx·dx
			q := div(i[3], i64(cb))
			ox, kx := div(q, i64(kw)), loopir.Bin(loopir.Mod, q, i64(kw))
			xx = sub(add(mul(ox, i64(a.Strides[1])), mul(kx, i64(a.Dilations[1]))), i64(pl))
		}
		ch := add(mul(i[1], i64(cb)), loopir.Bin(loopir.Mod, i[3], i64(cb)))
		cond := loopir.Bin(loopir.And, inside(yy, i64(h)), inside(xx, i64(wd)))
		if c%cb != 0 {
			cond = loopir.Bin(loopir.And, cond, loopir.Bin(loopir.LT, ch, i64(c)))
			ch = clampIndex(ch, c)
		}
		v := read(i[0], ch, clampIndex(yy, h), clampIndex(xx, wd))
		if g == 4 { // as stored; the borders hold the zero point
			border := loopir.Expr(&loopir.IntImm{V: 0, DT: x.DT})
			if zero != nil {
				border = zero
			}
			return te.Select(cond, v, border)
		}
		d := te.Cast(tensor.Int32, v)
		if zero != nil {
			d = te.Sub(d, te.Cast(tensor.Int32, zero))
		}
		return te.Select(cond, te.Cast(tensor.Int16, d), &loopir.IntImm{V: 0, DT: tensor.Int16})
	})
	conv := te.Compute("conv", kernels.Static(n, (m+mb-1)/mb, oh, ow, mb), func(i []loopir.Expr) loopir.Expr {
		row := add(mul(i[2], i64(a.Strides[0])), mul(ry.Var, i64(a.Dilations[0])))
		col := add(add(mul(i[3], i64(colStride)), mul(rr.Var, i64(g))), re.Var)
		return te.Sum(te.Mul(te.Cast(tensor.Int32, pad.At(i[0], icb.Var, row, col)),
			te.Cast(tensor.Int32, wp.At(i[1], icb.Var, ry.Var, rr.Var, i[4], re.Var))), icb, ry, rr, re)
	})
	return convResult(conv, bias, m, mb, a)
}

// scheduleConvInteger schedules ConvIntegerBlocked: the padded copy of plain data by
// scheduleIntegerPad, of blocked data as the float convolution's (whole blocks,
// vectorized), none when the data is read in place; each output row (batch, channel
// block, row: fused, parallel) one micro-kernel call per tile of mr columns over the
// whole reduction; the epilogue under the row when there is one (scheduleRowEpilogue).
func scheduleConvInteger(s *schedule.Schedule, g intrin.GemmInt, epilogue string, a ConvBlockedAttrs, split bool) error {
	switch {
	case !s.HasBlock("pad"):
	case a.XBlock != 0:
		if err := schedulePad(s, true, a.CB); err != nil {
			return err
		}
	default:
		if err := scheduleIntegerPad(s, a.CB); err != nil {
			return err
		}
	}
	c, err := s.GetBlock("conv")
	if err != nil {
		return err
	}
	l, err := s.GetLoops(c)
	if err != nil {
		return err
	}
	if len(l) != 9 {
		return fmt.Errorf("integer conv2d strategy: block has %d loops, want 9", len(l))
	}
	n, ocb, oh, ow, oc, icb, ry, rr, re := l[0], l[1], l[2], l[3], l[4], l[5], l[6], l[7], l[8]
	w, err := s.Split(ow, []int64{-1, g.MR})
	if err != nil {
		return err
	}
	if err := s.Reorder(n, ocb, oh, w[0], w[1], oc, icb, ry, rr, re); err != nil {
		return err
	}
	if epilogue != "" {
		if err := scheduleRowEpilogue(s, c, oh, epilogue, split); err != nil {
			return err
		}
	}
	if err := s.Tensorize(w[1], g.Blocks); err != nil {
		return err
	}
	row, err := s.Fuse(n, ocb, oh)
	if err != nil {
		return err
	}
	return s.Parallel(row)
}

// PackConvWeightsInt16 reorders 8-bit OIHW weights [M, C, KH, KW] minus their zero
// point zw (nil: none; one value, or one per output channel) into the int16 pairs
// [⌈M/mb⌉, C/cb, KH, KW·cb/2, mb, 2] that ConvIntegerBlocked reads: the merged
// (kernel column, channel) position r of PackConvWeights at [r/2, o%mb, r%2]; zero
// past M.
func PackConvWeightsInt16(w, zw *tensor.Tensor, cb, mb int64) (*tensor.Tensor, error) {
	if !eightBit(w.DType) || len(w.Shape) != 4 {
		return nil, fmt.Errorf("weights %v%v: want 8-bit OIHW", w.DType, w.Shape)
	}
	m, c, kh, kw := int64(w.Shape[0]), int64(w.Shape[1]), int64(w.Shape[2]), int64(w.Shape[3])
	if c%cb != 0 && c > cb || kw*cb%2 != 0 {
		return nil, fmt.Errorf("%d input channels in blocks of %d over %d kernel columns", c, cb, kw)
	}
	v := w.Float64s()
	var z []float64
	if zw != nil {
		if z = zw.Float64s(); len(z) != 1 && int64(len(z)) != m {
			return nil, fmt.Errorf("weight zero point of %d values for %d output channels", len(z), m)
		}
	}
	mbs, run, blocks := (m+mb-1)/mb, kw*cb, (c+cb-1)/cb // channels past c pack as zeros
	out := make([]int16, mbs*blocks*cb*kh*kw*mb)
	for o := int64(0); o < m; o++ {
		zero := 0.0
		switch len(z) {
		case 1:
			zero = z[0]
		case 0:
		default:
			zero = z[o]
		}
		for i := int64(0); i < c; i++ {
			for y := int64(0); y < kh; y++ {
				for x := int64(0); x < kw; x++ {
					r := x*cb + i%cb
					at := ((((o/mb)*blocks+i/cb)*kh+y)*(run/2)+r/2)*mb*2 + (o%mb)*2 + r%2
					out[at] = int16(v[((o*c+i)*kh+y)*kw+x] - zero)
				}
			}
		}
	}
	return tensor.FromSlice(tensor.Shape{int(mbs), int(blocks), int(kh), int(run / 2), int(mb), 2}, out)
}

// scheduleIntegerPad schedules the padded copy of plain NCHW data: rows in parallel,
// and per row the channels of a block outside the columns, so that each channel's
// input row is read contiguously (one channel plane apart per channel, as a loop over
// the block's channels inside the columns would read them) while the writes, a block
// apart, stay within the block's padded row.
func scheduleIntegerPad(s *schedule.Schedule, cb int64) error {
	pb, err := s.GetBlock("pad")
	if err != nil {
		return err
	}
	pl, err := s.GetLoops(pb)
	if err != nil {
		return err
	}
	prow, err := s.Fuse(pl[0], pl[1], pl[2])
	if err != nil {
		return err
	}
	cols, err := s.Split(pl[3], []int64{-1, cb})
	if err != nil {
		return err
	}
	if err := s.Reorder(cols[1], cols[0]); err != nil {
		return err
	}
	return s.Parallel(prow)
}

// IntegerQDQ is the CPU's choice of the convolutions in ONNX's QDQ form that run as
// QLinearConv (passes.QDQConv): the ungrouped 2-D ones over 16 input channels or more,
// which the blocked integer convolution runs with its data and result in channel blocks
// (the layout policy's integerAnchor) in a fraction of the float one's time (8-bit VNNI
// where the weights fit int8: ResNet-50's whole network 0.45 of its float time on a
// Zen 4 host), and a stem's window over fewer channels (ResNet-50's 7×7 over 3,
// computed in one block of 4: half its float time). The others stay float, faster
// there today: 1×1 ones over fewer than 16 channels; depthwise ones (the integer
// depthwise strategy, on uint8 maps, measured 1.05–2.7 times the float depthwise
// convolution's time per layer in MobileNetV2, and its uint8 maps made the expansions
// before it slower too: the whole network 1.2 times); other grouped ones (the integer
// path's padded generic strategy); and those of symbolic shapes or automatic padding,
// which the blocked integer convolution does not take.
func IntegerQDQ(conv *graph.Node) bool {
	a, _ := conv.Attrs.(*graph.ConvAttrs)
	if a == nil || a.Group != 1 || len(conv.Inputs) < 2 || len(conv.Inputs[1].Type.Shape) != 4 {
		return false
	}
	if !conv.Inputs[0].Type.IsStatic() || !conv.Outputs[0].Type.IsStatic() || (a.AutoPad != "NOTSET" && a.AutoPad != "VALID" && a.AutoPad != "") {
		return false // the blocked integer convolution's conditions (convIntegerFits)
	}
	w := conv.Inputs[1].Type.Shape
	c, okC := w[1].Value()
	kh, okH := w[2].Value()
	kw, okW := w[3].Value()
	return okC && okH && okW && (c >= 16 || kh*kw > 1)
}
