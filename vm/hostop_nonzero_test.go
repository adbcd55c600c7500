package vm_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// TestNonZeroCoordinates: NonZero's [rank, count] coordinates, row-major order, on a
// 3-D tensor with a few nonzero elements (first and last included) and on one with none.
func TestNonZeroCoordinates(t *testing.T) {
	shape := tensor.Shape{3, 4, 5}
	v := make([]float32, shape.NumElements())
	var want [3][]int64
	for _, i := range []int{0, 7, 23, 24, 41, 59} {
		v[i] = 1
		want[0], want[1], want[2] = append(want[0], int64(i/20)), append(want[1], int64(i/5%4)), append(want[2], int64(i%5))
	}
	out, err := runStd(t, stdExe(vm.HostNonZero, nil, 1), vm.Limits{}, tensor.MustFromSlice(shape, v))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(out[0].Shape, out[0].Int64s()); got != fmt.Sprint(tensor.Shape{3, 6}, slices.Concat(want[0], want[1], want[2])) {
		t.Errorf("NonZero: got %s, want %v", got, want)
	}
	out, err = runStd(t, stdExe(vm.HostNonZero, nil, 1), vm.Limits{}, tensor.MustFromSlice(shape, make([]float32, 60)))
	if err != nil || !slices.Equal(out[0].Shape, tensor.Shape{3, 0}) {
		t.Errorf("NonZero of zeros: %v %v, want shape [3 0]", out, err)
	}
}
