package conformance

import (
	"fmt"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/tensor"
)

// randomRun names what makes a run of m on inputs random, or returns "": a stochastic
// op, or a Dropout in training mode with a positive ratio (given as constants or as
// graph inputs). Such a run matches a stored output only by chance, whatever engine
// produced it (the reference evaluator refuses it; the compiled kernel draws from its
// own seeded generator), so the case is reported unsupported, never compared.
func randomRun(m *graph.Module, inputs map[string]ref.Value) string {
	value := func(v *graph.Value) *tensor.Tensor {
		switch {
		case v == nil:
			return nil
		case v.Const != nil:
			return v.Const
		}
		t, _ := inputs[v.Name].(*tensor.Tensor)
		return t
	}
	for _, n := range m.Main.Nodes {
		if info := n.Op.Info(); info != nil && info.Flags&graph.Stochastic != 0 {
			return fmt.Sprintf("node %v: the op is random", n)
		}
		if n.Op != graph.OpDropout {
			continue
		}
		training := value(n.Input(2))
		if training == nil || training.Len() != 1 || training.Float64s()[0] == 0 {
			continue
		}
		ratio := 0.5
		if r := value(n.Input(1)); r != nil && r.Len() == 1 {
			ratio = r.Float64s()[0]
		}
		if ratio != 0 {
			return fmt.Sprintf("node %v: training-mode Dropout with ratio %g is random: no stored output to compare with", n, ratio)
		}
	}
	return ""
}
