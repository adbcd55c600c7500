package cpu

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/tensor"
)

// TestTrainingBatchNormAgreesWithReference: BatchNormalization with training_mode=1
// normalizes with the batch's statistics and returns the running mean and variance,
// on inputs of rank 2 to 4, against the reference evaluator.
func TestTrainingBatchNormAgreesWithReference(t *testing.T) {
	l := Strategies(kernels.Default())
	for i, shape := range [][]int{{5, 3}, {2, 4, 7}, {3, 2, 5, 6}} {
		c := shape[1]
		for _, outs := range []int{1, 3} {
			t.Run(fmt.Sprintf("%v %d outputs", shape, outs), func(t *testing.T) {
				a := &graph.BatchNormAttrs{Epsilon: 1e-3, Momentum: 0.8, TrainingMode: 1}
				nt.CheckNode(t, l, graph.OpBatchNormalization, a, outs, nt.In(f32(uint64(i+1), shape...)),
					nt.In(f32(11, c)), nt.In(f32(12, c)), nt.In(f32(13, c)), nt.In(positive(f32(14, c))))
			})
		}
	}
}

// TestLRNAgreesWithReference: LRN with odd and even window sizes, a window wider than
// the channels, and ranks 3 and 4, against the reference evaluator.
func TestLRNAgreesWithReference(t *testing.T) {
	l := Strategies(kernels.Default())
	cases := []struct {
		shape []int
		size  int64
	}{{[]int{2, 7, 5, 4}, 5}, {[]int{2, 6, 9}, 4}, {[]int{1, 3, 4, 4}, 7}, {[]int{2, 5, 3, 3}, 1}}
	for i, c := range cases {
		t.Run(fmt.Sprintf("%v size %d", c.shape, c.size), func(t *testing.T) {
			a := &graph.LRNAttrs{Alpha: 0.02, Beta: 0.6, Bias: 1.5, Size: c.size}
			nt.CheckNode(t, l, graph.OpLRN, a, 1, nt.In(f32(uint64(20+i), c.shape...)))
		})
	}
}

// TestEinsumAgreesWithReference: Einsum equations with explicit and implicit outputs,
// traces and diagonals, the ellipsis with broadcast batch axes, outer products, three
// operands and full reductions, against the reference evaluator.
func TestEinsumAgreesWithReference(t *testing.T) {
	l := Strategies(kernels.Default())
	cases := []struct {
		eq     string
		shapes [][]int
	}{
		{"ij,jk->ik", [][]int{{3, 5}, {5, 4}}},
		{"bij,bjk->bik", [][]int{{2, 3, 5}, {2, 5, 4}}},
		{"ii->i", [][]int{{4, 4}}},
		{"ii", [][]int{{5, 5}}},
		{"...ii->...i", [][]int{{2, 3, 4, 4}}},
		{"i,i", [][]int{{7}, {7}}},
		{"ij->", [][]int{{3, 6}}},
		{"ij,ij->ij", [][]int{{3, 4}, {3, 4}}},
		{"i,j->ij", [][]int{{3}, {5}}},
		{"...ij,...jk", [][]int{{2, 1, 3, 4}, {5, 4, 2}}},
		{"ijk->kji", [][]int{{2, 3, 4}}},
		{"ij,jk,kl->il", [][]int{{2, 3}, {3, 4}, {4, 5}}},
		{"ba", [][]int{{3, 2}}},
		{"bhid,bhjd->bhij", [][]int{{1, 2, 3, 8}, {1, 2, 5, 8}}},
	}
	for ci, c := range cases {
		t.Run(c.eq, func(t *testing.T) {
			var args []nt.Arg
			for k, s := range c.shapes {
				args = append(args, nt.In(f32(uint64(60+10*ci+k), s...)))
			}
			nt.CheckNode(t, l, graph.OpEinsum, &graph.EinsumAttrs{Equation: c.eq}, 1, args...)
		})
	}
}

// TestEinsumRefusalNamesTheEquation: an Einsum the definition does not handle (here,
// half-precision operands) is refused with the equation in the error.
func TestEinsumRefusalNamesTheEquation(t *testing.T) {
	l := Strategies(kernels.Default())
	x := tensor.New(tensor.Float16, tensor.Shape{2, 3})
	err := nt.LowerErr(t, l, graph.OpEinsum, &graph.EinsumAttrs{Equation: "ij->ji"}, 1, nt.In(x))
	if !errors.Is(err, kernels.ErrNoKernel) || !strings.Contains(err.Error(), `"ij->ji"`) {
		t.Fatalf("error %v, want no kernel naming the equation", err)
	}
}
