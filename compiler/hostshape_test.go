package compiler

import (
	"context"
	"errors"
	"testing"

	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/internal/gputest"
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

// TestRuntimeOperandsMatchReference: reduction axes (dropped and kept), Slice bounds,
// Pad pads, Tile repeats, Split sizes and a OneHot depth given as inputs, each followed
// by a kernel, compile once and match the reference for several operand values; bad
// values are ErrInput.
func TestRuntimeOperandsMatchReference(t *testing.T) {
	m, runs := runtimeOperandsModule(t)
	for _, noFusion := range []bool{false, true} {
		t.Run(map[bool]string{false: "fused", true: "unfused"}[noFusion], func(t *testing.T) {
			machine, _ := checkSymbolic(t, m, target.Host(), Options{Recipe: engine.Recipe{NoFusion: noFusion}}, runs)
			bad := runtimeOperands(4, 3, []int64{0, 0}, []int64{1, 1}, []int64{0, 0, 0, 0, 0, 0}, []int64{1, 1, 1}, []int64{2, 3}, 2)
			if _, err := machine.Run(context.Background(), bad); !errors.Is(err, vm.ErrInput) {
				t.Errorf("axis 3 of a rank-3 input: got %v, want ErrInput", err)
			}
			bad = runtimeOperands(4, 0, []int64{0, 0}, []int64{1, 1}, []int64{0, 0, 0, 0, 0, 0}, []int64{1, 1, 1}, []int64{2, 2}, 2)
			if _, err := machine.Run(context.Background(), bad); !errors.Is(err, vm.ErrInput) {
				t.Errorf("split sizes adding up to 4 of 5: got %v, want ErrInput", err)
			}
		})
	}
}

// TestOpenCLTargetRuntimeShapes: on OpenCL, the operands read on the host come to the
// CPU and the kernels on the device take the bound extents: both modules match the
// reference.
func TestOpenCLTargetRuntimeShapes(t *testing.T) {
	gpu := gputest.OpenCL(t)
	tg, err := gpu.Target()
	if err != nil {
		t.Fatal(err)
	}
	m, runs := runtimeOperandsModule(t)
	_, res := checkSymbolic(t, m, tg, Options{GPU: gpu}, runs)
	_, res2 := checkSymbolic(t, runtimeShapeModule(t), tg, Options{GPU: gpu}, [][]*tensor.Tensor{
		{f32(1, 6), i64s(2, 3), i64s(4, 2, 3)},
		{f32(2, 6), i64s(3, -1), i64s(2, 3, 2)},
	})
	for _, r := range []*Result{res, res2} {
		on := map[string]int{}
		for _, g := range r.Stats.Groups {
			on[g.Device]++
		}
		if on["opencl"] == 0 {
			t.Errorf("no kernel on the OpenCL device: %v", on)
		}
		t.Logf("kernels per device: %v", on)
	}
}

// runtimeOperandsModule: reduction axes (dropped and kept), Slice bounds, Pad pads, Tile
// repeats, Split sizes and a OneHot depth given as inputs, with runs of several values.
func runtimeOperandsModule(t *testing.T) (*graph.Module, [][]*tensor.Tensor) {
	t.Helper()
	m, err := graph.Parse(`module opsets(""=17)
func @main(%x: f32[3,4,5], %axes: i64[1], %starts: i64[2], %ends: i64[2], %pads: i64[6], %reps: i64[3], %sizes: i64[2], %depth: i64[], %idx: i64[3]) {
  const %onoff: f32[2] = [0, 1]
  %r = ReduceSum(%x, %axes) {keepdims=0} : f32[a,b]
  %r2 = Exp(%r) : f32[a,b]
  %k = ReduceMax(%x, %axes) : f32[a1,b1,c1]
  %s = Slice(%x, %starts, %ends) : f32[c,d,5]
  %s2 = Neg(%s) : f32[c,d,5]
  %p = Pad(%x, %pads) : f32[e,f,g]
  %t = Tile(%x, %reps) : f32[h,i,j]
  %t2 = Relu(%t) : f32[h,i,j]
  %q1, %q2 = Split(%x, %sizes) {axis=2} : f32[3,4,l], f32[3,4,n]
  %o = OneHot(%idx, %depth, %onoff) : f32[3,o]
  return %r2, %k, %s2, %p, %t2, %q1, %q2, %o
}`)
	if err != nil {
		t.Fatal(err)
	}
	run := runtimeOperands
	return m, [][]*tensor.Tensor{
		run(1, 1, []int64{0, 1}, []int64{2, 4}, []int64{0, 1, 2, 1, 0, 3}, []int64{1, 2, 1}, []int64{2, 3}, 4),
		run(2, -1, []int64{-2, -100}, []int64{100, -1}, []int64{1, 0, -2, 0, 2, -1}, []int64{2, 1, 0}, []int64{0, 5}, 3),
		run(3, 0, []int64{1, 3}, []int64{1, 1}, []int64{0, 0, 0, 0, 0, 0}, []int64{1, 1, 1}, []int64{5, 0}, 7),
	}
}

func runtimeOperands(seed uint64, axis int64, starts, ends, pads, reps, sizes []int64, depth int64) []*tensor.Tensor {
	return []*tensor.Tensor{f32(seed, 3, 4, 5), i64s(axis), i64s(starts...), i64s(ends...), i64s(pads...), i64s(reps...),
		i64s(sizes...), tensor.Scalar(depth), i64s(0, -1, 2)}
}
