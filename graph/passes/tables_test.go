package passes_test

import (
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/graph/passes"
	"github.com/kilnrt/kiln/tensor"
)

// textCase is one before/after pair of IR text (the func only; the module line is added).
type textCase struct{ name, before, after string }

// runTable parses each case's before text, runs the pipeline on it with a copy of ctx
// (Check set) and compares the printed main function with the after text.
func runTable(t *testing.T, p passes.Pipeline, ctx passes.Context, cases []textCase) {
	t.Helper()
	for _, c := range cases {
		m, err := graph.Parse(`module opsets(""=17)` + "\n" + c.before)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		cx := ctx
		cx.Check = true
		if err := p.Run(&cx, m); err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got := strings.TrimSpace(graph.PrintFunc(m.Main)); got != c.after {
			t.Errorf("%s:\ngot\n%s\nwant\n%s", c.name, got, c.after)
		}
	}
}

// pass picks one pass of the O3 pipeline by name, to run it alone.
func pass(t *testing.T, name string) passes.Pass {
	t.Helper()
	for _, p := range passes.Level(3) {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no pass %q in Level(3)", name)
	return passes.Pass{}
}

// TestBindDimsCases: bind-dims alone.
func TestBindDimsCases(t *testing.T) {
	p := passes.Pipeline{pass(t, "bind-dims")}
	runTable(t, p, passes.Context{Dims: map[string]int64{"b": 3}}, []textCase{
		{"a bound symbol becomes its value downstream, others stay", `func @main(%x: f32[b,4], %y: f32[4,n]) {
  %a = Relu(%x) : f32[b,4]
  %c = MatMul(%a, %y) : f32[b,n]
  %s = Shape(%c) : i64[2]{b,n}
  return %c, %s
}`, `func @main(%x: f32[3,4], %y: f32[4,n]) {
  %a = Relu(%x) : f32[3,4]
  %c = MatMul(%a, %y) : f32[3,n]
  %s = Shape(%c) : i64[2]{3,n}
  return %c, %s
}`},
		{"a module without the symbol is unchanged", `func @main(%x: f32[n,4]) {
  %a = Relu(%x) : f32[n,4]
  return %a
}`, `func @main(%x: f32[n,4]) {
  %a = Relu(%x) : f32[n,4]
  return %a
}`},
	})
	runTable(t, p, passes.Context{}, []textCase{
		{"no Dims: nothing is bound", `func @main(%x: f32[b,4]) {
  %a = Relu(%x) : f32[b,4]
  return %a
}`, `func @main(%x: f32[b,4]) {
  %a = Relu(%x) : f32[b,4]
  return %a
}`},
	})
}

// TestFoldConstantsCases: fold-constants alone (dce has not run: the inputs of a folded
// node stay as constants).
func TestFoldConstantsCases(t *testing.T) {
	p := passes.Pipeline{pass(t, "fold-constants")}
	runTable(t, p, passes.Context{Eval: evalNode}, []textCase{
		{"a constant subgraph folds, a node reading a parameter stays", `func @main(%x: f32[2]) {
  const %a: f32[2] = [1, 2]
  const %b: f32[2] = [3, 4]
  %c = Add(%a, %b) : f32[2]
  %d = Neg(%c) : f32[2]
  %e = Mul(%d, %x) : f32[2]
  return %e
}`, `func @main(%x: f32[2]) {
  const %a: f32[2] = [1, 2]
  const %b: f32[2] = [3, 4]
  const %c: f32[2] = [4, 6]
  const %d: f32[2] = [-4, -6]
  %e = Mul(%d, %x) : f32[2]
  return %e
}`},
		{"shape arithmetic over static dims folds to a constant", `func @main(%x: f32[3,4]) {
  const %zero: i64[]{0} = [0]
  const %axes: i64[1]{0} = [0]
  const %minus1: i64[1]{-1} = [-1]
  %t1 = Shape(%x) : i64[2]{3,4}
  %t2 = Gather(%t1, %zero) : i64[]{3}
  %t3 = Unsqueeze(%t2, %axes) : i64[1]{3}
  %t4 = Concat(%t3, %minus1) : i64[2]{3,-1}
  %t5 = Reshape(%x, %t4) : f32[3,4]
  %t6 = Relu(%t5) : f32[3,4]
  return %t6
}`, `func @main(%x: f32[3,4]) {
  const %zero: i64[]{0} = [0]
  const %axes: i64[1]{0} = [0]
  const %minus1: i64[1]{-1} = [-1]
  const %t1: i64[2]{3,4} = [3, 4]
  const %t2: i64[]{3} = [3]
  const %t3: i64[1]{3} = [3]
  const %t4: i64[2]{3,-1} = [3, -1]
  %t5 = Reshape(%x, %t4) : f32[3,4]
  %t6 = Relu(%t5) : f32[3,4]
  return %t6
}`},
		{"shape arithmetic over a symbolic dim becomes shape expressions; a known static element folds", `func @main(%x: f32[b,4]) {
  const %zero: i64[]{0} = [0]
  const %one: i64[]{1} = [1]
  const %axes: i64[1]{0} = [0]
  const %minus1: i64[1]{-1} = [-1]
  %t1 = Shape(%x) : i64[2]{b,4}
  %t2 = Gather(%t1, %zero) : i64[]{b}
  %w = Gather(%t1, %one) : i64[]{4}
  %t3 = Unsqueeze(%t2, %axes) : i64[1]{b}
  %t4 = Concat(%t3, %minus1) : i64[2]{b,-1}
  %t5 = Reshape(%x, %t4) : f32[b,4]
  %t6 = Relu(%t5) : f32[b,4]
  return %t6, %w
}`, `func @main(%x: f32[b,4]) {
  const %zero: i64[]{0} = [0]
  const %one: i64[]{1} = [1]
  const %axes: i64[1]{0} = [0]
  const %minus1: i64[1]{-1} = [-1]
  const %w: i64[]{4} = [4]
  %t1 = ShapeExpr() {value=i64[2]{b,4}} : i64[2]{b,4}
  %t2 = ShapeExpr() {value=i64[]{b}} : i64[]{b}
  %t3 = ShapeExpr() {value=i64[1]{b}} : i64[1]{b}
  %t4 = ShapeExpr() {value=i64[2]{b,-1}} : i64[2]{b,-1}
  %t5 = Reshape(%x, %t4) : f32[b,4]
  %t6 = Relu(%t5) : f32[b,4]
  return %t6, %w
}`},
	})
	runTable(t, p, passes.Context{Eval: evalNode, FoldLimit: 4}, []textCase{
		{"a result over FoldLimit and larger than its inputs stays; one no larger than its inputs folds", `func @main(%x: f32[2,3]) {
  const %one: f32[] = [1]
  const %shape: i64[2] = [2, 3]
  const %a: f32[2,3] = [1, 2, 3, 4, 5, 6]
  %e = Expand(%one, %shape) : f32[2,3]
  %n = Neg(%a) : f32[2,3]
  %s = Add(%e, %n) : f32[2,3]
  %y = Add(%x, %s) : f32[2,3]
  return %y
}`, `func @main(%x: f32[2,3]) {
  const %one: f32[] = [1]
  const %shape: i64[2] = [2, 3]
  const %a: f32[2,3] = [1, 2, 3, 4, 5, 6]
  const %n: f32[2,3] = [-1, -2, -3, -4, -5, -6]
  %e = Expand(%one, %shape) : f32[2,3]
  %s = Add(%e, %n) : f32[2,3]
  %y = Add(%x, %s) : f32[2,3]
  return %y
}`},
	})
	runTable(t, p, passes.Context{}, []textCase{
		{"without Context.Eval nothing folds", `func @main(%x: f32[2]) {
  const %a: f32[2] = [1, 2]
  %c = Neg(%a) : f32[2]
  %e = Mul(%c, %x) : f32[2]
  return %e
}`, `func @main(%x: f32[2]) {
  const %a: f32[2] = [1, 2]
  %c = Neg(%a) : f32[2]
  %e = Mul(%c, %x) : f32[2]
  return %e
}`},
	})
}

// TestCSECases: cse alone (the duplicates stay, unread, for dce).
func TestCSECases(t *testing.T) {
	runTable(t, passes.Pipeline{pass(t, "cse")}, passes.Context{}, []textCase{
		{"duplicates merge; different attributes or inputs do not", `func @main(%x: f32[2,3], %y: f32[2,3]) {
  %a = Relu(%x) : f32[2,3]
  %b = Relu(%x) : f32[2,3]
  %c = Relu(%y) : f32[2,3]
  %d = Softmax(%x) {axis=0} : f32[2,3]
  %e = Softmax(%x) : f32[2,3]
  %f = Add(%a, %b) : f32[2,3]
  %g = Add(%c, %d) : f32[2,3]
  %h = Add(%f, %g) : f32[2,3]
  %i = Add(%h, %e) : f32[2,3]
  return %i
}`, `func @main(%x: f32[2,3], %y: f32[2,3]) {
  %a = Relu(%x) : f32[2,3]
  %b = Relu(%x) : f32[2,3]
  %c = Relu(%y) : f32[2,3]
  %d = Softmax(%x) {axis=0} : f32[2,3]
  %e = Softmax(%x) : f32[2,3]
  %f = Add(%a, %a) : f32[2,3]
  %g = Add(%c, %d) : f32[2,3]
  %h = Add(%f, %g) : f32[2,3]
  %i = Add(%h, %e) : f32[2,3]
  return %i
}`},
		{"merging cascades: readers of merged values become duplicates too", `func @main(%x: f32[2,3]) {
  %a = Relu(%x) : f32[2,3]
  %b = Relu(%x) : f32[2,3]
  %c = Neg(%a) : f32[2,3]
  %d = Neg(%b) : f32[2,3]
  %e = Add(%c, %d) : f32[2,3]
  return %e
}`, `func @main(%x: f32[2,3]) {
  %a = Relu(%x) : f32[2,3]
  %b = Relu(%x) : f32[2,3]
  %c = Neg(%a) : f32[2,3]
  %d = Neg(%a) : f32[2,3]
  %e = Add(%c, %c) : f32[2,3]
  return %e
}`},
		{"outputs of fresh symbols stay apart (their readers are typed with them); equal types merge", `func @main(%x: f32[5]) {
  %a = NonZero(%x) : i64[1,n1]
  %b = NonZero(%x) : i64[1,n2]
  %c = NonZero(%x) : i64[1,n1]
  %d = Transpose(%a) {perm=[1,0]} : i64[n1,1]
  %e = Transpose(%b) {perm=[1,0]} : i64[n2,1]
  %f = Transpose(%c) {perm=[1,0]} : i64[n1,1]
  %g = Concat(%d, %e, %f) {axis=0} : i64[2*n1+n2,1]
  return %g
}`, `func @main(%x: f32[5]) {
  %a = NonZero(%x) : i64[1,n1]
  %b = NonZero(%x) : i64[1,n2]
  %c = NonZero(%x) : i64[1,n1]
  %d = Transpose(%a) {perm=[1,0]} : i64[n1,1]
  %e = Transpose(%b) {perm=[1,0]} : i64[n2,1]
  %f = Transpose(%a) {perm=[1,0]} : i64[n1,1]
  %g = Concat(%d, %e, %d) : i64[2*n1+n2,1]
  return %g
}`},
		{"a duplicate that is a result keeps its node", `func @main(%x: f32[2,3]) {
  %a = Relu(%x) : f32[2,3]
  %b = Relu(%x) : f32[2,3]
  return %a, %b
}`, `func @main(%x: f32[2,3]) {
  %a = Relu(%x) : f32[2,3]
  %b = Relu(%x) : f32[2,3]
  return %a, %b
}`},
	})
}

// TestDCECases: dce alone.
func TestDCECases(t *testing.T) {
	runTable(t, passes.Pipeline{pass(t, "dce")}, passes.Context{}, []textCase{
		{"unread nodes and constants go, transitively; what feeds a result stays", `func @main(%x: f32[2]) {
  const %k: f32[2] = [1, 2]
  const %u: f32[2] = [3, 4]
  %a = Add(%x, %k) : f32[2]
  %b = Mul(%a, %u) : f32[2]
  %c = Neg(%b) : f32[2]
  %d = Relu(%a) : f32[2]
  return %d
}`, `func @main(%x: f32[2]) {
  const %k: f32[2] = [1, 2]
  %a = Add(%x, %k) : f32[2]
  %d = Relu(%a) : f32[2]
  return %d
}`},
		{"a node with one read output of several stays", `func @main(%x: f32[4]) {
  const %sp: i64[2] = [2, 2]
  %a, %b = Split(%x, %sp) : f32[2], f32[2]
  return %b
}`, `func @main(%x: f32[4]) {
  const %sp: i64[2] = [2, 2]
  %a, %b = Split(%x, %sp) : f32[2], f32[2]
  return %b
}`},
	})
}

// TestFoldBatchNormCases: fold-batchnorm alone (the Conv's old weights stay for dce).
// scale/√var = [1, 3] with epsilon 0, so W' = W·[1, 3] per output channel and
// B' = (b − mean)·[1, 3] + shift; a BatchNormalization that cannot fold becomes
// x·[1, 3] + (shift − mean·[1, 3]) = x·[1, 3] + [−0.5, 1].
func TestFoldBatchNormCases(t *testing.T) {
	const consts = `  const %w: f32[2,1,1,1] = [1, 2]
  const %b: f32[2] = [0.5, 1]
  const %scale: f32[2] = [2, 3]
  const %shift: f32[2] = [0, 1]
  const %mean: f32[2] = [0.5, 0]
  const %var: f32[2] = [4, 1]
`
	const affine = `  const %y_bn_scale: f32[2,1,1] = [1, 3]
  const %y_bn_shift: f32[2,1,1] = [-0.5, 1]
`
	runTable(t, passes.Pipeline{pass(t, "fold-batchnorm")}, passes.Context{}, []textCase{
		{"a BatchNormalization after a Conv with constant weights folds", `func @main(%x: f32[1,1,2,2]) {
` + consts + `  %c = Conv(%x, %w, %b) {kernel_shape=[1,1]} : f32[1,2,2,2]
  %y = BatchNormalization(%c, %scale, %shift, %mean, %var) {epsilon=0} : f32[1,2,2,2]
  return %y
}`, `func @main(%x: f32[1,1,2,2]) {
` + consts + `  const %w_bn: f32[2,1,1,1] = [1, 6]
  const %y_bias: f32[2] = [0, 4]
  %y = Conv(%x, %w_bn, %y_bias) {kernel_shape=[1,1]} : f32[1,2,2,2]
  return %y
}`},
		{"the Conv output has another reader: no fold, an affine Mul and Add", `func @main(%x: f32[1,1,2,2]) {
` + consts + `  %c = Conv(%x, %w, %b) {kernel_shape=[1,1]} : f32[1,2,2,2]
  %y = BatchNormalization(%c, %scale, %shift, %mean, %var) {epsilon=0} : f32[1,2,2,2]
  %r = Relu(%c) : f32[1,2,2,2]
  return %y, %r
}`, `func @main(%x: f32[1,1,2,2]) {
` + consts + affine + `  %c = Conv(%x, %w, %b) {kernel_shape=[1,1]} : f32[1,2,2,2]
  %y_scaled = Mul(%c, %y_bn_scale) : f32[1,2,2,2]
  %y = Add(%y_scaled, %y_bn_shift) : f32[1,2,2,2]
  %r = Relu(%c) : f32[1,2,2,2]
  return %y, %r
}`},
		{"weights that are not constants: no fold, an affine Mul and Add", `func @main(%x: f32[1,1,2,2], %wp: f32[2,1,1,1]) {
` + consts + `  %c = Conv(%x, %wp, %b) {kernel_shape=[1,1]} : f32[1,2,2,2]
  %y = BatchNormalization(%c, %scale, %shift, %mean, %var) {epsilon=0} : f32[1,2,2,2]
  return %y
}`, `func @main(%x: f32[1,1,2,2], %wp: f32[2,1,1,1]) {
` + consts + affine + `  %c = Conv(%x, %wp, %b) {kernel_shape=[1,1]} : f32[1,2,2,2]
  %y_scaled = Mul(%c, %y_bn_scale) : f32[1,2,2,2]
  %y = Add(%y_scaled, %y_bn_shift) : f32[1,2,2,2]
  return %y
}`},
		{"parameters that are not constants stay a BatchNormalization", `func @main(%x: f32[1,2,2,2], %sp: f32[2]) {
` + consts + `  %y = BatchNormalization(%x, %sp, %shift, %mean, %var) {epsilon=0} : f32[1,2,2,2]
  return %y
}`, `func @main(%x: f32[1,2,2,2], %sp: f32[2]) {
` + consts + `  %y = BatchNormalization(%x, %sp, %shift, %mean, %var) {epsilon=0} : f32[1,2,2,2]
  return %y
}`},
		{"training mode: no fold", `func @main(%x: f32[1,1,2,2]) {
` + consts + `  %c = Conv(%x, %w, %b) {kernel_shape=[1,1]} : f32[1,2,2,2]
  %y = BatchNormalization(%c, %scale, %shift, %mean, %var) {epsilon=0, training_mode=1} : f32[1,2,2,2]
  return %y
}`, `func @main(%x: f32[1,1,2,2]) {
` + consts + `  %c = Conv(%x, %w, %b) {kernel_shape=[1,1]} : f32[1,2,2,2]
  %y = BatchNormalization(%c, %scale, %shift, %mean, %var) {epsilon=0, training_mode=1} : f32[1,2,2,2]
  return %y
}`},
	})
}

// TestCSERandomOpsStay: two random nodes of the same input are never merged. No op in
// the table is Stochastic yet and the random ops have no table row (so the verifier and
// the text form refuse them): the module is built by hand and cse runs on it directly.
func TestCSERandomOpsStay(t *testing.T) {
	x := &graph.Value{Name: "x", Type: graph.TensorType(tensor.Float32, graph.StaticShape(2)...)}
	node := func(op graph.Op, name string, in ...*graph.Value) *graph.Value {
		out := &graph.Value{Name: name, Type: x.Type}
		out.Def = &graph.Node{Op: op, Inputs: in, Outputs: []*graph.Value{out}}
		return out
	}
	r1 := node(graph.OpRandomUniformLike, "r1", x)
	r2 := node(graph.OpRandomUniformLike, "r2", x)
	s := node(graph.OpAdd, "s", r1, r2)
	f := &graph.Func{Name: "main", Params: []*graph.Value{x}, Nodes: []*graph.Node{r1.Def, r2.Def, s.Def}, Results: []*graph.Value{s}}
	if err := passes.CSE(&passes.Context{}, &graph.Module{Main: f}); err != nil {
		t.Fatal(err)
	}
	if s.Def.Inputs[0] != r1 || s.Def.Inputs[1] != r2 {
		t.Fatalf("random nodes were merged:\n%s", graph.PrintFunc(f))
	}
}
