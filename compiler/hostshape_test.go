package compiler

import (
	"context"
	"errors"
	"testing"

	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// runtimeShapeModule: a Reshape to a shape given by an input, kernels on the reshaped
// tensor, an Expand to another input shape and a kernel after it; every extent past
// the Reshape is known only at run time.
func runtimeShapeModule(t *testing.T) *graph.Module {
	t.Helper()
	m, err := graph.Parse(`module opsets(""=17)
func @main(%x: f32[6], %shape: i64[2], %target: i64[3]) {
  %r = Reshape(%x, %shape) : f32[p,q]
  %e = Exp(%r) : f32[p,q]
  %b = Expand(%e, %target) : f32[k,m,n]
  %y = Relu(%b) : f32[k,m,n]
  %s = ReduceSum(%y) : f32[1,1,1]
  return %y, %s
}`)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func i64s(v ...int64) *tensor.Tensor { return tensor.MustFromSlice(tensor.Shape{len(v)}, v) }

// TestRuntimeReshapeAndExpandFeedKernels: one executable runs with shapes that change
// between runs (their extents bound on the host from the shape inputs) and matches the
// reference each time, fused and not; shape values a request gets wrong are ErrInput.
func TestRuntimeReshapeAndExpandFeedKernels(t *testing.T) {
	for _, noFusion := range []bool{false, true} {
		t.Run(map[bool]string{false: "fused", true: "unfused"}[noFusion], func(t *testing.T) {
			runs := [][]*tensor.Tensor{
				{f32(1, 6), i64s(2, 3), i64s(4, 2, 3)},
				{f32(2, 6), i64s(3, -1), i64s(2, 3, 2)},
				{f32(3, 6), i64s(6, 1), i64s(1, 6, 4)},
				{f32(4, 6), i64s(0, 1), i64s(2, 6, 1)}, // 0 keeps the input's extent
			}
			machine, _ := checkSymbolic(t, runtimeShapeModule(t), target.Host(), Options{Recipe: engine.Recipe{NoFusion: noFusion}}, runs)
			for _, bad := range []struct {
				why           string
				shape, target *tensor.Tensor
			}{
				{"a reshape that changes the element count", i64s(4, 2), i64s(1, 4, 2)},
				{"two -1 extents", i64s(-1, -1), i64s(1, 1, 6)},
				{"a negative extent", i64s(-2, -3), i64s(1, 1, 1)},
				{"a target that does not broadcast", i64s(2, 3), i64s(1, 4, 3)},
				{"a negative target", i64s(2, 3), i64s(-1, 2, 3)},
				{"a target past the limits", i64s(2, 3), i64s(1<<40, 1<<40, 3)},
			} {
				_, err := machine.Run(context.Background(), []*tensor.Tensor{f32(9, 6), bad.shape, bad.target})
				if !errors.Is(err, vm.ErrInput) {
					t.Errorf("%s: got %v, want ErrInput", bad.why, err)
				}
			}
		})
	}
}
