package cpu

import (
	"testing"

	"github.com/kilnrt/kiln/graph"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/tensor"
)

// TestGeluAgainstRef: both Gelu approximations through the generic strategy, on inputs
// spread over [-4, 4] where erf and tanh saturate, compared with the reference evaluator.
func TestGeluAgainstRef(t *testing.T) {
	l := Strategies(kernels.Default())
	v := f32(3, 4, 33, 17).Float64s()
	for i := range v {
		v[i] *= 4
	}
	x := tensor.FromFloat64s(tensor.Float32, tensor.Shape{4, 33, 17}, v)
	for _, approx := range []string{"none", "tanh"} {
		a := graph.OpGelu.NewAttrs().(*graph.GeluAttrs)
		a.Approximate = approx
		nt.CheckNode(t, l, graph.OpGelu, a, 1, nt.In(x))
	}
}
