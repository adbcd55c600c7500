package kernels

import (
	"math"
	"strconv"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// The quantization family: QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear
// (this file); MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv
// (quant_integer.go). Arithmetic follows the reference evaluator exactly:
//
//   - quantize: rint(x / scale) + zero point, the quotient in x's type (rint rounds half
//     to even in the default rounding mode), saturated to the output type's range (in
//     float64 for int32, whose bounds float32 does not hold), then converted;
//   - dequantize: (x - zero point) · scale; for 8- and 16-bit inputs and a float32
//     scale the difference and the product are exact before the one rounding to
//     float32, so float32 arithmetic gives the same result; int32 inputs and float64
//     scales go through float64;
//   - DynamicQuantizeLinear: float32 arithmetic as ONNX specifies it (scale =
//     (max(0, max x) − min(0, min x)) / 255, zero point rint(−min / scale), saturated);
//   - integer products accumulate (a − a_zero_point)·(b − b_zero_point) in int32, and
//     QLinear* requantize acc · (a_scale · b_scale / y_scale) in float64.

// quantComputes: the quantization family.
func quantComputes() map[graph.Op]ComputeFunc {
	return map[graph.Op]ComputeFunc{
		graph.OpQuantizeLinear:        computeQuantize,
		graph.OpDequantizeLinear:      computeDequantize,
		graph.OpDynamicQuantizeLinear: computeDynamicQuantize,
		graph.OpMatMulInteger:         computeMatMulInteger,
		graph.OpConvInteger:           computeConvInteger,
		graph.OpQLinearMatMul:         computeQLinearMatMul,
		graph.OpQLinearConv:           computeQLinearConv,
	}
}

// quantRange is the saturation range of a quantized element type; ok is false for a type
// this family does not produce (int4, float8: they need packing or a float encoding).
func quantRange(dt tensor.DType) (lo, hi float64, ok bool) {
	switch dt {
	case tensor.Uint8:
		return 0, 255, true
	case tensor.Int8:
		return -128, 127, true
	case tensor.Uint16:
		return 0, 65535, true
	case tensor.Int16:
		return -32768, 32767, true
	case tensor.Int32:
		return math.MinInt32, math.MaxInt32, true
	}
	return 0, 0, false
}

// quantParam is a scale or zero point as read for element i of a tensor: one value for
// the whole tensor, or one per index of an axis. A nil tensor is an absent zero point.
type quantParam struct {
	t    *te.Tensor
	axis int // -1: per tensor
}

// at reads the parameter for the element at index i of the quantized tensor.
func (p quantParam) at(i []loopir.Expr) loopir.Expr {
	if p.axis < 0 {
		return p.atAxis(nil)
	}
	return p.atAxis(i[p.axis])
}

// atAxis reads the parameter for index v along its axis (v is ignored per tensor).
func (p quantParam) atAxis(v loopir.Expr) loopir.Expr {
	idx := zeros(len(p.t.Shape))
	switch {
	case p.axis < 0:
	case len(idx) == 1:
		idx[0] = v
	default:
		idx[p.axis] = v
	}
	return p.t.At(idx...)
}

// resolveQuantParam checks a parameter p of a tensor of shape xs quantized along axis
// (normalized): one element (per tensor), a 1-D tensor of the axis's extent, or a tensor
// of xs's rank whose extents are 1 but along axis (a per-row zero point [.., M, 1]).
func resolveQuantParam(what string, p *te.Tensor, xs []loopir.Expr, axis int) (quantParam, error) {
	ext, err := Extents(p)
	if err != nil {
		return quantParam{}, err
	}
	if nnProd(ext) == 1 {
		return quantParam{t: p, axis: -1}, nil
	}
	if axis < 0 || axis >= len(xs) {
		return quantParam{}, Unsupported("%s of shape %v on a rank-%d tensor", what, ext, len(xs))
	}
	along := ext[len(ext)-1]
	if len(ext) != 1 {
		if len(ext) != len(xs) {
			return quantParam{}, Unsupported("%s of shape %v on a rank-%d tensor", what, ext, len(xs))
		}
		for d, e := range ext {
			if d != axis && e != 1 {
				return quantParam{}, Unsupported("%s of shape %v is not per axis %d", what, ext, axis)
			}
		}
		along = ext[axis]
	}
	if c, ok := xs[axis].(*loopir.IntImm); ok && c.V != along {
		return quantParam{}, Unsupported("%s has %d values for axis %d of extent %d", what, along, axis, c.V)
	}
	return quantParam{t: p, axis: axis}, nil
}

// quantParams resolves a scale and an optional zero point (nil) for a tensor of shape xs
// along axis: both per tensor or both per axis.
func quantParams(scale, zp *te.Tensor, xs []loopir.Expr, axis int) (s, z quantParam, err error) {
	if !scale.DT.IsFloat() || scale.DT == tensor.Float16 || scale.DT == tensor.BFloat16 {
		return s, z, Unsupported("scale of type %v", scale.DT)
	}
	if s, err = resolveQuantParam("scale", scale, xs, axis); err != nil {
		return s, z, err
	}
	if zp == nil {
		return s, quantParam{axis: -1}, nil
	}
	if z, err = resolveQuantParam("zero point", zp, xs, axis); err != nil {
		return s, z, err
	}
	if (s.axis < 0) != (z.axis < 0) {
		return s, z, Unsupported("scale %v and zero point %v differ in granularity", scale.Shape, zp.Shape)
	}
	return s, z, nil
}

// zeroAt reads an optional zero point as dt (0 when absent).
func zeroAt(z quantParam, i []loopir.Expr, dt tensor.DType) loopir.Expr {
	if z.t == nil {
		return lit(0, loopir.Float(0, dt))
	}
	return te.Cast(dt, z.at(i))
}

// quantizeValue is saturate(rint(v) + zero) converted to dt, v and zero in float64.
func quantizeValue(v, zero loopir.Expr, dt tensor.DType) loopir.Expr {
	lo, hi, _ := quantRange(dt)
	f := v.DType()
	q := te.Add(te.Round(v), zero)
	return te.Cast(dt, clamp(q, loopir.Float(lo, f), loopir.Float(hi, f)))
}

// quantAxis is the normalized axis attribute of a (de)quantizing node on a tensor of rank
// r; -1 when it is out of range (a scalar, say), where only per-tensor parameters fit.
func quantAxis(n *graph.Node, r int) int {
	a, err := NormAxis(attrs[graph.QuantAttrs](n).Axis, r)
	if err != nil {
		return -1
	}
	return a
}

func optional(in []Input, i int) *te.Tensor {
	if i < len(in) {
		return in[i].T
	}
	return nil
}

func computeQuantize(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	x, zp := in[0].T, optional(in, 2)
	if x.DT != tensor.Float32 && x.DT != tensor.Float64 {
		return nil, Unsupported("QuantizeLinear of %v", x.DT)
	}
	dt := tensor.Uint8
	if zp != nil {
		dt = zp.DT
	}
	if _, _, ok := quantRange(dt); !ok {
		return nil, Unsupported("QuantizeLinear to %v", dt)
	}
	s, z, err := quantParams(in[1].T, zp, x.Shape, quantAxis(n, len(x.Shape)))
	if err != nil {
		return nil, err
	}
	// the quotient in x's type; the rest in float64 where float32 cannot hold the
	// output range exactly (int32)
	f := x.DT
	if dt == tensor.Int32 {
		f = tensor.Float64
	}
	out := te.Compute("quantize", x.Shape, func(i []loopir.Expr) loopir.Expr {
		v := te.Cast(f, te.Div(x.At(i...), te.Cast(x.DT, s.at(i))))
		return quantizeValue(v, zeroAt(z, i, f), dt)
	})
	return []*te.Tensor{out}, nil
}

func computeDequantize(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	x, zp := in[0].T, optional(in, 2)
	if _, _, ok := quantRange(x.DT); !ok {
		return nil, Unsupported("DequantizeLinear of %v", x.DT)
	}
	if zp != nil && zp.DT != x.DT {
		return nil, Unsupported("DequantizeLinear of %v with a %v zero point", x.DT, zp.DT)
	}
	s, z, err := quantParams(in[1].T, zp, x.Shape, quantAxis(n, len(x.Shape)))
	if err != nil {
		return nil, err
	}
	// float32 is exact up to the final rounding for 8- and 16-bit inputs and a float32
	// scale
	f := tensor.Float32
	if x.DT == tensor.Int32 || in[1].T.DT == tensor.Float64 {
		f = tensor.Float64
	}
	out := te.Compute("dequantize", x.Shape, func(i []loopir.Expr) loopir.Expr {
		d := te.Cast(tensor.Int32, x.At(i...))
		if z.t != nil {
			d = te.Sub(d, te.Cast(tensor.Int32, z.at(i)))
		}
		if f == tensor.Float64 {
			d = te.Sub(te.Cast(f, x.At(i...)), zeroAt(z, i, f))
		}
		v := te.Mul(te.Cast(f, d), te.Cast(f, s.at(i)))
		return te.Cast(tensor.Float32, v)
	})
	return []*te.Tensor{out}, nil
}

// computeDynamicQuantize is DynamicQuantizeLinear: the range of x widened to include 0
// (two full reductions), its uint8 scale and zero point, then x quantized with them.
func computeDynamicQuantize(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	x := in[0].T
	if x.DT != tensor.Float32 {
		return nil, Unsupported("DynamicQuantizeLinear of %v", x.DT)
	}
	f := func(v float64) loopir.Expr { return loopir.Float(v, tensor.Float32) }
	whole := func(name string, red func(loopir.Expr, ...loopir.IterVar) loopir.Expr) *te.Tensor {
		axes := make([]loopir.IterVar, len(x.Shape))
		idx := make([]loopir.Expr, len(x.Shape))
		for d, e := range x.Shape {
			axes[d] = te.RAxis("r"+strconv.Itoa(d), e)
			idx[d] = axes[d].Var
		}
		return te.Compute(name, nil, func([]loopir.Expr) loopir.Expr {
			if len(axes) == 0 {
				return x.At()
			}
			return red(x.At(idx...), axes...)
		})
	}
	lo, hi := whole("dql_min", te.Min), whole("dql_max", te.Max)
	scale := te.Compute("dql_scale", nil, func([]loopir.Expr) loopir.Expr {
		return te.Div(te.Sub(te.MaxOf(hi.At(), f(0)), te.MinOf(lo.At(), f(0))), f(255))
	})
	nonzero := func() loopir.Expr { return loopir.Bin(loopir.NE, scale.At(), f(0)) }
	zp := te.Compute("dql_zero_point", nil, func([]loopir.Expr) loopir.Expr {
		v := te.Div(te.Sub(f(0), te.MinOf(lo.At(), f(0))), scale.At())
		return te.Select(nonzero(), quantizeValue(v, f(0), tensor.Uint8), &loopir.IntImm{V: 0, DT: tensor.Uint8})
	})
	y := te.Compute("dql_y", x.Shape, func(i []loopir.Expr) loopir.Expr {
		v := te.Div(x.At(i...), scale.At())
		q := quantizeValue(v, te.Cast(tensor.Float32, zp.At()), tensor.Uint8)
		return te.Select(nonzero(), q, &loopir.IntImm{V: 0, DT: tensor.Uint8})
	})
	return []*te.Tensor{y, scale, zp}, nil
}
