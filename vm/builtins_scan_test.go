package vm

import (
	"errors"
	"testing"

	"github.com/kilnrt/kiln/tensor"
)

func TestScanBuiltins(t *testing.T) {
	acc := tensor.Scalar(int64(-1))
	row := func(v ...float32) *tensor.Tensor { return tensor.MustFromSlice(tensor.Shape{len(v)}, v) }
	var err error
	for _, r := range []*tensor.Tensor{row(1, 2), row(3, 4), row(5, 6)} {
		if acc, err = scanAppend([]*tensor.Tensor{acc, r}); err != nil {
			t.Fatal(err)
		}
	}
	tmpl := tensor.New(tensor.Float32, tensor.Shape{0})
	out, err := scanFinish([]*tensor.Tensor{acc, tmpl})
	if err != nil {
		t.Fatal(err)
	}
	if !out.Shape.Equal(tensor.Shape{3, 2}) || out.Data.([]float32)[5] != 6 {
		t.Fatalf("stacked %v %v", out.Shape, out.Data)
	}
	if _, err := scanAppend([]*tensor.Tensor{acc, row(1, 2, 3)}); !errors.Is(err, ErrInput) {
		t.Fatalf("a row of another shape: got %v, want ErrInput", err)
	}
	// no iteration: empty with the element shape, or an error when it is not known
	empty, err := scanFinish([]*tensor.Tensor{tensor.Scalar(int64(-1)), tmpl, tensor.MustFromSlice(tensor.Shape{2}, []int64{3, 4})})
	if err != nil || !empty.Shape.Equal(tensor.Shape{0, 3, 4}) || empty.DType != tensor.Float32 {
		t.Fatalf("empty scan: %v %v", empty, err)
	}
	if _, err := scanFinish([]*tensor.Tensor{tensor.Scalar(int64(-1)), tmpl}); err == nil {
		t.Fatal("an empty scan of unknown element shape finished")
	}
}

func TestScanSlice(t *testing.T) {
	x := tensor.MustFromSlice(tensor.Shape{2, 3, 2}, []float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11})
	i64 := func(v int64) *tensor.Tensor { return tensor.Scalar(v) }
	s, err := scanSlice([]*tensor.Tensor{x, i64(1), i64(0), i64(3), i64(1)}) // axis 1, reversed: index 2
	if err != nil {
		t.Fatal(err)
	}
	if !s.Shape.Equal(tensor.Shape{2, 2}) || s.Data.([]float32)[0] != 4 || s.Data.([]float32)[2] != 10 {
		t.Fatalf("slice %v %v, want [[4 5] [10 11]]", s.Shape, s.Data)
	}
	for _, bad := range [][]int64{{3, 0, 3, 0}, {1, 3, 3, 0}, {1, 0, 2, 0}, {-1, 0, 2, 0}} {
		if _, err := scanSlice([]*tensor.Tensor{x, i64(bad[0]), i64(bad[1]), i64(bad[2]), i64(bad[3])}); err == nil {
			t.Errorf("slice %v evaluated", bad)
		}
	}
}
