package passes_test

import (
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/graph/passes"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/tensor"
)

// evalNode evaluates one node with the reference evaluator, as the compiler does.
func evalNode(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	return ref.EvalNode(n, in)
}

func i64s(v ...int64) *tensor.Tensor { return tensor.MustFromSlice(tensor.Shape{len(v)}, v) }

// shapeChain builds x: f32[b,4] → Shape → Gather 0 → Unsqueeze → Concat [-1] → Reshape →
// Relu, the pattern exporters emit for flatten-like reshapes.
func shapeChain(t *testing.T) *graph.Module {
	b := graph.NewBuilder("main")
	x := b.Param("x", graph.TensorType(tensor.Float32, graph.Sym("b"), graph.Const(4)))
	s, _ := b.Op1(graph.OpShape, nil, x)
	g, _ := b.Op1(graph.OpGather, nil, s, b.Const("zero", tensor.Scalar(int64(0))))
	u, _ := b.Op1(graph.OpUnsqueeze, nil, g, b.Const("axes", i64s(0)))
	c, _ := b.Op1(graph.OpConcat, nil, u, b.Const("minus1", i64s(-1)))
	r, _ := b.Op1(graph.OpReshape, nil, x, c)
	y, err := b.Op1(graph.OpRelu, nil, r)
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.Module(y)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func run(t *testing.T, m *graph.Module, ctx *passes.Context) string {
	t.Helper()
	ctx.Check = true
	if err := passes.Level(0).Run(ctx, m); err != nil {
		t.Fatal(err)
	}
	return graph.Print(m)
}

func TestBindFoldDCE(t *testing.T) {
	got := run(t, shapeChain(t), &passes.Context{Dims: map[string]int64{"b": 3}, Eval: evalNode})
	want := `func @main(%x: f32[3,4]) {
  const %t4: i64[2]{3,-1} = [3, -1]
  %t5 = Reshape(%x, %t4) : f32[3,4]
  %t6 = Relu(%t5) : f32[3,4]
  return %t6
}`
	if !strings.Contains(got, want) {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

// TestSymbolicShapeExpr: without bound dims the Shape chain of a symbolic value becomes
// one kiln.ShapeExpr (evaluated from the input shapes at run time); dce removes the rest.
func TestSymbolicShapeExpr(t *testing.T) {
	got := run(t, shapeChain(t), &passes.Context{Eval: evalNode})
	want := `func @main(%x: f32[b,4]) {
  %t4 = ShapeExpr() {value=i64[2]{b,-1}} : i64[2]{b,-1}
  %t5 = Reshape(%x, %t4) : f32[b,4]
  %t6 = Relu(%t5) : f32[b,4]
  return %t6
}`
	if !strings.Contains(got, want) {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

// TestFoldCap: a constant expanded far beyond its inputs is not materialized.
func TestFoldCap(t *testing.T) {
	b := graph.NewBuilder("main")
	x := b.Param("x", graph.TensorType(tensor.Float32, graph.Const(1000), graph.Const(1000)))
	e, _ := b.Op1(graph.OpExpand, nil, b.Const("one", tensor.Scalar(float32(1))), b.Const("shape", i64s(1000, 1000)))
	y, _ := b.Op1(graph.OpAdd, nil, x, e)
	m, err := b.Module(y)
	if err != nil {
		t.Fatal(err)
	}
	got := run(t, m, &passes.Context{Eval: evalNode, FoldLimit: 1 << 16})
	if !strings.Contains(got, "Expand(") {
		t.Fatalf("Expand to 1e6 elements was folded:\n%s", got)
	}
}

// TestLoopBodyTypesBound: binding reaches a Loop body through its carried values.
func TestLoopBodyTypesBound(t *testing.T) {
	b := graph.NewBuilder("main")
	x := b.Param("x", graph.TensorType(tensor.Float32, graph.Sym("n"), graph.Const(2)))
	sb := b.Sub("body")
	sb.Param("i", graph.TensorType(tensor.Int64))
	cond := sb.Param("c", graph.TensorType(tensor.Bool))
	h := sb.Param("h", graph.TensorType(tensor.Float32, graph.Sym("n"), graph.Const(2)))
	h2, _ := sb.Op1(graph.OpTanh, nil, h)
	body := sb.Return(cond, h2)
	a := graph.OpLoop.NewAttrs().(*graph.LoopAttrs)
	a.Body = body
	outs, err := b.Node(graph.OpLoop, a, 1, b.Const("trip", tensor.Scalar(int64(3))), b.Const("go", tensor.Scalar(true)), x)
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.Module(outs...)
	if err != nil {
		t.Fatal(err)
	}
	got := run(t, m, &passes.Context{Dims: map[string]int64{"n": 5}, Eval: evalNode})
	if strings.Contains(got, "[n,") || !strings.Contains(got, "Tanh(%h) : f32[5,2]") {
		t.Fatalf("loop body not bound:\n%s", got)
	}
}

// TestLoopBodyTypesUnbound: with nothing bound, a carried value the model declares
// with fresh symbols takes the symbols of the loop's initial value.
func TestLoopBodyTypesUnbound(t *testing.T) {
	b := graph.NewBuilder("main")
	x := b.Param("x", graph.TensorType(tensor.Float32, graph.Sym("n"), graph.Const(2)))
	sb := b.Sub("body")
	sb.Param("i", graph.TensorType(tensor.Int64))
	cond := sb.Param("c", graph.TensorType(tensor.Bool))
	h := sb.Param("h", graph.TensorType(tensor.Float32, graph.Sym("h_dim_0"), graph.Sym("h_dim_1")))
	h2, _ := sb.Op1(graph.OpTanh, nil, h)
	body := sb.Return(cond, h2)
	a := graph.OpLoop.NewAttrs().(*graph.LoopAttrs)
	a.Body = body
	outs, err := b.Node(graph.OpLoop, a, 1, b.Const("trip", tensor.Scalar(int64(3))), b.Const("go", tensor.Scalar(true)), x)
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.Module(outs...)
	if err != nil {
		t.Fatal(err)
	}
	got := run(t, m, &passes.Context{Eval: evalNode})
	if strings.Contains(got, "h_dim") || !strings.Contains(got, "Tanh(%h) : f32[n,2]") {
		t.Fatalf("loop body keeps the declared fresh symbols:\n%s", got)
	}
}

// TestFoldRefinesTypes: a Reshape whose shape is computed by ops that inference cannot
// follow (ReduceProd of a Shape) gets a static type once its shape input folds.
func TestFoldRefinesTypes(t *testing.T) {
	b := graph.NewBuilder("main")
	x := b.Param("x", graph.TensorType(tensor.Float32, graph.Const(2), graph.Const(3), graph.Const(4)))
	s, _ := b.Op1(graph.OpShape, nil, x)
	p, _ := b.Op1(graph.OpReduceProd, nil, s, b.Const("axes", i64s(0)))
	r, err := b.Op1(graph.OpReshape, nil, x, p)
	if err != nil {
		t.Fatal(err)
	}
	if r.Type.IsStatic() {
		t.Skip("inference already follows ReduceProd of a shape; the test needs an op it cannot follow")
	}
	m, err := b.Module(r)
	if err != nil {
		t.Fatal(err)
	}
	got := run(t, m, &passes.Context{Eval: evalNode})
	if !strings.Contains(got, "Reshape(%x, %t2) : f32[24]") {
		t.Fatalf("Reshape not refined:\n%s", got)
	}
}
