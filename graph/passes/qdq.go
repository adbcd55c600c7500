package passes

import (
	"math"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

// QDQConv rewrites the QDQ form of a statically quantized convolution into the integer
// operator it stands for, as ONNX Runtime does:
//
//	QuantizeLinear(Conv(DequantizeLinear(xq, sx, zx), DequantizeLinear(wq, sw, zw), DequantizeLinear(bq, sb)), sy, zy)
//	  → QLinearConv(xq, sx, zx, wq, sw, zw, sy, zy, bq)
//
// with an optional Relu between the Conv and the QuantizeLinear where zy is the least
// value of y's type (the quantizer's clamp then is the Relu). It matches only where the
// integer operator means the same real-number computation: x's and y's scales and zero
// points are constants of one element, the weights and their scales and zero points are
// constants (per tensor, or per output channel with axis 0), the bias is absent or int32
// constants with a zero zero point and a scale equal, in float32 and bit for bit, to
// sx·sw (what quantizers write), every scale is positive and finite, and every
// intermediate value is read by the pattern alone. (A negative y scale reverses the
// quantizer: its clamp at zy then cuts the other side, so it is not the Relu; zero,
// infinite and NaN scales are left to the float operators' definitions.) The integer
// operator sums exactly and rounds once; the float operators round every dequantized
// value and every partial sum, so the two can put a value that lies
// within float32 rounding of a half-step on either side of it: the result differs from
// the float form's by at most one quantization step there, and ONNX Runtime's integer
// kernels make the same choice. Context.IntegerQDQ picks the convolutions (the
// backend's: where its integer kernels are the faster); it runs before fold-constants,
// which would dequantize the weights into float constants.
func QDQConv(ctx *Context, m *graph.Module) error {
	if ctx.IntegerQDQ == nil {
		return nil
	}
	found := false
	m.Main.Funcs(func(f *graph.Func) {
		for _, n := range f.Nodes {
			found = found || n.Op == graph.OpQuantizeLinear
		}
	})
	if !found {
		return nil
	}
	return newMatchState(m).rewriteAll(m, func(st *matchState, n *graph.Node) *rewrite {
		if r := matchQDQConv(st, n); r != nil && ctx.IntegerQDQ(r.nodes[len(r.nodes)-1]) {
			return r
		}
		return nil
	})
}

// matchQDQConv anchors at the QuantizeLinear.
func matchQDQConv(st *matchState, q *graph.Node) *rewrite {
	if q.Op != graph.OpQuantizeLinear || len(q.Inputs) < 2 {
		return nil
	}
	sy, zy, ok := qdqScalarParams(q)
	yt := tensor.Uint8
	if zy != nil {
		yt = zy.Const.DType
	}
	if !ok || (yt != tensor.Uint8 && yt != tensor.Int8) {
		return nil
	}
	nodes := []*graph.Node{q}
	conv := st.def(q.Inputs[0], graph.OpConv)
	if relu := st.def(q.Inputs[0], graph.OpRelu); relu != nil {
		lo := int64(0) // uint8's least value
		if yt == tensor.Int8 {
			lo = math.MinInt8
		}
		if zy != nil && qdqInt(zy.Const, 0) != lo {
			return nil // the quantizer's clamp is not the Relu
		}
		nodes = append(nodes, relu)
		conv = st.def(relu.Inputs[0], graph.OpConv)
	}
	if conv == nil || len(conv.Inputs) < 2 || conv.Outputs[0].Type.DType != tensor.Float32 {
		return nil
	}
	nodes = append(nodes, conv)
	xd := st.def(conv.Inputs[0], graph.OpDequantizeLinear)
	wd := st.def(conv.Inputs[1], graph.OpDequantizeLinear)
	if xd == nil || wd == nil {
		return nil
	}
	xq := xd.Inputs[0]
	sx, zx, ok := qdqScalarParams(xd)
	if !ok || (xq.Type.DType != tensor.Uint8 && xq.Type.DType != tensor.Int8) {
		return nil
	}
	wq := wd.Inputs[0]
	sw, zw, ok := qdqWeightParams(wd)
	if !ok || wq.Const == nil || (wq.Type.DType != tensor.Int8 && wq.Type.DType != tensor.Uint8) {
		return nil
	}
	var bq *graph.Value
	if len(conv.Inputs) > 2 && conv.Inputs[2] != nil {
		bd := st.def(conv.Inputs[2], graph.OpDequantizeLinear)
		if bd == nil || !qdqBiasMatches(bd, sx, sw) {
			return nil
		}
		bq = bd.Inputs[0]
	}
	// named for the convolution it computes (plans and profiles name kernels by it)
	r := &rewrite{nodes: nodes, final: q, op: graph.OpQLinearConv, attrs: conv.Attrs, name: conv.Name}
	zero := func(v *graph.Value, dt tensor.DType, shape tensor.Shape, base string) *graph.Value {
		if v != nil {
			return v
		}
		z := st.newConst(base, tensor.New(dt, shape))
		r.consts = append(r.consts, z)
		return z
	}
	zx = zero(zx, xq.Type.DType, tensor.Shape{}, q.Outputs[0].Name+"_x_zero_point")
	zw = zero(zw, wq.Type.DType, sw.Const.Shape, q.Outputs[0].Name+"_w_zero_point")
	zy = zero(zy, yt, tensor.Shape{}, q.Outputs[0].Name+"_y_zero_point")
	r.inputs = []*graph.Value{xq, sx, zx, wq, sw, zw, sy, zy}
	if bq != nil {
		r.inputs = append(r.inputs, bq)
	}
	return r
}

// qdqScalarParams returns a (de)quantizer's scale and zero point (nil when absent) when
// both are float32 / 8-bit constants of one element, scalars or of shape [1] (the
// shapes QLinearConv takes).
func qdqScalarParams(n *graph.Node) (s, z *graph.Value, ok bool) {
	s = n.Inputs[1]
	if s == nil || s.Const == nil || s.Const.DType != tensor.Float32 || s.Const.Shape.NumElements() != 1 || len(s.Const.Shape) > 1 || !positiveFinite(s.Const) {
		return nil, nil, false
	}
	if len(n.Inputs) > 2 && n.Inputs[2] != nil {
		z = n.Inputs[2]
		if z.Const == nil || z.Const.Shape.NumElements() != 1 || len(z.Const.Shape) > 1 {
			return nil, nil, false
		}
	}
	return s, z, true
}

// qdqWeightParams returns the weights' dequantizer's scale and zero point (nil when
// absent): float32 constants, one element or one per output channel (axis 0).
func qdqWeightParams(n *graph.Node) (s, z *graph.Value, ok bool) {
	s = n.Inputs[1]
	w := n.Inputs[0].Type
	if s == nil || s.Const == nil || s.Const.DType != tensor.Float32 || len(w.Shape) < 3 || !positiveFinite(s.Const) {
		return nil, nil, false
	}
	k, known := w.Shape[0].Value()
	switch size := int64(s.Const.Shape.NumElements()); {
	case len(s.Const.Shape) == 0 || size == 1 && len(s.Const.Shape) <= 1:
	case len(s.Const.Shape) == 1 && known && size == k:
		a, _ := n.Attrs.(*graph.QuantAttrs)
		if a == nil || (a.Axis != 0 && a.Axis != -int64(len(w.Shape))) {
			return nil, nil, false
		}
	default:
		return nil, nil, false
	}
	if len(n.Inputs) > 2 && n.Inputs[2] != nil {
		z = n.Inputs[2]
		if z.Const == nil || !z.Const.Shape.Equal(s.Const.Shape) {
			return nil, nil, false
		}
	}
	return s, z, true
}

// qdqBiasMatches: the bias's dequantizer reads int32 constants with a zero (or absent)
// zero point and a scale that is sx·sw in float32, element for element.
func qdqBiasMatches(n *graph.Node, sx, sw *graph.Value) bool {
	b, sb := n.Inputs[0], n.Inputs[1]
	if b.Const == nil || b.Const.DType != tensor.Int32 || len(b.Const.Shape) != 1 || sb == nil || sb.Const == nil || sb.Const.DType != tensor.Float32 {
		return false
	}
	if len(n.Inputs) > 2 && n.Inputs[2] != nil {
		z := n.Inputs[2].Const
		if z == nil {
			return false
		}
		for i := range z.Shape.NumElements() {
			if qdqInt(z, i) != 0 {
				return false
			}
		}
	}
	k := b.Const.Shape.NumElements()
	if sb.Const.Shape.NumElements() != k && sb.Const.Shape.NumElements() != 1 {
		return false
	}
	if sb.Const.Shape.NumElements() == k && k > 1 {
		if a, _ := n.Attrs.(*graph.QuantAttrs); a == nil || (a.Axis != 0 && a.Axis != -1) {
			return false
		}
	}
	x := sx.Const.Data.([]float32)[0]
	ws, bs := sw.Const.Data.([]float32), sb.Const.Data.([]float32)
	for i := range k {
		want := x * ws[min(i, len(ws)-1)]
		if math.Float32bits(bs[min(i, len(bs)-1)]) != math.Float32bits(want) {
			return false
		}
	}
	return true
}

// positiveFinite reports whether every element of a float constant is positive and
// finite (a scale QLinearConv's rewrite takes).
func positiveFinite(t *tensor.Tensor) bool {
	for _, v := range t.Float64s() {
		if !(v > 0) || math.IsInf(v, 1) {
			return false
		}
	}
	return true
}

// qdqInt reads element i of an integer constant.
func qdqInt(t *tensor.Tensor, i int) int64 {
	return int64(t.Float64s()[i])
}
