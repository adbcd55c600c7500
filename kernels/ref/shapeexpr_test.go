package ref_test

import (
	"errors"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/tensor"
)

// TestShapeExpr: a kiln.ShapeExpr evaluates with the symbols bound from the inputs'
// shapes; two inputs that disagree on a symbol are refused.
func TestShapeExpr(t *testing.T) {
	m, err := graph.Parse(`module opsets(""=17)
func @main(%x: f32[b,s], %y: f32[b,s]) {
  %e = ShapeExpr() {value=i64[3]{b,2*s+1,4}} : i64[3]{b,2*s+1,4}
  %n = ShapeExpr() {value=i32[]{b*s}} : i32[]{b*s}
  return %e, %n
}`)
	if err != nil {
		t.Fatal(err)
	}
	x := tensor.New(tensor.Float32, tensor.Shape{3, 5})
	out, err := ref.Eval(m, map[string]ref.Value{"x": x, "y": x}, ref.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := out[0].(*tensor.Tensor).Int64s(); len(got) != 3 || got[0] != 3 || got[1] != 11 || got[2] != 4 {
		t.Errorf("shape expression: got %v, want [3 11 4]", got)
	}
	if n := out[1].(*tensor.Tensor); n.DType != tensor.Int32 || n.Int64s()[0] != 15 {
		t.Errorf("scalar expression: got %v %v, want i32 15", n.DType, n.Int64s())
	}
	y := tensor.New(tensor.Float32, tensor.Shape{3, 6})
	if _, err := ref.Eval(m, map[string]ref.Value{"x": x, "y": y}, ref.Options{}); !errors.Is(err, ref.ErrBadInput) {
		t.Errorf("inputs disagreeing on s: got %v, want ErrBadInput", err)
	}
}
