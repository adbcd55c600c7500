package kernels

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// The optimizers of ONNX's training domain (Adagrad, Adam, Momentum) as elementwise
// computes: output group o, tensor i reads X_i, G_i and the states of tensor i at the
// same index, with the scalars R and T (a tensor of one element each) broadcast. Each
// element is computed in float64 and stored in X_i's type, as the reference evaluator
// does (kernels/ref OptimizerStep).

func trainingComputes() map[graph.Op]ComputeFunc {
	return map[graph.Op]ComputeFunc{
		graph.OpAdagrad:  computeOptimizer,
		graph.OpAdam:     computeOptimizer,
		graph.OpMomentum: computeOptimizer,
	}
}

func computeOptimizer(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	groups, outs := graph.OptimizerGroups(n.Op), graph.OptimizerOutputs(n.Op)
	if len(in) < 2+groups || (len(in)-2)%groups != 0 {
		return nil, Unsupported("%v with %d inputs", n.Op, len(in))
	}
	r, err := dropoutScalar(n, in[0], "learning rate R")
	if err != nil {
		return nil, err
	}
	t, err := dropoutScalar(n, in[1], "update count T")
	if err != nil {
		return nil, err
	}
	if !plainFloat(r.DType()) || !t.DType().IsInt() {
		return nil, Unsupported("%v with R of %v and T of %v", n.Op, r.DType(), t.DType())
	}
	f64 := func(e loopir.Expr) loopir.Expr {
		if e.DType() == tensor.Float64 {
			return e
		}
		return te.Cast(tensor.Float64, e)
	}
	c := func(v float32) loopir.Expr { return loopir.Float(float64(v), tensor.Float64) }
	one := loopir.Float(1, tensor.Float64)
	rate, count := f64(r), f64(t)
	positive := loopir.Bin(loopir.GT, t, &loopir.IntImm{V: 0, DT: t.DType()})
	k := (len(in) - 2) / groups
	res := make([]*te.Tensor, outs*k)
	for i := 0; i < k; i++ {
		x := in[2+i].T
		if !plainFloat(x.DT) {
			return nil, Unsupported("%v on %v", n.Op, x.DT)
		}
		xs, err := Extents(x)
		if err != nil {
			return nil, err
		}
		group := make([]*te.Tensor, groups)
		for g := range group {
			y := in[2+g*k+i].T
			ys, err := Extents(y)
			if err != nil {
				return nil, err
			}
			if y.DT != x.DT || !equalInts(xs, ys) {
				return nil, Unsupported("%v: input %d is %v%v, X%d is %v%v", n.Op, 2+g*k+i, y.DT, ys, i, x.DT, xs)
			}
			group[g] = y
		}
		// step returns the float64 expressions of the outputs at index j
		step := func(j []loopir.Expr) []loopir.Expr {
			xv, gv := f64(group[0].At(j...)), f64(group[1].At(j...))
			switch n.Op {
			case graph.OpAdagrad:
				a := attrs[graph.AdagradAttrs](n)
				lr := te.Div(rate, te.Add(one, te.Mul(count, c(a.DecayFactor))))
				gr := te.Add(te.Mul(c(a.NormCoefficient), xv), gv)
				h := te.Add(f64(group[2].At(j...)), te.Mul(gr, gr))
				return []loopir.Expr{te.Sub(xv, te.Div(te.Mul(lr, gr), te.Add(te.Sqrt(h), c(a.Epsilon)))), h}
			case graph.OpMomentum:
				a := attrs[graph.MomentumAttrs](n)
				gr := te.Add(te.Mul(c(a.NormCoefficient), xv), gv)
				beta := te.Select(positive, c(a.Beta), one)
				v := te.Add(te.Mul(c(a.Alpha), f64(group[2].At(j...))), te.Mul(beta, gr))
				if a.Mode == "nesterov" {
					return []loopir.Expr{te.Sub(xv, te.Mul(rate, te.Add(gr, te.Mul(c(a.Alpha), v)))), v}
				}
				return []loopir.Expr{te.Sub(xv, te.Mul(rate, v)), v}
			default: // Adam
				a := attrs[graph.AdamAttrs](n)
				gr := te.Add(te.Mul(c(a.NormCoefficient), xv), gv)
				v := te.Add(te.Mul(c(a.Alpha), f64(group[2].At(j...))), te.Mul(te.Sub(one, c(a.Alpha)), gr))
				h := te.Add(te.Mul(c(a.Beta), f64(group[3].At(j...))), te.Mul(te.Sub(one, c(a.Beta)), te.Mul(gr, gr)))
				adjusted := te.Div(te.Mul(rate, te.Sqrt(te.Sub(one, te.Pow(c(a.Beta), count)))), te.Sub(one, te.Pow(c(a.Alpha), count)))
				lr := te.Select(positive, adjusted, rate)
				xn := te.Sub(xv, te.Mul(lr, te.Div(v, te.Add(te.Sqrt(h), c(a.Epsilon)))))
				return []loopir.Expr{te.Mul(te.Sub(one, c(a.NormCoefficientPost)), xn), v, h}
			}
		}
		for o := 0; o < outs; o++ {
			res[o*k+i] = te.Compute(n.Op.String(), x.Shape, func(j []loopir.Expr) loopir.Expr {
				v := step(j)[o]
				if x.DT == tensor.Float64 {
					return v
				}
				return te.Cast(x.DT, v)
			})
		}
	}
	return res, nil
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
