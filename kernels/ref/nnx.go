package ref

// Softmax family, normalizations and dropout, computed in float64.

import (
	"fmt"
	"math"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

func nnxKernels() map[graph.Op]Kernel {
	return map[graph.Op]Kernel{
		graph.OpSoftmax:                   T(nnxSoftmax),
		graph.OpLogSoftmax:                T(nnxSoftmax),
		graph.OpHardmax:                   T(nnxSoftmax),
		graph.OpLayerNormalization:        T(nnxLayerNorm),
		graph.OpBatchNormalization:        T(nnxBatchNorm),
		graph.OpInstanceNormalization:     T(nnxInstanceNorm),
		graph.OpGroupNormalization:        T(nnxGroupNorm),
		graph.OpLRN:                       T(nnxLRN),
		graph.OpMeanVarianceNormalization: T(nnxMVN),
		graph.OpLpNormalization:           T(nnxLpNorm),
		graph.OpDropout:                   T(nnxDropout),
	}
}

// lines calls f for each 1-D line along axis, giving the element offsets of the line.
func lines(shape tensor.Shape, axis int, f func(idx []int)) {
	outer, d, inner := shape[:axis].NumElements(), shape[axis], shape[axis+1:].NumElements()
	idx := make([]int, d)
	for o := 0; o < outer; o++ {
		for i := 0; i < inner; i++ {
			for k := range idx {
				idx[k] = (o*d+k)*inner + i
			}
			f(idx)
		}
	}
}

func nnxSoftmax(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := in[0]
	ax, err := tensor.NormAxis(attrs[graph.SoftmaxAttrs](n).Axis, len(x.Shape))
	if err != nil {
		return nil, Badf("%v", err)
	}
	v := x.Float64s()
	out := make([]float64, len(v))
	lines(x.Shape, ax, func(idx []int) {
		mx, at := math.Inf(-1), -1
		for _, i := range idx {
			if v[i] > mx || at < 0 {
				mx, at = v[i], i
			}
		}
		switch n.Op {
		case graph.OpHardmax:
			for _, i := range idx {
				out[i] = 0
			}
			if at >= 0 {
				out[at] = 1
			}
			return
		}
		sum := 0.0
		for _, i := range idx {
			sum += math.Exp(v[i] - mx)
		}
		for _, i := range idx {
			if n.Op == graph.OpLogSoftmax {
				out[i] = v[i] - mx - math.Log(sum)
			} else {
				out[i] = math.Exp(v[i]-mx) / sum
			}
		}
	})
	return one(tensor.FromFloat64s(x.DType, x.Shape, out)), nil
}

func nnxLayerNorm(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	a := attrs[graph.LayerNormAttrs](n)
	x := in[0]
	ax, err := tensor.NormAxis(a.Axis, len(x.Shape))
	if err != nil {
		return nil, Badf("%v", err)
	}
	norm := x.Shape[ax:]
	size := norm.NumElements()
	rows := x.Shape[:ax].NumElements()
	scaleIdx := broadcastIndex(norm, in[1].Shape)
	sc := in[1].Float64s()
	var bias []float64
	var biasIdx []int
	if len(in) > 2 && in[2] != nil {
		bias, biasIdx = in[2].Float64s(), broadcastIndex(norm, in[2].Shape)
	}
	v := x.Float64s()
	out := make([]float64, len(v))
	means := make([]float64, rows)
	inv := make([]float64, rows)
	for r := 0; r < rows; r++ {
		row := v[r*size : (r+1)*size]
		mean, vr := 0.0, 0.0
		for _, e := range row {
			mean += e
		}
		mean /= float64(size)
		for _, e := range row {
			vr += (e - mean) * (e - mean)
		}
		vr /= float64(size)
		is := 1 / math.Sqrt(vr+float64(a.Epsilon))
		means[r], inv[r] = mean, is
		for j, e := range row {
			y := (e - mean) * is * sc[scaleIdx[j]]
			if bias != nil {
				y += bias[biasIdx[j]]
			}
			out[r*size+j] = y
		}
	}
	stat := append(tensor.Shape{}, x.Shape[:ax]...)
	for range norm {
		stat = append(stat, 1)
	}
	return []*tensor.Tensor{
		tensor.FromFloat64s(x.DType, x.Shape, out),
		tensor.FromFloat64s(tensor.Float32, stat, means),
		tensor.FromFloat64s(tensor.Float32, stat, inv),
	}, nil
}

// perChannel checks that a parameter has one value per channel.
func perChannel(t *tensor.Tensor, c int, what string) ([]float64, error) {
	if t.Len() != c {
		return nil, Badf("%s has %d elements for %d channels", what, t.Len(), c)
	}
	return t.Float64s(), nil
}

func nnxBatchNorm(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	a := attrs[graph.BatchNormAttrs](n)
	x := in[0]
	if len(x.Shape) < 2 {
		return nil, Badf("input rank %d, want >= 2", len(x.Shape))
	}
	c := x.Shape[1]
	var p [4][]float64
	for i, name := range []string{"scale", "B", "mean", "var"} {
		v, err := perChannel(in[1+i], c, name)
		if err != nil {
			return nil, err
		}
		p[i] = v
	}
	scale, bias, mean, vr := p[0], p[1], p[2], p[3]
	v := x.Float64s()
	inner := x.Shape[2:].NumElements()
	outer := x.Shape[0]
	if a.TrainingMode != 0 {
		bm, bv := make([]float64, c), make([]float64, c)
		cnt := float64(outer * inner)
		for i, e := range v {
			bm[(i/inner)%c] += e
		}
		for k := range bm {
			bm[k] /= cnt
		}
		for i, e := range v {
			d := e - bm[(i/inner)%c]
			bv[(i/inner)%c] += d * d
		}
		for k := range bv {
			bv[k] /= cnt
		}
		mom := float64(a.Momentum)
		runMean, runVar := make([]float64, c), make([]float64, c)
		for k := range runMean {
			runMean[k] = mean[k]*mom + bm[k]*(1-mom)
			runVar[k] = vr[k]*mom + bv[k]*(1-mom)
		}
		mean, vr = bm, bv
		out := normalize(v, inner, c, mean, vr, scale, bias, float64(a.Epsilon))
		return []*tensor.Tensor{
			tensor.FromFloat64s(x.DType, x.Shape, out),
			tensor.FromFloat64s(in[3].DType, in[3].Shape, runMean),
			tensor.FromFloat64s(in[4].DType, in[4].Shape, runVar),
		}, nil
	}
	out := normalize(v, inner, c, mean, vr, scale, bias, float64(a.Epsilon))
	return []*tensor.Tensor{tensor.FromFloat64s(x.DType, x.Shape, out), in[3], in[4]}, nil
}

func normalize(v []float64, inner, c int, mean, vr, scale, bias []float64, eps float64) []float64 {
	out := make([]float64, len(v))
	for i, e := range v {
		k := (i / inner) % c
		out[i] = (e-mean[k])/math.Sqrt(vr[k]+eps)*scale[k] + bias[k]
	}
	return out
}

func nnxInstanceNorm(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := in[0]
	if len(x.Shape) < 3 {
		return nil, Badf("input rank %d, want >= 3", len(x.Shape))
	}
	c := x.Shape[1]
	scale, err := perChannel(in[1], c, "scale")
	if err != nil {
		return nil, err
	}
	bias, err := perChannel(in[2], c, "B")
	if err != nil {
		return nil, err
	}
	eps := float64(attrs[graph.EpsilonAttrs](n).Epsilon)
	inner := x.Shape[2:].NumElements()
	v := x.Float64s()
	out := make([]float64, len(v))
	for ch := 0; ch < x.Shape[0]*c; ch++ {
		row := v[ch*inner : (ch+1)*inner]
		mean, vr := meanVar(row)
		k := ch % c
		for j, e := range row {
			out[ch*inner+j] = (e-mean)/math.Sqrt(vr+eps)*scale[k] + bias[k]
		}
	}
	return one(tensor.FromFloat64s(x.DType, x.Shape, out)), nil
}

// nnxGroupNorm normalizes each instance's groups of C/num_groups consecutive channels
// (with their spatial extent) by their own mean and variance, then applies the
// per-channel scale and bias (GroupNormalization-21, the IR form).
func nnxGroupNorm(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	a := attrs[graph.GroupNormAttrs](n)
	x := in[0]
	if len(x.Shape) < 2 {
		return nil, Badf("input rank %d, want >= 2", len(x.Shape))
	}
	c, g := x.Shape[1], int(a.NumGroups)
	if g < 1 || c%g != 0 {
		return nil, Badf("%d channels are not divisible by num_groups=%d", c, a.NumGroups)
	}
	scale, err := perChannel(in[1], c, "scale")
	if err != nil {
		return nil, err
	}
	bias, err := perChannel(in[2], c, "bias")
	if err != nil {
		return nil, err
	}
	eps := float64(a.Epsilon)
	inner := x.Shape[2:].NumElements()
	size := c / g * inner // elements of one group of one instance
	v := x.Float64s()
	out := make([]float64, len(v))
	for start := 0; start < len(v); start += size {
		mean, vr := meanVar(v[start : start+size])
		for j := start; j < start+size; j++ {
			ch := (j / inner) % c
			out[j] = (v[j]-mean)/math.Sqrt(vr+eps)*scale[ch] + bias[ch]
		}
	}
	return one(tensor.FromFloat64s(x.DType, x.Shape, out)), nil
}

func meanVar(v []float64) (float64, float64) {
	m := 0.0
	for _, e := range v {
		m += e
	}
	m /= float64(max(len(v), 1))
	s := 0.0
	for _, e := range v {
		s += (e - m) * (e - m)
	}
	return m, s / float64(max(len(v), 1))
}

func nnxLRN(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	a := attrs[graph.LRNAttrs](n)
	x := in[0]
	if len(x.Shape) < 2 || a.Size <= 0 {
		return nil, Badf("LRN needs rank >= 2 and size > 0")
	}
	c, inner := x.Shape[1], x.Shape[2:].NumElements()
	v := x.Float64s()
	out := make([]float64, len(v))
	lo := int((a.Size - 1) / 2)
	hi := int(a.Size) - 1 - lo
	for i := range v {
		ch := (i / inner) % c
		base := i - ch*inner
		sq := 0.0
		for k := max(0, ch-lo); k <= min(c-1, ch+hi); k++ {
			e := v[base+k*inner]
			sq += e * e
		}
		out[i] = v[i] / math.Pow(float64(a.Bias)+float64(a.Alpha)/float64(a.Size)*sq, float64(a.Beta))
	}
	return one(tensor.FromFloat64s(x.DType, x.Shape, out)), nil
}

func nnxMVN(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := in[0]
	axes := attrs[graph.MVNAttrs](n).Axes
	if axes == nil {
		axes = []int64{0, 2, 3}
	}
	red, err := graph.ReduceAxes(len(x.Shape), axes, true, false)
	if err != nil {
		return nil, Badf("%v", err)
	}
	_, pos := reduceGroups(x.Shape, red, true)
	v := x.Float64s()
	groups := 0
	for _, p := range pos {
		groups = max(groups, p+1)
	}
	sum, sq, cnt := make([]float64, groups), make([]float64, groups), make([]float64, groups)
	for i, p := range pos {
		sum[p] += v[i]
		cnt[p]++
	}
	for i, p := range pos {
		d := v[i] - sum[p]/cnt[p]
		sq[p] += d * d
	}
	out := make([]float64, len(v))
	for i, p := range pos {
		out[i] = (v[i] - sum[p]/cnt[p]) / (math.Sqrt(sq[p]/cnt[p]) + 1e-9)
	}
	return one(tensor.FromFloat64s(x.DType, x.Shape, out)), nil
}

func nnxLpNorm(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	a := attrs[graph.LpNormAttrs](n)
	x := in[0]
	ax, err := tensor.NormAxis(a.Axis, len(x.Shape))
	if err != nil {
		return nil, Badf("%v", err)
	}
	if a.P != 1 && a.P != 2 {
		return nil, Badf("p=%d, want 1 or 2", a.P)
	}
	v := x.Float64s()
	out := make([]float64, len(v))
	lines(x.Shape, ax, func(idx []int) {
		norm := 0.0
		for _, i := range idx {
			if a.P == 1 {
				norm += math.Abs(v[i])
			} else {
				norm += v[i] * v[i]
			}
		}
		if a.P == 2 {
			norm = math.Sqrt(norm)
		}
		for _, i := range idx {
			if norm != 0 {
				out[i] = v[i] / norm
			}
		}
	})
	return one(tensor.FromFloat64s(x.DType, x.Shape, out)), nil
}

// nnxDropout is the identity at inference (training_mode false or ratio 0); training-mode
// dropout with a positive ratio is random and not reproducible by a reference.
func nnxDropout(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := in[0]
	training := len(in) > 2 && in[2] != nil && in[2].Float64s()[0] != 0
	ratio := 0.5
	if len(in) > 1 && in[1] != nil {
		ratio = in[1].Float64s()[0]
	}
	if training && ratio != 0 {
		return nil, fmt.Errorf("%w: training-mode Dropout with ratio %g is random", ErrUnsupported, ratio)
	}
	mask := make([]bool, x.Len())
	for i := range mask {
		mask[i] = true
	}
	return []*tensor.Tensor{x, tensor.MustFromSlice(x.Shape, mask)}, nil
}
