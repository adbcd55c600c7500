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

// The integer depthwise convolution: a QLinearConv with one group per channel runs the
// float depthwise convolution's stages (DepthwiseNCHWc: channel blocks, the padded rows
// of each output row, the tap-by-tap vector loop) on x − zx and w − zw as float32.
// Those differences are integers of at most 255 in magnitude, their products at most
// 65025, and a window's sum of them stays below 2^24 (taps · 255 · max|w − zw|, checked): every
// product and partial sum is an integer float32 holds exactly, in any order, so the
// accumulator is the integer operator's, exactly, and is requantized as the blocked
// integer convolution's. The data stays uint8 (or int8) in memory, converted to float
// in the padded rows; the weights are converted once, on the host.

// integerDepthwiseProbe is the float Conv the depthwise strategy would see for integer
// convolution n: its data's type as float32 (stored as n's is), its weights minus their
// zero point as float32 constants, its result's type as float32, its attributes. An
// error wraps ErrNotApplicable when n is not a depthwise QLinearConv of 8-bit data and
// constant weights whose window sum float32 holds exactly.
func integerDepthwiseProbe(n *graph.Node) (*graph.Node, error) {
	if n.Op != graph.OpQLinearConv || len(n.Inputs) < 8 || len(n.Outputs) != 1 {
		return nil, notApplicable("not a QLinearConv")
	}
	idx := integerInputsOf(n.Op)
	x, w := n.Inputs[0], n.Inputs[idx.w]
	if x == nil || w == nil || w.Const == nil || len(w.Const.Shape) != 4 || !eightBit(x.Type.DType) || !eightBit(w.Const.DType) {
		return nil, notApplicable("8-bit data and constant 4-D 8-bit weights")
	}
	if a, _ := n.Attrs.(*graph.ConvAttrs); a == nil || a.Group <= 1 || w.Const.Shape[1] != 1 {
		// not depthwise: asked of every QLinearConv (the layout policy), answered before
		// the weights are converted
		return nil, notApplicable("not a depthwise convolution")
	}
	if zx := n.Inputs[idx.zx]; zx != nil {
		if s, ok := zx.Type.ConstShape(); !ok || s.NumElements() != 1 || zx.Type.DType != x.Type.DType {
			return nil, notApplicable("data zero point per channel or of another type")
		}
	}
	var zw *tensor.Tensor
	if v := n.Inputs[idx.zw]; v != nil {
		if zw = v.Const; zw == nil || zw.DType != w.Const.DType {
			return nil, notApplicable("weight zero point computed at run time or of another type")
		}
	}
	wf, err := weightsMinusZero(w.Const, zw)
	if err != nil {
		return nil, notApplicable("%v", err)
	}
	var most float64
	for _, v := range wf.Float64s() {
		most = max(most, v, -v)
	}
	if taps := int64(w.Const.Shape[2]) * int64(w.Const.Shape[3]); float64(taps)*255*most >= 1<<24 {
		return nil, notApplicable("a window of %d taps over weights up to %g: its sums are not exact in float32", taps, most)
	}
	xt, yt := x.Type, n.Outputs[0].Type
	xt.DType, yt.DType = tensor.Float32, tensor.Float32
	return &graph.Node{Op: graph.OpConv, Attrs: n.Attrs,
		Inputs:  []*graph.Value{{Name: x.Name, Type: xt}, {Name: w.Name, Type: graph.TensorType(tensor.Float32, graph.StaticShape(shapeInts(wf.Shape)...)...), Const: wf}},
		Outputs: []*graph.Value{{Name: n.Outputs[0].Name, Type: yt}}}, nil
}

// weightsMinusZero is 8-bit OIHW weights minus their zero point (nil, one value or one
// per output channel) as float32.
func weightsMinusZero(w, zw *tensor.Tensor) (*tensor.Tensor, error) {
	_, c, kh, kw, z, err := convWeightsShape(w, zw, 1, 1)
	if err != nil {
		return nil, err
	}
	v := w.Float64s()
	per := c * kh * kw
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = x - z(int64(i)/per)
	}
	return tensor.FromFloat64s(tensor.Float32, w.Shape, out), nil
}

// buildIntegerDepthwise lowers a depthwise QLinearConv (integerDepthwiseProbe) through
// DepthwiseNCHWc on float32 x − zx and prepacked w − zw, requantized on the result,
// reading the data as it is stored and leaving the result blocked when the graph says
// so, as buildGroups does for the float convolution.
func buildIntegerDepthwise(reg *kernels.Registry, n *graph.Node, in []kernels.Input, epi []kernels.Epilogue, t target.Target) (*kernels.Impl, error) {
	probe, err := integerDepthwiseProbe(n)
	if err != nil {
		return nil, err
	}
	attrs, bl, err := groupsBlock(t, probe, false)
	if err != nil {
		return nil, err
	}
	idx := integerInputsOf(n.Op)
	ws := probe.Inputs[1].Const.Shape
	m := int64(ws[0])
	if b := n.Outputs[0].Type.Block; b != 0 {
		if m%b != 0 || attrs.Mult%b != 0 && b%attrs.Mult != 0 {
			return nil, fmt.Errorf("BUG: %v: output stored in blocks of %d across its groups of %d channels", n, b, attrs.Mult)
		}
		attrs.BlockedOut, bl = true, b
	} else if bl == 0 {
		return nil, notApplicable("%d output channels in no block of this target", m)
	}
	attrs.Block = bl
	attrs.Pair = depthwisePair(t, probe, attrs, DefaultDepthwise)
	var zw *tensor.Tensor
	if len(in) > idx.zw {
		zw = in[idx.zw].Const
	}
	pair := max(attrs.Pair, 1)
	wp := te.Placeholder("w", tensor.Float32, kernels.Static(m/bl, int64(ws[2]), int64(ws[3]), bl*pair)...)
	feed := kernels.Param{Input: idx.w, Layout: fmt.Sprintf("M1HW−%s→f32[M/%d,H,W,%d×%d]", zeroPointText(zw), bl, pair, bl),
		Prepack: func(v *tensor.Tensor) (*tensor.Tensor, error) {
			f, err := weightsMinusZero(v, zw)
			if err != nil {
				return nil, err
			}
			return PackDepthwiseWeightsPaired(f, bl, pair)
		}}
	x := in[0].T
	params, feeds := []*te.Tensor{x, wp}, []kernels.Param{{Input: 0}, feed}
	var zx *te.Tensor
	if len(in) > idx.zx && in[idx.zx].T != nil && !allZero(in[idx.zx].Const) {
		zx = in[idx.zx].T
		params, feeds = append(params, zx), append(feeds, kernels.Param{Input: idx.zx})
	}
	xf := te.Compute("x_float", x.Shape, func(i []loopir.Expr) loopir.Expr {
		v := te.Cast(tensor.Float32, x.At(i...))
		if zx != nil {
			zi := make([]loopir.Expr, len(zx.Shape))
			for k := range zi {
				zi[k] = i64(0)
			}
			v = te.Sub(v, te.Cast(tensor.Float32, zx.At(zi...)))
		}
		return v
	})
	out, err := DepthwiseNCHWc(xf, wp, nil, attrs)
	if err != nil {
		return nil, err
	}
	var channel func(i []loopir.Expr) loopir.Expr
	if attrs.BlockedOut {
		channel = func(i []loopir.Expr) loopir.Expr { return add(mul(i[1], i64(bl)), i[4]) }
	}
	if out, params, feeds, err = requantizeQLinearConv(n, in, out, channel, m, params, feeds); err != nil {
		return nil, err
	}
	return lowerDepthwise(reg, n, out, params, feeds, epi, t, attrs.BlockedOut, DefaultDepthwise, false)
}

// shapeInts is a shape's extents as int64.
func shapeInts(s tensor.Shape) []int64 {
	out := make([]int64, len(s))
	for i, e := range s {
		out[i] = int64(e)
	}
	return out
}
