package cpu

import (
	"fmt"
	"testing"

	"github.com/kilnrt/kiln/graph"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels"
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
