//go:build !serveonly

package main

import (
	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/graph/passes"
	"github.com/kilnrt/kiln/tensor"
)

// modelTensors counts the nodes of the model as loaded (subgraphs included) and the
// bytes of its intermediate tensors: every node output that is not a graph result, with
// the dims bound from the inputs: what an engine without a memory plan allocates. A
// tensor whose shape stays unknown counts nothing.
func modelTensors(m *graph.Module, inputs map[string]*tensor.Tensor) (int, int64, error) {
	dims, err := engine.DimsFromInputs(m, inputs)
	if err != nil {
		return 0, 0, usageError{err}
	}
	c := graph.Clone(m)
	bind := passes.Pipeline{{Name: "bind-dims", Run: passes.BindDims}}
	if err := bind.Run(&passes.Context{Dims: dims}, c); err != nil {
		return 0, 0, err
	}
	results := map[*graph.Value]bool{}
	for _, r := range c.Main.Results {
		results[r] = true
	}
	nodes, bytes := 0, int64(0)
	c.Main.Funcs(func(f *graph.Func) {
		for _, n := range f.Nodes {
			nodes++
			for _, o := range n.Outputs {
				if s, ok := o.Type.ConstShape(); ok && o.Type.Kind == graph.KindTensor && !results[o] {
					bytes += int64(s.NumElements()) * int64(o.Type.DType.Size())
				}
			}
		}
	})
	return nodes, bytes, nil
}
