package kernels

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
)

// computeMVN is MeanVarianceNormalization: over the axes (default 0, 2, 3), the mean
// and the population variance of each group; y = (x - mean) / (sqrt(variance) + 1e-9),
// the epsilon ONNX's function body adds to the deviation.
func computeMVN(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	x := in[0].T
	if !plainFloat(x.DT) {
		return nil, Unsupported("%v on %v", n.Op, x.DT)
	}
	axes := attrs[graph.MVNAttrs](n).Axes
	if axes == nil {
		axes = []int64{0, 2, 3}
	}
	red, err := graph.ReduceAxes(len(x.Shape), axes, true, false)
	if err != nil {
		return nil, Unsupported("%v: %v", n.Op, err)
	}
	r := Reduction{X: x, Axes: red, KeepDims: true}
	dt := x.DT
	sum := r.Compute("mvn_sum", te.Sum, func(xi, _ []loopir.Expr) loopir.Expr { return x.At(xi...) })
	mean := r.Apply("mvn_mean", func(i []loopir.Expr) loopir.Expr { return te.Div(sum.At(i...), countOf(r, dt)) })
	sq := r.Compute("mvn_sumsq", te.Sum, func(xi, i []loopir.Expr) loopir.Expr {
		d := te.Sub(x.At(xi...), mean.At(i...))
		return te.Mul(d, d)
	})
	std := r.Apply("mvn_std", func(i []loopir.Expr) loopir.Expr {
		return te.Add(te.Sqrt(te.Div(sq.At(i...), countOf(r, dt))), loopir.Float(1e-9, dt))
	})
	return []*te.Tensor{te.Compute("mvn", x.Shape, func(i []loopir.Expr) loopir.Expr {
		g := r.ResultIndex(i)
		return te.Div(te.Sub(x.At(i...), mean.At(g...)), std.At(g...))
	})}, nil
}
