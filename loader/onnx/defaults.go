package onnx

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

// minOverridableIR is the first IR version in which an initializer need not be a graph
// input, so that one listed as an input is a default its caller may replace. Before
// it, every initializer was listed as an input and all are constants.
const minOverridableIR = 4

// maxListedWeights bounds the legacy exporters' pattern: a model that lists every one
// of more than this many initializers as a graph input was exported with its weights
// as inputs (keep_initializers_as_inputs), not with inputs meant to be replaced. Such
// initializers stay constants, as before IR version 4, so that weights fold and the
// convolutions and matrix products get their packed kernels; a request that gives one
// is refused as an unknown input, never served with the folded value. A model that
// lists only some of its initializers, or a few, keeps ONNX's meaning: defaults.
const maxListedWeights = 8

// overridable reports whether the main graph's initializers that are also listed as
// inputs are defaults a caller may replace: from IR version 4 on, unless every one of
// more than maxListedWeights initializers is listed.
func overridable(ir int64, initializers []string, listed func(string) bool) bool {
	if ir < minOverridableIR {
		return false
	}
	if len(initializers) <= maxListedWeights {
		return true
	}
	for _, name := range initializers {
		if !listed(name) {
			return true
		}
	}
	return false
}

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
