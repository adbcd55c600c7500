package passes_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/graph/passes"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/tensor"
)

// optimize parses a module, runs O1's passes on it and returns its text.
func optimize(t *testing.T, src string) string {
	t.Helper()
	m, err := graph.Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := passes.Level(1).Without("fuse-ops").Run(&passes.Context{Eval: evalNode, Check: true}, m); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(graph.PrintFunc(m.Main))
}

// TestSimplifyCases: before/after text for each rule, with the cases that must not change.
func TestSimplifyCases(t *testing.T) {
	cases := []struct{ name, before, after string }{
		{"identity and dropout go",
			`func @main(%x: f32[2,3]) {
  %a = Identity(%x) : f32[2,3]
  %b = Dropout(%a) : f32[2,3]
  %c = Relu(%b) : f32[2,3]
  return %c
}`, `func @main(%x: f32[2,3]) {
  %c = Relu(%x) : f32[2,3]
  return %c
}`},
		{"a result keeps its identity",
			`func @main(%x: f32[2,3]) {
  %a = Identity(%x) : f32[2,3]
  return %a
}`, `func @main(%x: f32[2,3]) {
  %a = Identity(%x) : f32[2,3]
  return %a
}`},
		{"cast to the same type and reshape to the same shape go, others stay",
			`func @main(%x: f32[2,3]) {
  const %s: i64[2] = [2, 3]
  const %t: i64[1] = [6]
  %a = Cast(%x) {to=1} : f32[2,3]
  %b = Reshape(%a, %s) : f32[2,3]
  %c = Reshape(%b, %t) : f32[6]
  %d = Cast(%c) {to=11} : f64[6]
  return %d
}`, `func @main(%x: f32[2,3]) {
  const %t: i64[1] = [6]
  %c = Reshape(%x, %t) : f32[6]
  %d = Cast(%c) {to=11} : f64[6]
  return %d
}`},
		{"cse merges equal nodes, not different attributes",
			`func @main(%x: f32[2,3]) {
  %a = Relu(%x) : f32[2,3]
  %b = Relu(%x) : f32[2,3]
  %c = Softmax(%x) {axis=0} : f32[2,3]
  %d = Softmax(%x) : f32[2,3]
  %e = Add(%a, %b) : f32[2,3]
  %f = Add(%c, %d) : f32[2,3]
  %g = Add(%e, %f) : f32[2,3]
  return %g
}`, `func @main(%x: f32[2,3]) {
  %a = Relu(%x) : f32[2,3]
  %c = Softmax(%x) {axis=0} : f32[2,3]
  %d = Softmax(%x) : f32[2,3]
  %e = Add(%a, %a) : f32[2,3]
  %f = Add(%c, %d) : f32[2,3]
  %g = Add(%e, %f) : f32[2,3]
  return %g
}`},
	}
	for _, c := range cases {
		got := optimize(t, `module opsets(""=17)`+"\n"+c.before)
		if got != c.after {
			t.Errorf("%s:\ngot\n%s\nwant\n%s", c.name, got, c.after)
		}
	}
}

// TestSimplifyNeutral: x+0 and 1·x are bypassed; a +0 that broadcasts its other operand
// to a larger shape is not.
func TestSimplifyNeutral(t *testing.T) {
	got := optimize(t, `module opsets(""=17)
func @main(%x: f32[2,3], %y: f32[3]) {
  const %z: f32[3] = [0, 0, 0]
  const %zz: f32[2,3] = [0, 0, 0, 0, 0, 0]
  const %one: f32[] = [1]
  %a = Add(%x, %z) : f32[2,3]
  %b = Mul(%one, %a) : f32[2,3]
  %c = Add(%y, %zz) : f32[2,3]
  %d = Add(%b, %c) : f32[2,3]
  return %d
}`)
	want := `func @main(%x: f32[2,3], %y: f32[3]) {
  const %zz: f32[2,3] = [0, 0, 0, 0, 0, 0]
  %c = Add(%y, %zz) : f32[2,3]
  %d = Add(%x, %c) : f32[2,3]
  return %d
}`
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

// TestLevelsObeyConstraints: every named pipeline satisfies the ordering rules, and a
// pipeline that breaks one is refused with the reason.
func TestLevelsObeyConstraints(t *testing.T) {
	for o := 0; o <= 3; o++ {
		if err := passes.Level(o).Check(); err != nil {
			t.Fatalf("O%d: %v", o, err)
		}
	}
	bad := passes.Pipeline{{Name: "dce", Run: passes.DCE}, {Name: "simplify", Run: passes.Simplify}}
	if err := bad.Check(); err == nil || !strings.Contains(err.Error(), "simplify must run before dce") {
		t.Fatalf("misordered pipeline: %v", err)
	}
	names := func(p passes.Pipeline) string {
		var s []string
		for _, pass := range p {
			s = append(s, pass.Name)
		}
		return strings.Join(s, ",")
	}
	if got := names(passes.Level(0)); got != "bind-dims,widen-half,fold-constants,stub-branches,split-to-slices,dce,annotate-scopes" {
		t.Fatalf("O0 is %s", got)
	}
	o3 := names(passes.Level(3))
	for _, want := range []string{"simplify", "fold-batchnorm", "alter-layout", "fuse-ops"} {
		if !strings.Contains(o3, want) {
			t.Fatalf("O3 (%s) lacks %s", o3, want)
		}
	}
}

// TestFoldBatchNorm: Conv → BatchNormalization becomes one Conv with scaled weights and a
// bias, computing the same values; after a Conv whose result has another reader the BN
// becomes x·s + t, computing the same values too.
func TestFoldBatchNorm(t *testing.T) {
	build := func(extraReader bool) *graph.Module {
		b := graph.NewBuilder("main")
		x := b.Param("x", graph.TensorType(tensor.Float32, graph.StaticShape(1, 3, 5, 5)...))
		ca := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
		ca.KernelShape, ca.Pads = []int64{3, 3}, []int64{1, 1, 1, 1}
		c, _ := b.Op1(graph.OpConv, ca, x, b.Const("w", rnd(1, 4, 3, 3, 3)), b.Const("b", rnd(2, 4)))
		scale, shift, mean := b.Const("s", rnd(3, 4)), b.Const("sh", rnd(4, 4)), b.Const("m", rnd(5, 4))
		v := b.Const("v", tensor.FromFloat64s(tensor.Float32, tensor.Shape{4}, []float64{0.5, 1, 2, 3}))
		y, _ := b.Op1(graph.OpBatchNormalization, nil, c, scale, shift, mean, v)
		outs := []*graph.Value{y}
		if extraReader {
			r, _ := b.Op1(graph.OpRelu, nil, c)
			outs = append(outs, r)
		}
		m, err := b.Module(outs...)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	in := map[string]ref.Value{"x": rnd(9, 1, 3, 5, 5)}
	for _, extra := range []bool{false, true} {
		m := build(extra)
		want, err := ref.Eval(m, in, ref.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := passes.Level(1).Without("fuse-ops").Run(&passes.Context{Eval: evalNode, Check: true}, m); err != nil {
			t.Fatal(err)
		}
		text := graph.PrintFunc(m.Main)
		if strings.Contains(text, "BatchNormalization") {
			t.Fatalf("extra reader %v: BatchNormalization left:\n%s", extra, text)
		}
		if affine := strings.Contains(text, "Mul("); affine != extra {
			t.Fatalf("extra reader %v: BatchNormalization as x·s + t = %v:\n%s", extra, affine, text)
		}
		got, err := ref.Eval(m, in, ref.Options{})
		if err != nil {
			t.Fatal(err)
		}
		g, w := got[0].(*tensor.Tensor).Float64s(), want[0].(*tensor.Tensor).Float64s()
		for i := range w {
			if d := g[i] - w[i]; d > 1e-5 || d < -1e-5 {
				t.Fatalf("element %d: %v after folding, %v before", i, g[i], w[i])
			}
		}
	}
}

func rnd(seed uint64, shape ...int) *tensor.Tensor {
	r := rand.New(rand.NewPCG(seed, 7))
	v := make([]float32, tensor.Shape(shape).NumElements())
	for i := range v {
		v[i] = r.Float32()*2 - 1
	}
	return tensor.MustFromSlice(tensor.Shape(shape), v)
}
