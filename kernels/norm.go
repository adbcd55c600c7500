package kernels

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// normComputes: the softmax family and the normalizations.
func normComputes() map[graph.Op]ComputeFunc {
	return map[graph.Op]ComputeFunc{
		graph.OpSoftmax:                   computeSoftmax,
		graph.OpLogSoftmax:                computeSoftmax,
		graph.OpHardmax:                   computeSoftmax,
		graph.OpLayerNormalization:        computeLayerNorm,
		graph.OpBatchNormalization:        computeBatchNorm,
		graph.OpInstanceNormalization:     computeInstanceNorm,
		graph.OpGroupNormalization:        computeGroupNorm,
		graph.OpLpNormalization:           computeLpNorm,
		graph.OpMeanVarianceNormalization: computeMVN,
	}
}

// axisReduction reduces x over one axis (the statistics drop it).
func axisReduction(x *te.Tensor, axis int) Reduction {
	red := make([]bool, len(x.Shape))
	red[axis] = true
	return Reduction{X: x, Axes: red}
}

// trailingReduction reduces x over the axes [from, rank), keeping them as extent 1.
func trailingReduction(x *te.Tensor, from int) Reduction {
	red := make([]bool, len(x.Shape))
	for k := from; k < len(red); k++ {
		red[k] = true
	}
	return Reduction{X: x, Axes: red, KeepDims: true}
}

func computeSoftmax(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	x := in[0].T
	if !plainFloat(x.DT) {
		return nil, Unsupported("%v on %v", n.Op, x.DT)
	}
	ax, err := NormAxis(attrs[graph.SoftmaxAttrs](n).Axis, len(x.Shape))
	if err != nil {
		return nil, err
	}
	out, err := SoftmaxAxis(x, ax, n.Op)
	return []*te.Tensor{out}, err
}

// SoftmaxAxis is Softmax, LogSoftmax or Hardmax (op) of x along one axis (ONNX opset
// 13): the max is subtracted before exponentiation; Hardmax marks the first maximum.
func SoftmaxAxis(x *te.Tensor, axis int, op graph.Op) (*te.Tensor, error) {
	r := axisReduction(x, axis)
	dt := x.DT
	if op == graph.OpHardmax {
		rv := te.RAxis("k", x.Shape[axis])
		best, _ := te.ArgMax("hardmax_arg", r.Shape(), rv, func(i []loopir.Expr) loopir.Expr {
			return x.At(r.SourceIndex(i, []loopir.IterVar{rv})...)
		})
		return te.Compute("hardmax", x.Shape, func(i []loopir.Expr) loopir.Expr {
			hit := loopir.Bin(loopir.EQ, best.At(r.ResultIndex(i)...), i[axis])
			return te.Select(hit, loopir.Float(1, dt), loopir.Float(0, dt))
		}), nil
	}
	mx := r.Compute("softmax_max", te.Max, func(xi, _ []loopir.Expr) loopir.Expr { return x.At(xi...) })
	sum := r.Compute("softmax_sum", te.Sum, func(xi, i []loopir.Expr) loopir.Expr {
		return te.Exp(te.Sub(x.At(xi...), mx.At(i...)))
	})
	switch op {
	case graph.OpSoftmax:
		return te.Compute("softmax", x.Shape, func(i []loopir.Expr) loopir.Expr {
			g := r.ResultIndex(i)
			return te.Div(te.Exp(te.Sub(x.At(i...), mx.At(g...))), sum.At(g...))
		}), nil
	case graph.OpLogSoftmax:
		return te.Compute("log_softmax", x.Shape, func(i []loopir.Expr) loopir.Expr {
			g := r.ResultIndex(i)
			return te.Sub(te.Sub(x.At(i...), mx.At(g...)), te.Log(sum.At(g...)))
		}), nil
	}
	return nil, Unsupported("%v is not of the softmax family", op)
}

// Moments are the per-group mean and 1/sqrt(variance + eps) of a reduction, computed in
// the input dtype with two passes (mean first, then the centered squares), as ONNX
// Runtime does.
type Moments struct {
	Mean, InvStd *te.Tensor
}

// NormMoments computes the moments of r's groups.
func NormMoments(r Reduction, eps float64) Moments {
	x := r.X
	dt := x.DT
	sum := r.Compute("norm_sum", te.Sum, func(xi, _ []loopir.Expr) loopir.Expr { return x.At(xi...) })
	mean := r.Apply("norm_mean", func(i []loopir.Expr) loopir.Expr { return te.Div(sum.At(i...), countOf(r, dt)) })
	sq := r.Compute("norm_sumsq", te.Sum, func(xi, i []loopir.Expr) loopir.Expr {
		d := te.Sub(x.At(xi...), mean.At(i...))
		return te.Mul(d, d)
	})
	inv := r.Apply("norm_invstd", func(i []loopir.Expr) loopir.Expr {
		v := te.Add(te.Div(sq.At(i...), countOf(r, dt)), loopir.Float(eps, dt))
		return te.Div(loopir.Float(1, dt), te.Sqrt(v))
	})
	return Moments{Mean: mean, InvStd: inv}
}

// Normalize is (x - mean) * invstd, read at x's index i.
func (m Moments) Normalize(r Reduction, i []loopir.Expr) loopir.Expr {
	g := r.ResultIndex(i)
	return te.Mul(te.Sub(r.X.At(i...), m.Mean.At(g...)), m.InvStd.At(g...))
}

// trailingAt reads t, broadcast against the trailing axes of an index of higher rank.
func trailingAt(t *te.Tensor, i []loopir.Expr) loopir.Expr {
	return BroadcastAt(t, i[len(i)-len(t.Shape):])
}

// fitsTrailing checks that t broadcasts against shape's trailing extents (numpy rules,
// t stretching only).
func fitsTrailing(t *te.Tensor, shape []loopir.Expr, what string) error {
	if len(t.Shape) > len(shape) {
		return Unsupported("%s of rank %d for %d normalized axes", what, len(t.Shape), len(shape))
	}
	off := len(shape) - len(t.Shape)
	for k, e := range t.Shape {
		if isOne(e) {
			continue
		}
		a, ok1 := e.(*loopir.IntImm)
		b, ok2 := shape[off+k].(*loopir.IntImm)
		if !ok1 || !ok2 || a.V != b.V {
			return Unsupported("%s extent %v against normalized extent %v", what, e, shape[off+k])
		}
	}
	return nil
}

func computeLayerNorm(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	a := attrs[graph.LayerNormAttrs](n)
	x := in[0].T
	if !plainFloat(x.DT) {
		return nil, Unsupported("%v on %v", n.Op, x.DT)
	}
	ax, err := NormAxis(a.Axis, len(x.Shape))
	if err != nil {
		return nil, err
	}
	scale := in[1].T
	var bias *te.Tensor
	if len(in) > 2 && in[2].Present() {
		bias = in[2].T
	}
	for _, p := range []*te.Tensor{scale, bias} {
		if p == nil {
			continue
		}
		if p.DT != x.DT {
			return nil, Unsupported("%v with %v parameters on %v", n.Op, p.DT, x.DT)
		}
		if err := fitsTrailing(p, x.Shape[ax:], "LayerNormalization parameter"); err != nil {
			return nil, err
		}
	}
	r := trailingReduction(x, ax)
	m := NormMoments(r, float64(a.Epsilon))
	y := te.Compute("layernorm", x.Shape, func(i []loopir.Expr) loopir.Expr {
		v := te.Mul(m.Normalize(r, i), trailingAt(scale, i))
		if bias != nil {
			v = te.Add(v, trailingAt(bias, i))
		}
		return v
	})
	// the statistics outputs have the stash type (1: float32)
	stash := tensor.DType(a.StashType)
	if !plainFloat(stash) {
		return nil, Unsupported("%v with stash_type %d", n.Op, a.StashType)
	}
	stat := func(name string, t *te.Tensor) *te.Tensor {
		return r.Apply(name, func(i []loopir.Expr) loopir.Expr {
			v := t.At(i...)
			if stash != x.DT {
				v = te.Cast(stash, v)
			}
			return v
		})
	}
	outs := []*te.Tensor{y}
	if len(n.Outputs) > 1 {
		outs = append(outs, stat("layernorm_mean", m.Mean))
	}
	if len(n.Outputs) > 2 {
		outs = append(outs, stat("layernorm_invstd", m.InvStd))
	}
	return outs, nil
}

// channelParams checks that each parameter is a vector of one value per channel.
func channelParams(n *graph.Node, x *te.Tensor, ps []Input) error {
	for k, p := range ps {
		if !p.Present() {
			return Unsupported("%v without input %d", n.Op, k+1)
		}
		if p.T.DT != x.DT {
			return Unsupported("%v with %v parameters on %v", n.Op, p.T.DT, x.DT)
		}
		if len(p.T.Shape) != 1 {
			return Unsupported("%v parameter %d of rank %d", n.Op, k+1, len(p.T.Shape))
		}
		a, ok1 := p.T.Shape[0].(*loopir.IntImm)
		c, ok2 := x.Shape[1].(*loopir.IntImm)
		if !ok1 || !ok2 || a.V != c.V {
			return Unsupported("%v parameter %d of extent %v for %v channels", n.Op, k+1, p.T.Shape[0], x.Shape[1])
		}
	}
	return nil
}

// computeBatchNorm is batch normalization:
// y = (x - mean[c]) * (scale[c] / sqrt(var[c] + eps)) + B[c], with the mean and var
// inputs at inference, and in training mode with the batch's own statistics (over every
// axis but the channels; the variance divides by the count), then the running
// statistics as the optional outputs: input·momentum + batch·(1 - momentum).
func computeBatchNorm(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	a := attrs[graph.BatchNormAttrs](n)
	x := in[0].T
	if a.TrainingMode == 0 && len(n.Outputs) > 1 {
		return nil, Unsupported("BatchNormalization with %d outputs at inference", len(n.Outputs))
	}
	if !plainFloat(x.DT) || len(x.Shape) < 2 {
		return nil, Unsupported("%v on %v of rank %d", n.Op, x.DT, len(x.Shape))
	}
	if len(in) < 5 {
		return nil, Unsupported("%v with %d inputs", n.Op, len(in))
	}
	if err := channelParams(n, x, in[1:5]); err != nil {
		return nil, err
	}
	scale, b, mean, vr := in[1].T, in[2].T, in[3].T, in[4].T
	eps := loopir.Float(float64(a.Epsilon), x.DT)
	var outs []*te.Tensor
	if a.TrainingMode != 0 {
		red := make([]bool, len(x.Shape))
		for k := range red {
			red[k] = k != 1
		}
		r := Reduction{X: x, Axes: red}
		sum := r.Compute("bn_sum", te.Sum, func(xi, _ []loopir.Expr) loopir.Expr { return x.At(xi...) })
		bmean := r.Apply("bn_mean", func(i []loopir.Expr) loopir.Expr { return te.Div(sum.At(i...), countOf(r, x.DT)) })
		sq := r.Compute("bn_sumsq", te.Sum, func(xi, i []loopir.Expr) loopir.Expr {
			d := te.Sub(x.At(xi...), bmean.At(i...))
			return te.Mul(d, d)
		})
		bvar := r.Apply("bn_var", func(i []loopir.Expr) loopir.Expr { return te.Div(sq.At(i...), countOf(r, x.DT)) })
		mom := loopir.Float(float64(a.Momentum), x.DT)
		running := func(name string, in, batch *te.Tensor) *te.Tensor {
			return r.Apply(name, func(i []loopir.Expr) loopir.Expr {
				return te.Add(te.Mul(in.At(i...), mom), te.Mul(batch.At(i...), te.Sub(loopir.Float(1, x.DT), mom)))
			})
		}
		outs = []*te.Tensor{nil, running("bn_running_mean", mean, bmean), running("bn_running_var", vr, bvar)}
		mean, vr = bmean, bvar
	}
	y := te.Compute("batchnorm", x.Shape, func(i []loopir.Expr) loopir.Expr {
		c := i[1]
		k := te.Div(scale.At(c), te.Sqrt(te.Add(vr.At(c), eps)))
		return te.Add(te.Mul(te.Sub(x.At(i...), mean.At(c)), k), b.At(c))
	})
	if outs == nil {
		return []*te.Tensor{y}, nil
	}
	outs[0] = y
	return outs[:len(n.Outputs)], nil
}

// computeInstanceNorm normalizes each (n, c) over the spatial axes, then applies the
// per-channel scale and bias.
func computeInstanceNorm(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	x := in[0].T
	if !plainFloat(x.DT) || len(x.Shape) < 3 {
		return nil, Unsupported("%v on %v of rank %d", n.Op, x.DT, len(x.Shape))
	}
	if len(in) < 3 {
		return nil, Unsupported("%v with %d inputs", n.Op, len(in))
	}
	if err := channelParams(n, x, in[1:3]); err != nil {
		return nil, err
	}
	scale, b := in[1].T, in[2].T
	r := trailingReduction(x, 2)
	m := NormMoments(r, float64(attrs[graph.EpsilonAttrs](n).Epsilon))
	return []*te.Tensor{te.Compute("instancenorm", x.Shape, func(i []loopir.Expr) loopir.Expr {
		return te.Add(te.Mul(m.Normalize(r, i), scale.At(i[1])), b.At(i[1]))
	})}, nil
}

// computeLpNorm divides by the L1 or L2 norm along one axis; a zero norm gives zeros.
func computeLpNorm(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	a := attrs[graph.LpNormAttrs](n)
	x := in[0].T
	if !plainFloat(x.DT) {
		return nil, Unsupported("%v on %v", n.Op, x.DT)
	}
	if a.P != 1 && a.P != 2 {
		return nil, Unsupported("%v with p=%d", n.Op, a.P)
	}
	ax, err := NormAxis(a.Axis, len(x.Shape))
	if err != nil {
		return nil, err
	}
	r := axisReduction(x, ax)
	norm, err := lpNorm(r, a.P)
	if err != nil {
		return nil, err
	}
	zero := loopir.Float(0, x.DT)
	return []*te.Tensor{te.Compute("lpnorm", x.Shape, func(i []loopir.Expr) loopir.Expr {
		d := norm.At(r.ResultIndex(i)...)
		return te.Select(loopir.Bin(loopir.NE, d, zero), te.Div(x.At(i...), d), zero)
	})}, nil
}
