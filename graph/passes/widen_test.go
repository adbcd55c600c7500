package passes_test

import (
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/graph/passes"
	"github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/tensor"
)

// halfModule has a float16 parameter, constant and result, a Cast to float16 of a
// float32 parameter, a ConstantOfShape of a float16 value, and a half parameter
// returned as it came.
func halfModule(t *testing.T) *graph.Module {
	t.Helper()
	b := graph.NewBuilder("main")
	x := b.Param("x", graph.TensorType(tensor.Float16, graph.StaticShape(2, 3)...))
	y := b.Param("y", graph.TensorType(tensor.Float32, graph.StaticShape(2, 3)...))
	w := b.Const("w", tensor.MustFromSlice(tensor.Shape{3}, []float32{0.5, -2, 3}).Cast(tensor.Float16))
	op := func(o graph.Op, attrs any, in ...*graph.Value) *graph.Value {
		v, err := b.Op1(o, attrs, in...)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	cast := graph.OpCast.NewAttrs().(*graph.CastAttrs)
	cast.To = int64(tensor.Float16)
	fill := graph.OpConstantOfShape.NewAttrs().(*graph.ConstantOfShapeAttrs)
	fill.Value = tensor.MustFromSlice(tensor.Shape{1}, []float32{0.25}).Cast(tensor.Float16)
	a := op(graph.OpMul, nil, x, w)
	c := op(graph.OpAdd, nil, a, op(graph.OpCast, cast, y))
	d := op(graph.OpAdd, nil, c, op(graph.OpConstantOfShape, fill, op(graph.OpShape, nil, y)))
	m, err := b.Module(d, x)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestWidenHalfComputesInFloat32: widen-half makes every value, constant and
// element-type attribute of a float16 module float32, with a Cast after the float16
// parameter and one back before the float16 result (which keeps its name); a half
// parameter returned as it came stays itself. The widened module computes what the
// reference evaluator computes on the original to float16's precision.
func TestWidenHalfComputesInFloat32(t *testing.T) {
	m := halfModule(t)
	in := map[string]ref.Value{
		"x": tensor.MustFromSlice(tensor.Shape{2, 3}, []float32{1, 2, 3, -4, 5.5, 6}).Cast(tensor.Float16),
		"y": tensor.MustFromSlice(tensor.Shape{2, 3}, []float32{0.1, 0.2, 0.3, 0.4, 0.5, 0.6}),
	}
	want, err := ref.Eval(m, in, ref.Options{})
	if err != nil {
		t.Fatal(err)
	}
	outName := m.Main.Results[0].Name
	if err := (passes.Pipeline{pass(t, "widen-half")}).Run(&passes.Context{Check: true}, m); err != nil {
		t.Fatal(err)
	}
	if got, want := graph.Print(m), `func @main(%x: f16[2,3], %y: f32[2,3]) {
  const %w: f32[3] = [0.5, -2, 3]
  %x_f32 = Cast(%x) {to=1} : f32[2,3]
  %t1 = Mul(%x_f32, %w) : f32[2,3]
  %t2 = Cast(%y) {to=1} : f32[2,3]
  %t3 = Add(%t1, %t2) : f32[2,3]
  %t4 = Shape(%y) : i64[2]{2,3}
  %t5 = ConstantOfShape(%t4) {value=f32[1] [0.25]} : f32[2,3]
  %t6_f32 = Add(%t3, %t5) : f32[2,3]
  %t6 = Cast(%t6_f32) {to=10} : f16[2,3]
  return %t6, %x
}`; !strings.Contains(got, want) {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	res := m.Main.Results
	if res[0].Name != outName || res[0].Type.DType != tensor.Float16 || res[0].Def.Op != graph.OpCast || res[1] != m.Main.Params[0] {
		t.Errorf("results %v %v: want %s, a Cast to f16, then %%x itself", res[0].Name, res[0].Type, outName)
	}
	got, err := ref.Eval(m, in, ref.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		nodetest.CloseTensor(t, "result", got[i].(*tensor.Tensor), want[i].(*tensor.Tensor))
	}
}

// TestWidenHalfLeavesFloat32ModulesAlone: a module without half values is not touched.
func TestWidenHalfLeavesFloat32ModulesAlone(t *testing.T) {
	m, err := graph.Parse(`module opsets(""=17)
func @main(%x: f32[2]) {
  %y = Relu(%x) : f32[2]
  return %y
}`)
	if err != nil {
		t.Fatal(err)
	}
	before := graph.Print(m)
	if err := (passes.Pipeline{pass(t, "widen-half")}).Run(&passes.Context{Check: true}, m); err != nil {
		t.Fatal(err)
	}
	if after := graph.Print(m); after != before {
		t.Fatalf("changed:\n%s", after)
	}
}
