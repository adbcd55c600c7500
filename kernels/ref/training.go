package ref

// The optimizers of ONNX's training domain: Adagrad, Adam and Momentum. Each element is
// computed in float64 from R, T and the element of each group, then stored in X's type.

import (
	"math"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

func trainingKernels() map[graph.Op]Kernel {
	return map[graph.Op]Kernel{
		graph.OpAdagrad:  T(trainingOptimizer),
		graph.OpAdam:     T(trainingOptimizer),
		graph.OpMomentum: T(trainingOptimizer),
	}
}

// OptimizerStep computes one element's update: x, g and the state s (H for Adagrad; V
// for Momentum; V then H for Adam) become the outputs (X, then the new states), given
// r = R and t = T.
func OptimizerStep(n *graph.Node, r float64, t int64, x, g float64, s []float64) []float64 {
	switch n.Op {
	case graph.OpAdagrad:
		a := attrs[graph.AdagradAttrs](n)
		rate := r / (1 + float64(t)*float64(a.DecayFactor))
		gr := float64(a.NormCoefficient)*x + g
		h := s[0] + gr*gr
		return []float64{x - rate*gr/(math.Sqrt(h)+float64(a.Epsilon)), h}
	case graph.OpMomentum:
		a := attrs[graph.MomentumAttrs](n)
		gr := float64(a.NormCoefficient)*x + g
		beta := float64(a.Beta)
		if t <= 0 {
			beta = 1
		}
		v := float64(a.Alpha)*s[0] + beta*gr
		if a.Mode == "nesterov" {
			return []float64{x - r*(gr+float64(a.Alpha)*v), v}
		}
		return []float64{x - r*v, v}
	case graph.OpAdam:
		a := attrs[graph.AdamAttrs](n)
		alpha, beta := float64(a.Alpha), float64(a.Beta)
		gr := float64(a.NormCoefficient)*x + g
		v := alpha*s[0] + (1-alpha)*gr
		h := beta*s[1] + (1-beta)*gr*gr
		rate := r
		if t > 0 {
			rate = r * math.Sqrt(1-math.Pow(beta, float64(t))) / (1 - math.Pow(alpha, float64(t)))
		}
		xn := x - rate*v/(math.Sqrt(h)+float64(a.Epsilon))
		return []float64{(1 - float64(a.NormCoefficientPost)) * xn, v, h}
	}
	panic("BUG: OptimizerStep on " + n.Op.String())
}

func trainingOptimizer(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	groups, outs := graph.OptimizerGroups(n.Op), graph.OptimizerOutputs(n.Op)
	if in[0] == nil || in[1] == nil || in[0].Len() != 1 || in[1].Len() != 1 {
		return nil, Badf("R and T must be scalars")
	}
	if !in[0].DType.IsFloat() || !in[1].DType.IsInt() {
		return nil, Badf("R is %v and T is %v, want a float and an integer", in[0].DType, in[1].DType)
	}
	r, t := in[0].Float64s()[0], in[1].Int64s()[0]
	k := (len(in) - 2) / groups
	res := make([]*tensor.Tensor, outs*k)
	for i := 0; i < k; i++ {
		x := in[2+i]
		vals := make([][]float64, groups)
		for g := range vals {
			y := in[2+g*k+i]
			if y == nil || !y.Shape.Equal(x.Shape) {
				return nil, Badf("tensor %d of group %d does not have X%d's shape %v", i, g, i, x.Shape)
			}
			vals[g] = y.Float64s()
		}
		out := make([][]float64, outs)
		for o := range out {
			out[o] = make([]float64, x.Len())
		}
		for e := range out[0] {
			st := make([]float64, groups-2)
			for g := range st {
				st[g] = vals[2+g][e]
			}
			for o, v := range OptimizerStep(n, r, t, vals[0][e], vals[1][e], st) {
				out[o][e] = v
			}
		}
		for o := range out {
			res[o*k+i] = tensor.FromFloat64s(x.DType, x.Shape, out[o])
		}
	}
	return res, nil
}
