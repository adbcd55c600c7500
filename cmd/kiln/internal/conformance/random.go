package conformance

import (
	"fmt"
	"slices"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/loader/onnx"
	"github.com/kilnrt/kiln/tensor"
)

// randomRun names what makes a run of m on inputs random, or returns "": a stochastic
// op, or a Dropout in training mode with a positive ratio (given as constants or as
// graph inputs). Such a run matches a stored output only by chance, whatever engine
// produced it (each engine draws from its own generator), so its outputs are compared
// by element type and shape alone (compareRandom) and a pass says so (RandomPass).
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

// RandomPass is the Reason of a passing random run: only the outputs' element types
// and shapes were compared.
const RandomPass = "shape and dtype; values random"

// compareRandom checks a random run's outputs against the stored ones by element type
// and shape alone (why says what makes the run random).
func compareRandom(m *graph.Module, got []ref.Value, outFiles []string, why string) Result {
	for k, f := range outFiles {
		d, err := onnx.ReadData(f, m.Main.Results[k].Type)
		if err != nil {
			return Result{Status: Fail, Reason: fmt.Sprintf("output %d: %v", k, err)}
		}
		t, ok := got[k].(*tensor.Tensor)
		if d.Tensor == nil || !ok {
			return Result{Status: Fail, Reason: fmt.Sprintf("output %d (%s) of a random run (%s): only tensors are compared", k, m.Main.Results[k].Name, why)}
		}
		if t.DType != d.Tensor.DType || !slices.Equal(t.Shape, d.Tensor.Shape) {
			return Result{Status: Fail, Reason: fmt.Sprintf("output %d (%s) of a random run (%s): %v%v, stored %v%v", k, m.Main.Results[k].Name, why, t.DType, t.Shape, d.Tensor.DType, d.Tensor.Shape)}
		}
	}
	return Result{Status: Pass, Reason: RandomPass}
}
