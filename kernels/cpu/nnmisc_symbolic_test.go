package cpu

import (
	"testing"

	"github.com/kilnrt/kiln/graph"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/tensor"
)

// TestNNMiscDefinitionsTakeSymbolicExtents: the losses, training-mode BatchNormalization,
// LRN, Einsum and Dropout compile once over a symbolic batch (and spatial extent) and
// agree with the reference evaluator at every binding, 1 included.
func TestNNMiscDefinitionsTakeSymbolicExtents(t *testing.T) {
	l := Strategies(kernels.Default())
	binds := []map[string]int64{{"n": 1, "s": 3}, {"n": 4, "s": 1}, {"n": 3, "s": 5}}
	x := nt.Sym(tensor.Float32, "n", "5", "s")
	target := nt.Sym(tensor.Int64, "n", "s")
	w := nt.SymC(positive(f32(3, 5)))
	for _, red := range []string{"none", "sum", "mean"} {
		a := &graph.LossAttrs{IgnoreIndex: 2, Reduction: red}
		t.Run("NegativeLogLikelihoodLoss "+red, func(t *testing.T) {
			nt.CheckSymbolic(t, l, graph.OpNegativeLogLikelihoodLoss, a, 1, []nt.SymArg{x, target, w}, binds...)
		})
		t.Run("SoftmaxCrossEntropyLoss "+red, func(t *testing.T) {
			nt.CheckSymbolic(t, l, graph.OpSoftmaxCrossEntropyLoss, a, 2, []nt.SymArg{x, target}, binds...)
		})
	}
	t.Run("BatchNormalization training", func(t *testing.T) {
		bn := &graph.BatchNormAttrs{Epsilon: 1e-3, Momentum: 0.9, TrainingMode: 1}
		nt.CheckSymbolic(t, l, graph.OpBatchNormalization, bn, 3, []nt.SymArg{x,
			nt.SymC(f32(4, 5)), nt.SymC(f32(5, 5)), nt.SymC(f32(6, 5)), nt.SymC(positive(f32(7, 5)))}, binds...)
	})
	t.Run("LRN", func(t *testing.T) {
		nt.CheckSymbolic(t, l, graph.OpLRN, &graph.LRNAttrs{Alpha: 0.1, Beta: 0.75, Bias: 1, Size: 3}, 1, []nt.SymArg{x}, binds...)
	})
	t.Run("Einsum", func(t *testing.T) {
		nt.CheckSymbolic(t, l, graph.OpEinsum, &graph.EinsumAttrs{Equation: "nij,njk->nik"}, 1,
			[]nt.SymArg{nt.Sym(tensor.Float32, "n", "3", "s"), nt.Sym(tensor.Float32, "n", "s", "4")}, binds...)
	})
	t.Run("Dropout", func(t *testing.T) {
		nt.CheckSymbolic(t, l, graph.OpDropout, &graph.DropoutAttrs{}, 2, []nt.SymArg{x, nt.SymC(tensor.Scalar(float32(0.3))), nt.SymC(tensor.Scalar(false))}, binds...)
	})
}

// TestMaxUnpoolTakesAnOutputShapeKnownOverSymbols: MaxUnpool's output_shape given as
// extents known over the symbols (as Shape of the pooled tensor gives them) sizes one
// kernel that agrees with the reference at every binding at least the default size.
func TestMaxUnpoolTakesAnOutputShapeKnownOverSymbols(t *testing.T) {
	l := Strategies(kernels.Default())
	a := &graph.MaxUnpoolAttrs{KernelShape: []int64{2, 2}, Strides: []int64{2, 2}}
	ind := nt.Sym(tensor.Int64, "1", "2", "2", "2")
	ind.Data = func(map[string]int64) *tensor.Tensor {
		return unpoolIndices([]int{1, 2, 2, 2}, []int{4, 4}, []int{2, 2}, []int{2, 2}, []int{0, 0})
	}
	args := []nt.SymArg{nt.Sym(tensor.Float32, "1", "2", "2", "2"), ind, nt.ShapeOf("1", "2", "h", "w")}
	nt.CheckSymbolic(t, l, graph.OpMaxUnpool, a, 1, args, map[string]int64{"h": 4, "w": 4}, map[string]int64{"h": 5, "w": 7}, map[string]int64{"h": 6, "w": 4})
}
