package onnx

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

// minOverridableIR is the first IR version in which an initializer need not be a graph
// input, so that one listed as an input is a default its caller may replace. Before
// it, every initializer was listed as an input and all are constants.
const minOverridableIR = 4

// checkDefault checks that an input's default (its initializer) is a value of the
// input's declared type: its element type, rank and fixed extents.
func checkDefault(name string, t graph.Type, def *tensor.Tensor) error {
	if t.Kind != graph.KindTensor {
		return invalidf("input %q is declared %v but has an initializer (a tensor) as its default", name, t)
	}
	if t.DType != def.DType {
		return invalidf("input %q is declared %v, but its default (initializer) is %v", name, t.DType, def.DType)
	}
	if t.UnknownRank {
		return nil
	}
	if len(t.Shape) != len(def.Shape) {
		return invalidf("input %q is declared %v, but its default (initializer) has shape %v", name, t, def.Shape)
	}
	for i, d := range t.Shape {
		if v, ok := d.Value(); ok && v != int64(def.Shape[i]) {
			return invalidf("input %q is declared %v, but its default (initializer) has shape %v", name, t, def.Shape)
		}
	}
	return nil
}
