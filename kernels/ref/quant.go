package ref

// Loss ops, quantization ops and Einsum.

import (
	"math"
	"strings"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

func quantKernels() map[graph.Op]Kernel {
	return map[graph.Op]Kernel{
		graph.OpNegativeLogLikelihoodLoss: T(quantNLL),
		graph.OpSoftmaxCrossEntropyLoss:   T(quantSCE),
		graph.OpQuantizeLinear:            T(quantQuantize),
		graph.OpDequantizeLinear:          T(quantDequantize),
		graph.OpDynamicQuantizeLinear:     T(quantDynamic),
		graph.OpQLinearMatMul:             T(quantQLinearMatMul),
		graph.OpQLinearConv:               T(quantQLinearConv),
		graph.OpEinsum:                    T(quantEinsum),
	}
}

// nll computes the NLL loss of log-probabilities lp [N,C,d...] against targets [N,d...].
func nll(a *graph.LossAttrs, lp []float64, shape tensor.Shape, target []int64, weight []float64) ([]float64, tensor.Shape, error) {
	if len(shape) < 2 {
		return nil, nil, Badf("input rank %d, want >= 2", len(shape))
	}
	n, c := shape[0], shape[1]
	inner := shape[2:].NumElements()
	if len(target) != n*inner {
		return nil, nil, Badf("target has %d elements, want %d", len(target), n*inner)
	}
	loss := make([]float64, n*inner)
	wsum := 0.0
	for b := 0; b < n; b++ {
		for i := 0; i < inner; i++ {
			t := target[b*inner+i]
			if a.IgnoreIndex != graph.AbsentInt && t == a.IgnoreIndex {
				continue
			}
			if t < 0 || t >= int64(c) {
				return nil, nil, Badf("target %d out of range for %d classes", t, c)
			}
			w := 1.0
			if weight != nil {
				w = weight[t]
			}
			loss[b*inner+i] = -lp[(b*c+int(t))*inner+i] * w
			wsum += w
		}
	}
	switch a.Reduction {
	case "none":
		return loss, append(tensor.Shape{n}, shape[2:]...), nil
	case "sum", "mean":
		s := 0.0
		for _, v := range loss {
			s += v
		}
		if a.Reduction == "mean" {
			if wsum == 0 {
				s = math.NaN()
				if len(loss) > 0 {
					s = 0
				}
			} else {
				s /= wsum
			}
		}
		return []float64{s}, tensor.Shape{}, nil
	}
	return nil, nil, Badf("unknown reduction %q", a.Reduction)
}

func quantNLL(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	var w []float64
	if len(in) > 2 && in[2] != nil {
		w = in[2].Float64s()
	}
	loss, shape, err := nll(attrs[graph.LossAttrs](n), in[0].Float64s(), in[0].Shape, in[1].Int64s(), w)
	if err != nil {
		return nil, err
	}
	return one(tensor.FromFloat64s(in[0].DType, shape, loss)), nil
}

func quantSCE(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := in[0]
	if len(x.Shape) < 2 {
		return nil, Badf("scores rank %d, want >= 2", len(x.Shape))
	}
	v := x.Float64s()
	lp := make([]float64, len(v))
	lines(x.Shape, 1, func(idx []int) {
		mx := math.Inf(-1)
		for _, i := range idx {
			mx = math.Max(mx, v[i])
		}
		s := 0.0
		for _, i := range idx {
			s += math.Exp(v[i] - mx)
		}
		for _, i := range idx {
			lp[i] = v[i] - mx - math.Log(s)
		}
	})
	var w []float64
	if len(in) > 2 && in[2] != nil {
		w = in[2].Float64s()
	}
	loss, shape, err := nll(attrs[graph.LossAttrs](n), lp, x.Shape, in[1].Int64s(), w)
	if err != nil {
		return nil, err
	}
	outs := []*tensor.Tensor{tensor.FromFloat64s(x.DType, shape, loss), tensor.FromFloat64s(x.DType, x.Shape, lp)}
	return outs[:len(n.Outputs)], nil
}

// quantParams returns per-element scale and zero point (scalar or per-axis).
func quantParams(x *tensor.Tensor, scale, zp *tensor.Tensor, axis int64) (func(i int) (float64, float64), error) {
	sv := scale.Float64s()
	var zv []float64
	if zp != nil {
		zv = zp.Float64s()
		if len(zv) != len(sv) {
			return nil, Badf("scale has %d values, zero point %d", len(sv), len(zv))
		}
	}
	zero := func(k int) float64 {
		if zv == nil {
			return 0
		}
		return zv[k]
	}
	if len(sv) == 1 {
		return func(int) (float64, float64) { return sv[0], zero(0) }, nil
	}
	ax, err := tensor.NormAxis(axis, len(x.Shape))
	if err != nil {
		return nil, Badf("%v", err)
	}
	if x.Shape[ax] != len(sv) {
		return nil, Badf("%d scales for axis %d of extent %d", len(sv), ax, x.Shape[ax])
	}
	inner := x.Shape[ax+1:].NumElements()
	return func(i int) (float64, float64) {
		k := (i / inner) % len(sv)
		return sv[k], zero(k)
	}, nil
}

func saturate(v float64, dt tensor.DType) float64 {
	lo, hi := 0.0, 255.0
	switch dt {
	case tensor.Int8:
		lo, hi = -128, 127
	case tensor.Uint16:
		hi = 65535
	case tensor.Int16:
		lo, hi = -32768, 32767
	case tensor.Int32:
		lo, hi = math.MinInt32, math.MaxInt32
	}
	return math.Max(lo, math.Min(hi, v))
}

// quantizeValues quantizes v; the division x / scale is in float32 when single is set
// (QuantizeLinear of a float32 tensor, as ONNX specifies: dividing in float64 rounds
// some quotients to the other side of a half).
func quantizeValues(v []float64, at func(int) (float64, float64), dt tensor.DType, single bool) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		s, z := at(i)
		q := x / s
		if single {
			q = float64(float32(x) / float32(s))
		}
		out[i] = saturate(math.RoundToEven(q)+z, dt)
	}
	return out
}

func quantQuantize(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := in[0]
	var zp *tensor.Tensor
	dt := tensor.Uint8
	if len(in) > 2 && in[2] != nil {
		zp, dt = in[2], in[2].DType
	}
	at, err := quantParams(x, in[1], zp, attrs[graph.QuantAttrs](n).Axis)
	if err != nil {
		return nil, err
	}
	return one(tensor.FromFloat64s(dt, x.Shape, quantizeValues(x.Float64s(), at, dt, x.DType == tensor.Float32))), nil
}

func quantDequantize(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := in[0]
	var zp *tensor.Tensor
	if len(in) > 2 {
		zp = in[2]
	}
	at, err := quantParams(x, in[1], zp, attrs[graph.QuantAttrs](n).Axis)
	if err != nil {
		return nil, err
	}
	v := x.Float64s()
	for i := range v {
		s, z := at(i)
		v[i] = (v[i] - z) * s
	}
	return one(tensor.FromFloat64s(tensor.Float32, x.Shape, v)), nil
}

func quantDynamic(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := in[0]
	v := x.Float64s()
	lo, hi := 0.0, 0.0
	for _, e := range v {
		lo, hi = math.Min(lo, e), math.Max(hi, e)
	}
	// the spec's arithmetic is float32: dividing in float64 rounds some values differently
	scale := float32(hi-lo) / 255
	zp := 0.0
	if scale != 0 {
		zp = saturate(math.RoundToEven(float64(float32(-lo)/scale)), tensor.Uint8)
	}
	out := make([]float64, len(v))
	for i, e := range v {
		if scale != 0 {
			out[i] = saturate(math.RoundToEven(float64(float32(e)/scale))+zp, tensor.Uint8)
		}
	}
	return []*tensor.Tensor{
		tensor.FromFloat64s(tensor.Uint8, x.Shape, out),
		tensor.FromFloat64s(tensor.Float32, tensor.Shape{}, []float64{float64(scale)}),
		tensor.FromFloat64s(tensor.Uint8, tensor.Shape{}, []float64{zp}),
	}, nil
}

// dequant returns (x - zp) * scale with per-axis parameters.
func dequant(x, scale, zp *tensor.Tensor, axis int64) ([]float64, error) {
	at, err := quantParams(x, scale, zp, axis)
	if err != nil {
		return nil, err
	}
	v := x.Float64s()
	for i := range v {
		s, z := at(i)
		v[i] = (v[i] - z) * s
	}
	return v, nil
}

func quantQLinearMatMul(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	a, err := dequant(in[0], in[1], in[2], -2)
	if err != nil {
		return nil, err
	}
	b, err := dequant(in[3], in[4], in[5], -1)
	if err != nil {
		return nil, err
	}
	y, shape, err := matmulTyped(in[0].Shape, in[3].Shape, a, b)
	if err != nil {
		return nil, err
	}
	at, err := quantParams(tensor.New(tensor.Float32, shape), in[6], in[7], 1)
	if err != nil {
		return nil, err
	}
	return one(tensor.FromFloat64s(in[7].DType, shape, quantizeValues(y, at, in[7].DType, false))), nil
}

func quantQLinearConv(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, err := dequant(in[0], in[1], in[2], 1)
	if err != nil {
		return nil, err
	}
	w, err := dequant(in[3], in[4], in[5], 0)
	if err != nil {
		return nil, err
	}
	var bias []float64
	if len(in) > 8 && in[8] != nil {
		// the int32 bias is in units of x_scale * w_scale
		bv := in[8].Float64s()
		xs, ws := in[1].Float64s(), in[4].Float64s()
		bias = make([]float64, len(bv))
		for i := range bv {
			bias[i] = bv[i] * xs[0] * ws[min(i, len(ws)-1)]
		}
	}
	out, err := convTyped[float64](in[0].Shape, in[3].Shape, x, w, bias, attrs[graph.ConvAttrs](n))
	if err != nil {
		return nil, err
	}
	at, err := quantParams(tensor.New(tensor.Float32, out.shape), in[6], in[7], 1)
	if err != nil {
		return nil, err
	}
	return one(tensor.FromFloat64s(in[7].DType, out.shape, quantizeValues(out.data, at, in[7].DType, false))), nil
}

// quantEinsum evaluates the equation by visiting every assignment of the labels.
func quantEinsum(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	terms, outTerm, err := graph.EinsumTerms(attrs[graph.EinsumAttrs](n).Equation, len(in))
	if err != nil {
		return nil, Badf("%v", err)
	}
	// expand "..." into distinct upper-case-free placeholder labels
	maxEll := 0
	for i, t := range terms {
		if strings.Contains(t, "...") {
			maxEll = max(maxEll, len(in[i].Shape)-(len(t)-3))
		}
	}
	ellLabels := []rune("0123456789")[:maxEll]
	expand := func(t string, rank int) string {
		if !strings.Contains(t, "...") {
			return t
		}
		k := rank - (len(t) - 3)
		return strings.Replace(t, "...", string(ellLabels[maxEll-k:]), 1)
	}
	size := map[rune]int{}
	for i, t := range terms {
		terms[i] = expand(t, len(in[i].Shape))
		if len([]rune(terms[i])) != len(in[i].Shape) {
			return nil, Badf("term %q does not fit input %d of shape %v", t, i, in[i].Shape)
		}
		for k, r := range terms[i] {
			if s, ok := size[r]; ok && s != in[i].Shape[k] && s != 1 && in[i].Shape[k] != 1 {
				return nil, Badf("label %q has extents %d and %d", r, s, in[i].Shape[k])
			}
			size[r] = max(size[r], in[i].Shape[k])
		}
	}
	outTerm = strings.Replace(outTerm, "...", string(ellLabels), 1)
	var labels []rune
	for r := range size {
		labels = append(labels, r)
	}
	outShape := tensor.Shape{}
	for _, r := range outTerm {
		outShape = append(outShape, size[r])
	}
	all := make(tensor.Shape, len(labels))
	for i, r := range labels {
		all[i] = size[r]
	}
	pos := map[rune]int{}
	for i, r := range labels {
		pos[r] = i
	}
	vals := make([][]float64, len(in))
	strides := make([][]int, len(in))
	for i, t := range in {
		vals[i] = t.Float64s()
		strides[i] = t.Shape.Strides()
	}
	outStr := outShape.Strides()
	res := make([]float64, outShape.NumElements())
	forEachIndex(all, func(_ int, ix []int) {
		p := 1.0
		for i, t := range terms {
			off := 0
			for k, r := range t {
				v := ix[pos[r]]
				if in[i].Shape[k] == 1 {
					v = 0
				}
				off += v * strides[i][k]
			}
			p *= vals[i][off]
		}
		off := 0
		for k, r := range outTerm {
			off += ix[pos[r]] * outStr[k]
		}
		res[off] += p
	})
	return one(tensor.FromFloat64s(in[0].DType, outShape, res)), nil
}
