package kernels

import (
	"math"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// computeEyeLike is a matrix of x's shape with ones on the diagonal k (column = row + k)
// and zeros elsewhere, in the dtype attribute's type (x's when it is 0); x's values are
// never read.
func computeEyeLike(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	x := in[0].T
	a := attrs[graph.EyeLikeAttrs](n)
	dt := x.DT
	if a.DType != 0 {
		dt = tensor.DType(a.DType)
	}
	if len(x.Shape) != 2 {
		return nil, Unsupported("EyeLike of rank %d", len(x.Shape))
	}
	if dt != tensor.Bool && (!dt.IsNumeric() || halfFloat(dt)) {
		return nil, Unsupported("EyeLike to %v", dt)
	}
	one, zero := &loopir.IntImm{V: 1, DT: dt}, &loopir.IntImm{V: 0, DT: dt}
	out := te.Compute("eye_like", x.Shape, func(i []loopir.Expr) loopir.Expr {
		on := loopir.Bin(loopir.EQ, sub(i[1], i[0]), i64(a.K))
		if dt.IsFloat() {
			return te.Select(on, loopir.Float(1, dt), loopir.Float(0, dt))
		}
		return te.Select(on, one, zero)
	})
	return []*te.Tensor{out}, nil
}

// computeWindow is a Hann, Hamming or Blackman window over the output type's extent,
// which is the size input N (constant, known over the symbols, or bound at run time):
// with x = 2πi/D (D = N periodic, N-1 symmetric), Hann
// 0.5 - 0.5 cos x, Hamming 25/46 - 21/46 cos x, Blackman 0.42 - 0.5 cos x + 0.08 cos 2x,
// in float64 and then converted to output_datatype as the reference does.
func computeWindow(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	dt := tensor.DType(attrs[graph.WindowAttrs](n).OutputDatatype)
	if !dt.IsNumeric() || halfFloat(dt) {
		return nil, Unsupported("%v to %v", n.Op, dt)
	}
	if sz := in[0].T; !sz.DT.IsInt() || len(sz.Shape) > 1 || (len(sz.Shape) == 1 && !isOne(sz.Shape[0])) {
		return nil, Unsupported("%v with a size of type %v%v", n.Op, sz.DT, sz.Shape)
	}
	shape, err := genShape(n, in, dt)
	if err != nil {
		return nil, err
	}
	if len(shape) != 1 {
		return nil, Unsupported("%v with output rank %d", n.Op, len(shape))
	}
	f64 := func(v float64) loopir.Expr { return loopir.Float(v, tensor.Float64) }
	den := te.Cast(tensor.Float64, shape[0]) // the size N is the output's extent
	if attrs[graph.WindowAttrs](n).Periodic == 0 {
		den = te.Sub(den, f64(1))
	}
	out := te.Compute("window", shape, func(i []loopir.Expr) loopir.Expr {
		x := te.Div(te.Mul(f64(2*math.Pi), te.Cast(tensor.Float64, i[0])), den)
		cos := func(v loopir.Expr) loopir.Expr { return &loopir.Call{Fn: loopir.Cos, Args: []loopir.Expr{v}} }
		var v loopir.Expr
		switch n.Op {
		case graph.OpHannWindow:
			v = te.Sub(f64(0.5), te.Mul(f64(0.5), cos(x)))
		case graph.OpHammingWindow:
			v = te.Sub(f64(25.0/46), te.Mul(f64(1-25.0/46), cos(x)))
		default:
			v = te.Add(te.Sub(f64(0.42), te.Mul(f64(0.5), cos(x))), te.Mul(f64(0.08), cos(te.Mul(f64(2), x))))
		}
		switch {
		case dt == tensor.Float64:
			return v
		case dt.IsFloat():
			return te.Cast(dt, v)
		}
		return floatToInt(v, dt)
	})
	return []*te.Tensor{out}, nil
}
