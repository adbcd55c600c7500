package kernels

import (
	"fmt"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// Integer products: MatMulInteger and ConvInteger accumulate (a − a_zero_point)·(b −
// b_zero_point) in int32 (the shifted operands are elementwise stages that the schedule
// inlines into the product: MatMulND and Conv unchanged); QLinearMatMul and QLinearConv
// requantize that accumulator. Zero points and scales are per tensor, per row of a
// matrix product's a (axis −2), per column of its b (axis −1), per input channel of a
// convolution's x (ConvInteger) or per output channel of its w (axis 0). A constant
// zero point of zeros (symmetric weights) is left out of the product.

// zeroConst reports whether input i is a constant zero point whose values are all 0
// (symmetric weights): the shift by it is left out.
func zeroConst(in []Input, i int) bool {
	if i >= len(in) || in[i].Const == nil {
		return false
	}
	for _, v := range in[i].Const.Float64s() {
		if v != 0 {
			return false
		}
	}
	return true
}

// withoutZero drops z when input i is a constant zero.
func withoutZero(z quantParam, in []Input, i int) quantParam {
	if zeroConst(in, i) {
		return quantParam{axis: -1}
	}
	return z
}

// shifted is t − zero point, as int32.
func shifted(name string, t *te.Tensor, z quantParam) *te.Tensor {
	return te.Compute(name, t.Shape, func(i []loopir.Expr) loopir.Expr {
		v := te.Cast(tensor.Int32, t.At(i...))
		if z.t != nil {
			v = te.Sub(v, te.Cast(tensor.Int32, z.at(i)))
		}
		return v
	})
}

// integerOperand checks an 8-bit operand of an integer product and its zero point (nil:
// absent) along axis (-1: per tensor only).
func integerOperand(op graph.Op, what string, t, zp *te.Tensor, axis int) (quantParam, error) {
	if t.DT != tensor.Int8 && t.DT != tensor.Uint8 {
		return quantParam{}, Unsupported("%v with %s of type %v", op, what, t.DT)
	}
	if zp == nil {
		return quantParam{axis: -1}, nil
	}
	if zp.DT != t.DT {
		return quantParam{}, Unsupported("%v with %s of type %v and its zero point of type %v", op, what, t.DT, zp.DT)
	}
	return resolveQuantParam(what+" zero point", zp, t.Shape, axis)
}

// rowAxis and colAxis are the axes of a matrix product's operands that a per-row (a)
// or per-column (b) parameter runs along; -1 for a vector, which has none.
func rowAxis(a *te.Tensor) int {
	if len(a.Shape) < 2 {
		return -1
	}
	return len(a.Shape) - 2
}

func colAxis(b *te.Tensor) int {
	if len(b.Shape) < 2 {
		return -1
	}
	return len(b.Shape) - 1
}

func computeMatMulInteger(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	a, b := in[0].T, in[1].T
	za, err := integerOperand(n.Op, "a", a, optional(in, 2), rowAxis(a))
	if err != nil {
		return nil, err
	}
	zb, err := integerOperand(n.Op, "b", b, optional(in, 3), colAxis(b))
	if err != nil {
		return nil, err
	}
	za, zb = withoutZero(za, in, 2), withoutZero(zb, in, 3)
	out, err := MatMulND(shifted("a_shifted", a, za), shifted("b_shifted", b, zb))
	if err != nil {
		return nil, err
	}
	return []*te.Tensor{out}, nil
}

func computeConvInteger(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	x, w := in[0].T, in[1].T
	zx, err := integerOperand(n.Op, "x", x, optional(in, 2), 1)
	if err != nil {
		return nil, err
	}
	zw, err := integerOperand(n.Op, "w", w, optional(in, 3), 0)
	if err != nil {
		return nil, err
	}
	zx, zw = withoutZero(zx, in, 2), withoutZero(zw, in, 3)
	out, err := integerConv(n, shifted("x_shifted", x, zx), shifted("w_shifted", w, zw))
	if err != nil {
		return nil, err
	}
	return []*te.Tensor{out}, nil
}

// integerConv is the convolution of n's window over the shifted operands.
func integerConv(n *graph.Node, x, w *te.Tensor) (*te.Tensor, error) {
	a := attrs[graph.ConvAttrs](n)
	if len(x.Shape) < 3 || len(w.Shape) != len(x.Shape) {
		return nil, Unsupported("%v of input rank %d with weight rank %d", n.Op, len(x.Shape), len(w.Shape))
	}
	we, err := Extents(w)
	if err != nil {
		return nil, err
	}
	for d, ks := range a.KernelShape {
		if d+2 >= len(we) || ks != we[d+2] {
			return nil, Unsupported("kernel_shape %v does not match weight %v", a.KernelShape, we)
		}
	}
	win, err := convWindow(a, we)
	if err != nil {
		return nil, err
	}
	xe, serr := staticFrom(x, 2)
	if serr != nil {
		geo, err := ResolveConvSym(x.Shape[2:], win, a.Group)
		if err != nil {
			return nil, err
		}
		return Conv(x, w, nil, geo)
	}
	geo, err := ResolveConv(xe, win, a.Group)
	if err != nil {
		return nil, err
	}
	if out, ok := flatConv(x, w, xe, we, geo); ok {
		return out, nil
	}
	xp, geo := padConvInput(x, xe, we[2:], geo)
	return Conv(xp, w, nil, geo)
}

// padConvInput gives the shifted input x (spatial extents xe, static) the convolution's
// zero padding as a stage of its own, "x_padded", extended to exactly the span the
// windows read, and returns it with the geometry over it (no padding left): the product
// then reads it unguarded. A schedule that keeps the stage (kernels/cpu) streams the
// product along contiguous rows; one that inlines it gets the guarded reads back. Without
// padding (or when a window reads past the padded extent) x and g come back unchanged.
func padConvInput(x *te.Tensor, xe, ke []int64, g ConvGeometry) (*te.Tensor, ConvGeometry) {
	ext := make([]int64, len(xe))
	pad := false
	for d := range xe {
		if g.Out[d] <= 0 {
			return x, g
		}
		ext[d] = (g.Out[d]-1)*g.Strides[d] + (ke[d]-1)*g.Dilations[d] + 1
		pad = pad || g.PadBegin[d] > 0 || ext[d] > xe[d]
	}
	if !pad {
		return x, g
	}
	shape := append([]loopir.Expr{x.Shape[0], x.Shape[1]}, Static(ext...)...)
	xp := te.Compute("x_padded", shape, func(i []loopir.Expr) loopir.Expr {
		idx := []loopir.Expr{i[0], i[1]}
		var in loopir.Expr
		for d := range xe {
			v := sub(i[2+d], i64(g.PadBegin[d]))
			in = nnAnd(in, nnAnd(loopir.Bin(loopir.GE, v, i64(0)), loopir.Bin(loopir.LT, v, i64(xe[d]))))
			idx = append(idx, nnClamp(v, xe[d]))
		}
		return te.Select(in, x.At(idx...), lit(0, x.At(idx...)))
	})
	out := g
	out.PadBegin = make([]int64, len(xe))
	return xp, out
}

// qlinearOutput checks the output scale and zero point of a QLinear* node (per tensor)
// and returns the output type.
func qlinearOutput(n *graph.Node, ys, yz *te.Tensor) (s, z quantParam, dt tensor.DType, err error) {
	if yz.DT != tensor.Int8 && yz.DT != tensor.Uint8 {
		return s, z, 0, Unsupported("%v to %v", n.Op, yz.DT)
	}
	s, z, err = quantParams(ys, yz, nil, -1)
	return s, z, yz.DT, err
}

// requantize is acc · scale / ys + yz for every element of acc, saturated to dt, in
// float64; scale(i) is the product of the operand scales at output index i and bias(i),
// when not nil, an int32 added to the accumulator.
func requantize(acc *te.Tensor, scale, bias func(i []loopir.Expr) loopir.Expr, ys, yz quantParam, dt tensor.DType) *te.Tensor {
	f := tensor.Float64
	return te.Compute("requantize", acc.Shape, func(i []loopir.Expr) loopir.Expr {
		v := te.Cast(f, acc.At(i...))
		if bias != nil {
			v = te.Add(v, te.Cast(f, bias(i)))
		}
		v = te.Div(te.Mul(v, scale(i)), te.Cast(f, ys.at(i)))
		return quantizeValue(v, zeroAt(yz, i, f), dt)
	})
}

func computeQLinearMatMul(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	a, b := in[0].T, in[3].T
	if _, err := integerOperand(n.Op, "a", a, in[2].T, rowAxis(a)); err != nil {
		return nil, err
	}
	if _, err := integerOperand(n.Op, "b", b, in[5].T, colAxis(b)); err != nil {
		return nil, err
	}
	sa, za, err := quantParams(in[1].T, in[2].T, a.Shape, rowAxis(a))
	if err != nil {
		return nil, err
	}
	sb, zb, err := quantParams(in[4].T, in[5].T, b.Shape, colAxis(b))
	if err != nil {
		return nil, err
	}
	ys, yz, dt, err := qlinearOutput(n, in[6].T, in[7].T)
	if err != nil {
		return nil, err
	}
	za, zb = withoutZero(za, in, 2), withoutZero(zb, in, 5)
	acc, err := MatMulND(shifted("a_shifted", a, za), shifted("b_shifted", b, zb))
	if err != nil {
		return nil, err
	}
	// output positions of a's rows and b's columns
	r := len(acc.Shape)
	row, col := -1, -1
	if len(b.Shape) >= 2 {
		col = r - 1
	}
	if len(a.Shape) >= 2 {
		row = r - 1
		if col >= 0 {
			row = r - 2
		}
	}
	f := tensor.Float64
	scale := func(i []loopir.Expr) loopir.Expr {
		return te.Mul(te.Cast(f, sa.atAxis(axisIndex(i, row))), te.Cast(f, sb.atAxis(axisIndex(i, col))))
	}
	return []*te.Tensor{requantize(acc, scale, nil, ys, yz, dt)}, nil
}

// axisIndex is i[pos], or 0 when pos < 0.
func axisIndex(i []loopir.Expr, pos int) loopir.Expr {
	if pos < 0 {
		return loopir.Int(0)
	}
	return i[pos]
}

func computeQLinearConv(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	x, w := in[0].T, in[3].T
	if _, err := integerOperand(n.Op, "x", x, in[2].T, -1); err != nil {
		return nil, err
	}
	if _, err := integerOperand(n.Op, "w", w, in[5].T, 0); err != nil {
		return nil, err
	}
	_, zx, err := quantParams(in[1].T, in[2].T, x.Shape, -1)
	if err != nil {
		return nil, err
	}
	_, zw, err := quantParams(in[4].T, in[5].T, w.Shape, 0)
	if err != nil {
		return nil, err
	}
	zx, zw = withoutZero(zx, in, 2), withoutZero(zw, in, 5)
	acc, err := integerConv(n, shifted("x_shifted", x, zx), shifted("w_shifted", w, zw))
	if err != nil {
		return nil, err
	}
	out, err := QLinearConvRequantize(n, in, acc, nil, nil)
	if err != nil {
		return nil, err
	}
	return []*te.Tensor{out}, nil
}

// QLinearConvRequantize is QLinearConv n's output from its int32 accumulator acc (the
// product of the operands shifted by their zero points): the bias added, scaled by
// x_scale · w_scale / y_scale, y_zero_point added and saturated to the output type. A
// strategy that computes the accumulator its own way (kernels/cpu's integer micro-kernel)
// requantizes with it; in are the node's inputs. channel gives the output channel of
// an index of acc: nil for NCHW (i[1]); a strategy that computes the result in another
// view of NCHW's storage gives its own. mult, when not nil, is that scale per output
// channel, float64 [M] (RequantizeMultipliers, computed once from constant scales):
// one product per element instead of two and a division.
func QLinearConvRequantize(n *graph.Node, in []Input, acc *te.Tensor, channel func(i []loopir.Expr) loopir.Expr, mult *te.Tensor) (*te.Tensor, error) {
	if channel == nil {
		channel = func(i []loopir.Expr) loopir.Expr { return i[1] }
	}
	x, w := in[0].T, in[3].T
	sx, _, err := quantParams(in[1].T, in[2].T, x.Shape, -1)
	if err != nil {
		return nil, err
	}
	sw, _, err := quantParams(in[4].T, in[5].T, w.Shape, 0)
	if err != nil {
		return nil, err
	}
	ys, yz, dt, err := qlinearOutput(n, in[6].T, in[7].T)
	if err != nil {
		return nil, err
	}
	var bias func(i []loopir.Expr) loopir.Expr
	if b := optional(in, 8); b != nil {
		be, err := Extents(b)
		if err != nil {
			return nil, err
		}
		if b.DT != tensor.Int32 || len(be) != 1 || !sameStatic(w.Shape[0], be[0]) {
			return nil, Unsupported("%v bias of type %v and shape %v", n.Op, b.DT, be)
		}
		bias = func(i []loopir.Expr) loopir.Expr { return b.At(channel(i)) }
	}
	f := tensor.Float64
	if mult != nil {
		return requantizeBy(acc, func(i []loopir.Expr) loopir.Expr { return mult.At(channel(i)) }, bias, yz, dt), nil
	}
	scale := func(i []loopir.Expr) loopir.Expr {
		return te.Mul(te.Cast(f, sx.atAxis(nil)), te.Cast(f, sw.atAxis(channel(i))))
	}
	return requantize(acc, scale, bias, ys, yz, dt), nil
}

// RequantizeMultipliers is QLinearConv's scale x_scale · w_scale / y_scale per output
// channel as float64 [m], from constant scales (w_scale of one value or m), computed in
// the order requantize computes it.
func RequantizeMultipliers(xScale, wScale, yScale *tensor.Tensor, m int) (*tensor.Tensor, error) {
	if xScale == nil || wScale == nil || yScale == nil || xScale.Shape.NumElements() != 1 || yScale.Shape.NumElements() != 1 {
		return nil, fmt.Errorf("requantization multipliers need constant per-tensor x and y scales")
	}
	ws := wScale.Float64s()
	if len(ws) != 1 && len(ws) != m {
		return nil, fmt.Errorf("weight scale of %d values for %d output channels", len(ws), m)
	}
	sx, sy := xScale.Float64s()[0], yScale.Float64s()[0]
	out := make([]float64, m)
	for c := range out {
		out[c] = sx * ws[min(c, len(ws)-1)] / sy
	}
	return tensor.FromFloat64s(tensor.Float64, tensor.Shape{m}, out), nil
}

// requantizeBy is requantize with the whole scale per element given (mult).
func requantizeBy(acc *te.Tensor, mult, bias func(i []loopir.Expr) loopir.Expr, yz quantParam, dt tensor.DType) *te.Tensor {
	f := tensor.Float64
	return te.Compute("requantize", acc.Shape, func(i []loopir.Expr) loopir.Expr {
		v := te.Cast(f, acc.At(i...))
		if bias != nil {
			v = te.Add(v, te.Cast(f, bias(i)))
		}
		return quantizeValue(te.Mul(v, mult(i)), zeroAt(yz, i, f), dt)
	})
}

// sameStatic reports whether extent e is the constant v.
func sameStatic(e loopir.Expr, v int64) bool {
	c, ok := e.(*loopir.IntImm)
	return ok && c.V == v
}
