package cpu

import (
	"fmt"
	"testing"

	"github.com/kilnrt/kiln/graph"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/tensor"
)

// TestDetAgreesWithReference: Det on random matrices of several sizes with and without
// batch axes, in float32 and float64, on a matrix that needs a row swap (a zero in the
// corner), and on singular ones (a zero pivot), against the reference evaluator.
func TestDetAgreesWithReference(t *testing.T) {
	l := Strategies(kernels.Default())
	for i, shape := range [][]int{{1, 1}, {2, 2}, {3, 3}, {5, 5}, {8, 8}, {4, 3, 3}, {2, 3, 4, 4}} {
		t.Run(fmt.Sprint(shape), func(t *testing.T) {
			x := f32(uint64(70+i), shape...)
			if s := nt.CheckNode(t, l, graph.OpDet, nil, 1, nt.In(x)); s != "det-loops" {
				t.Fatalf("strategy %s", s)
			}
			x64 := tensor.FromFloat64s(tensor.Float64, x.Shape, x.Float64s())
			nt.CheckNode(t, l, graph.OpDet, nil, 1, nt.In(x64))
		})
	}
	special := map[string][]float64{
		"row swap":           {0, 2, 1, 3, 1, 4, 5, 2, 0},
		"singular":           {1, 2, 3, 2, 4, 6, 1, 0, 1},
		"zero column":        {0, 1, 2, 0, 3, 4, 0, 5, 6},
		"singular after one": {2, 1, 1, 4, 2, 2, 1, 3, 5},
	}
	for name, v := range special {
		t.Run(name, func(t *testing.T) {
			nt.CheckNode(t, l, graph.OpDet, nil, 1, nt.In(tensor.FromFloat64s(tensor.Float32, tensor.Shape{3, 3}, v)))
		})
	}
}
