package engine

import (
	"fmt"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

// DimsFromInputs binds the symbols of m's input shapes to the extents of concrete
// inputs (keyed by input name). A symbol that gets two different values, or an input
// whose rank or static extents disagree with the model, is an error.
func DimsFromInputs(m *graph.Module, inputs map[string]*tensor.Tensor) (map[string]int64, error) {
	return DimsFromShapes(m, ShapesOf(inputs))
}

// ShapesOf returns the shapes of tensors, by name.
func ShapesOf(inputs map[string]*tensor.Tensor) map[string][]int64 {
	out := make(map[string][]int64, len(inputs))
	for k, t := range inputs {
		s := make([]int64, len(t.Shape))
		for i, d := range t.Shape {
			s[i] = int64(d)
		}
		out[k] = s
	}
	return out
}

// DimsFromShapes is DimsFromInputs on shapes alone.
func DimsFromShapes(m *graph.Module, shapes map[string][]int64) (map[string]int64, error) {
	dims := map[string]int64{}
	for _, p := range m.Main.Params {
		shape, ok := shapes[p.Name]
		if !ok || p.Type.Kind != graph.KindTensor || p.Type.UnknownRank {
			continue
		}
		if len(shape) != len(p.Type.Shape) {
			return nil, fmt.Errorf("input %q: got shape %v, the model declares %v", p.Name, shape, p.Type)
		}
		for i, d := range p.Type.Shape {
			got := shape[i]
			if v, ok := d.Value(); ok {
				if v != got {
					return nil, fmt.Errorf("input %q: got shape %v, the model declares %v", p.Name, shape, p.Type)
				}
				continue
			}
			if sym, ok := d.IsSym(); ok {
				if prev, seen := dims[sym]; seen && prev != got {
					return nil, fmt.Errorf("input %q: dim %s is %d here and %d in another input", p.Name, sym, got, prev)
				}
				dims[sym] = got
			}
		}
	}
	return dims, nil
}

// InputShapes is the inverse: the concrete shape of every tensor input of m with its
// symbols bound by dims; an unbound symbol is an error naming it.
func InputShapes(m *graph.Module, dims map[string]int64) (map[string][]int64, error) {
	out := map[string][]int64{}
	for _, p := range m.Main.Params {
		if p.Type.Kind != graph.KindTensor || p.Type.UnknownRank {
			continue
		}
		shape := make([]int64, len(p.Type.Shape))
		for i, d := range p.Type.Shape {
			if v, ok := d.Value(); ok {
				shape[i] = v
				continue
			}
			sym, _ := d.IsSym()
			v, ok := dims[sym]
			if !ok {
				return nil, fmt.Errorf("input %q (%v): dim %q is not bound (give it a value, e.g. --dims %s=N)", p.Name, p.Type, sym, sym)
			}
			shape[i] = v
		}
		out[p.Name] = shape
	}
	return out, nil
}
