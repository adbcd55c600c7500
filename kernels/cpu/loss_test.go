package cpu

import (
	"errors"
	"fmt"
	"testing"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/graph"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/tensor"
)

// lossTargets returns count class indices in [0, classes) of element type dt, with
// every fifth one set to ignore (when not nil).
func lossTargets(dt tensor.DType, classes, count int, ignore *int64, shape ...int) *tensor.Tensor {
	v := make([]float64, count)
	for i := range v {
		v[i] = float64((i*7 + 3) % classes)
		if ignore != nil && i%5 == 1 {
			v[i] = float64(*ignore)
		}
	}
	return tensor.FromFloat64s(dt, tensor.Shape(shape), v)
}

// TestLossesAgreeWithReference runs NegativeLogLikelihoodLoss and
// SoftmaxCrossEntropyLoss (with its log_prob output) through the CPU strategies on
// random inputs, against the reference evaluator: each reduction, with and without
// weights, with ignore_index inside and outside the class range, int32 and int64
// targets, and inputs of rank 2 to 5.
func TestLossesAgreeWithReference(t *testing.T) {
	l := Strategies(kernels.Default())
	neg, mid := int64(-1), int64(2)
	shapes := [][]int{{6, 5}, {3, 4, 7}, {2, 3, 4, 5}, {2, 3, 2, 3, 2}}
	for si, shape := range shapes {
		c := shape[1]
		tshape := append([]int{shape[0]}, shape[2:]...)
		count := tensor.Shape(tshape).NumElements()
		for ri, red := range []string{"none", "sum", "mean"} {
			// every shape meets every reduction; ignore_index and weights rotate
			ignore := []*int64{nil, &neg, &mid}[(si+ri)%3]
			weighted := (si+ri)%2 == 0
			dt := tensor.Int64
			if weighted {
				dt = tensor.Int32
			}
			a := &graph.LossAttrs{IgnoreIndex: graph.AbsentInt, Reduction: red}
			if ignore != nil {
				a.IgnoreIndex = *ignore
			}
			args := []nt.Arg{nt.In(f32(uint64(si+1), shape...)), nt.In(lossTargets(dt, c, count, ignore, tshape...))}
			if weighted {
				w := f32(uint64(40+si), c)
				args = append(args, nt.In(tensor.FromFloat64s(tensor.Float32, w.Shape, absAll(w.Float64s()))))
			}
			name := fmt.Sprintf("%v %s ignore=%v weighted=%v", shape, red, a.IgnoreIndex, weighted)
			t.Run(name, func(t *testing.T) {
				nt.CheckNode(t, l, graph.OpNegativeLogLikelihoodLoss, a, 1, args...)
				nt.CheckNode(t, l, graph.OpSoftmaxCrossEntropyLoss, a, 2, args...)
			})
		}
	}
}

// TestLossMeanOfOnlyIgnoredTargetsIsZero: when every target is ignored the total
// weight is 0, and the mean is 0 as the reference gives it, not 0/0.
func TestLossMeanOfOnlyIgnoredTargetsIsZero(t *testing.T) {
	l := Strategies(kernels.Default())
	a := &graph.LossAttrs{IgnoreIndex: 3, Reduction: "mean"}
	target := tensor.FromFloat64s(tensor.Int64, tensor.Shape{4}, []float64{3, 3, 3, 3})
	nt.CheckNode(t, l, graph.OpNegativeLogLikelihoodLoss, a, 1, nt.In(f32(5, 4, 6)), nt.In(target))
	got, _, err := nt.RunNode(l, lossNode(t, graph.OpNegativeLogLikelihoodLoss, a, f32(5, 4, 6), target), []nt.Arg{nt.In(f32(5, 4, 6)), nt.In(target)})
	if err != nil {
		t.Fatal(err)
	}
	if v := got[0].Float64s()[0]; v != 0 {
		t.Fatalf("mean over ignored targets = %v, want 0", v)
	}
}

// TestLossTargetOutOfRangeFailsTheKernel: a target outside [0, C) that is not
// ignore_index (too large, or negative) makes the kernel report an index out of range,
// as the reference refuses it, instead of reading outside the input.
func TestLossTargetOutOfRangeFailsTheKernel(t *testing.T) {
	l := Strategies(kernels.Default())
	x := f32(8, 3, 4)
	for _, bad := range []float64{4, 9, -1, -4} {
		for _, op := range []graph.Op{graph.OpNegativeLogLikelihoodLoss, graph.OpSoftmaxCrossEntropyLoss} {
			t.Run(fmt.Sprintf("%v target %v", op, bad), func(t *testing.T) {
				target := tensor.FromFloat64s(tensor.Int64, tensor.Shape{3}, []float64{1, bad, 2})
				a := &graph.LossAttrs{IgnoreIndex: -2, Reduction: "none"}
				args := []nt.Arg{nt.In(x), nt.In(target)}
				_, _, err := nt.RunNode(l, lossNode(t, op, a, x, target), args)
				var ke *devices.KernelError
				if !errors.As(err, &ke) || ke.Code != devices.KernelIndexOutOfRange {
					t.Fatalf("target %v: error %v, want the kernel's index out of range", bad, err)
				}
				// the ignored value in the same place is fine
				ok := tensor.FromFloat64s(tensor.Int64, tensor.Shape{3}, []float64{1, -2, 2})
				nt.CheckNode(t, l, op, a, 1, nt.In(x), nt.In(ok))
			})
		}
	}
}

// lossNode builds the one-node graph of a loss op and returns its node.
func lossNode(t *testing.T, op graph.Op, a *graph.LossAttrs, x, target *tensor.Tensor) *graph.Node {
	t.Helper()
	m, _ := nt.Build(t, op, a, 1, nt.In(x), nt.In(target))
	return m.Main.Nodes[len(m.Main.Nodes)-1]
}
