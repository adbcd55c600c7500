package cpu

import (
	"fmt"
	"testing"

	"github.com/kilnrt/kiln/graph"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/tensor"
)

// TestOptimizersAgreeWithReference: Adagrad, Adam and Momentum (both modes) over two
// tensors of different shapes (one with a tail the vector width does not divide), at
// T = 0 and T > 0, in float32 and float64, against the reference evaluator.
func TestOptimizersAgreeWithReference(t *testing.T) {
	l := Strategies(kernels.Default())
	cases := []struct {
		op    graph.Op
		attrs any
	}{
		{graph.OpAdagrad, &graph.AdagradAttrs{DecayFactor: 0.1, Epsilon: 1e-6, NormCoefficient: 0.01}},
		{graph.OpAdam, &graph.AdamAttrs{Alpha: 0.9, Beta: 0.99, Epsilon: 1e-3, NormCoefficient: 0.01, NormCoefficientPost: 0.02}},
		{graph.OpMomentum, &graph.MomentumAttrs{Alpha: 0.9, Beta: 0.5, Mode: "standard", NormCoefficient: 0.01}},
		{graph.OpMomentum, &graph.MomentumAttrs{Alpha: 0.9, Beta: 0.5, Mode: "nesterov"}},
	}
	shapes := [][]int{{3, 37}, {5}}
	for ci, c := range cases {
		for _, step := range []int64{0, 3} {
			for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64} {
				t.Run(fmt.Sprintf("%v/%d/T=%d/%v", c.op, ci, step, dt), func(t *testing.T) {
					groups := graph.OptimizerGroups(c.op)
					args := []nt.Arg{nt.In(tensor.FromFloat64s(dt, nil, []float64{0.05})), nt.In(tensor.Scalar(step))}
					for g := 0; g < groups; g++ {
						for i, s := range shapes {
							v := f32(uint64(100*ci+10*g+i), s...).Float64s()
							if g >= 2 { // accumulated squares are not negative
								v = absAll(v)
							}
							args = append(args, nt.In(tensor.FromFloat64s(dt, tensor.Shape(s), v)))
						}
					}
					nt.CheckNode(t, l, c.op, c.attrs, (groups-1)*len(shapes), args...)
				})
			}
		}
	}
}
