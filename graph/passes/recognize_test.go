package passes_test

import (
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/graph/passes"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/tensor"
)

// recognizeCase is one before/after pair; an empty after means "unchanged".
type recognizeCase struct{ name, before, after string }

// recognizeRun parses src, runs recognize then dce (with Verify after each) and returns
// the main function's text.
func recognizeRun(t *testing.T, src string) (*graph.Module, string) {
	t.Helper()
	m, err := graph.Parse(`module opsets(""=13)` + "\n" + src)
	if err != nil {
		t.Fatal(err)
	}
	p := passes.Pipeline{{Name: "recognize", Run: passes.Recognize}, {Name: "dce", Run: passes.DCE}}
	if err := p.Run(&passes.Context{Check: true}, m); err != nil {
		t.Fatal(err)
	}
	return m, strings.TrimSpace(graph.PrintFunc(m.Main))
}

// LayerNorm as PyTorch exports it below opset 17; %x is f32[2,3,4].
const lnBody = `  %m = ReduceMean(%x, %ax) : f32[2,3,1]
  %d = Sub(%x, %m) : f32[2,3,4]
  %p = Pow(%d, %two) : f32[2,3,4]
  %v = ReduceMean(%p, %ax) : f32[2,3,1]
  %a = Add(%v, %eps) : f32[2,3,1]
  %s = Sqrt(%a) : f32[2,3,1]
  %y = Div(%d, %s) : f32[2,3,4]
`

const lnConsts = `  const %ax: i64[1] = [-1]
  const %two: f32[] = [2]
  const %eps: f32[] = [1e-05]
`

var layerNormCases = []recognizeCase{
	{"layernorm without gamma/beta (GPT-2)",
		`func @main(%x: f32[2,3,4]) {
` + lnConsts + lnBody + `  return %y
}`, `func @main(%x: f32[2,3,4]) {
  const %y_ln_scale: f32[4] = [1, 1, 1, 1]
  %y = LayerNormalization(%x, %y_ln_scale) : f32[2,3,4]
  return %y
}`},
	{"layernorm with d·d, a positive axis, ε first, γ·y and y+β",
		`func @main(%x: f32[2,3,4]) {
  const %ax: i64[1] = [2]
  const %eps: f32[] = [1e-12]
  const %g: f32[4] = [1, 2, 3, 4]
  const %b: f32[4] = [0.5, 0, -0.5, 1]
  %m = ReduceMean(%x, %ax) : f32[2,3,1]
  %d = Sub(%x, %m) : f32[2,3,4]
  %p = Mul(%d, %d) : f32[2,3,4]
  %v = ReduceMean(%p, %ax) : f32[2,3,1]
  %a = Add(%eps, %v) : f32[2,3,1]
  %s = Sqrt(%a) : f32[2,3,1]
  %n = Div(%d, %s) : f32[2,3,4]
  %sc = Mul(%g, %n) : f32[2,3,4]
  %y = Add(%sc, %b) : f32[2,3,4]
  %z = Relu(%y) : f32[2,3,4]
  return %z
}`, `func @main(%x: f32[2,3,4]) {
  const %g: f32[4] = [1, 2, 3, 4]
  const %b: f32[4] = [0.5, 0, -0.5, 1]
  %y = LayerNormalization(%x, %g, %b) {epsilon=1e-12} : f32[2,3,4]
  %z = Relu(%y) : f32[2,3,4]
  return %z
}`},
	{"layernorm with γ only; a reader dce removes does not count",
		`func @main(%x: f32[2,3,4]) {
` + lnConsts + `  const %g: f32[4] = [1, 2, 3, 4]
` + lnBody + `  %dead = Relu(%d) : f32[2,3,4]
  %z = Mul(%y, %g) : f32[2,3,4]
  return %z
}`, `func @main(%x: f32[2,3,4]) {
  const %g: f32[4] = [1, 2, 3, 4]
  %z = LayerNormalization(%x, %g) : f32[2,3,4]
  return %z
}`},
	{"layernorm: an intermediate with a second reader stays",
		`func @main(%x: f32[2,3,4]) {
` + lnConsts + lnBody + `  %z = Add(%y, %d) : f32[2,3,4]
  return %z
}`, ""},
	{"layernorm: an intermediate that is a result stays",
		`func @main(%x: f32[2,3,4]) {
` + lnConsts + lnBody + `  return %y, %v
}`, ""},
	{"layernorm: ε added after the Sqrt stays",
		`func @main(%x: f32[2,3,4]) {
` + lnConsts + `  %m = ReduceMean(%x, %ax) : f32[2,3,1]
  %d = Sub(%x, %m) : f32[2,3,4]
  %p = Pow(%d, %two) : f32[2,3,4]
  %v = ReduceMean(%p, %ax) : f32[2,3,1]
  %s = Sqrt(%v) : f32[2,3,1]
  %a = Add(%s, %eps) : f32[2,3,1]
  %y = Div(%d, %a) : f32[2,3,4]
  return %y
}`, ""},
	{"layernorm over a non-last axis stays",
		`func @main(%x: f32[2,3,4]) {
  const %ax: i64[1] = [1]
  const %two: f32[] = [2]
  const %eps: f32[] = [1e-05]
  %m = ReduceMean(%x, %ax) : f32[2,1,4]
  %d = Sub(%x, %m) : f32[2,3,4]
  %p = Pow(%d, %two) : f32[2,3,4]
  %v = ReduceMean(%p, %ax) : f32[2,1,4]
  %a = Add(%v, %eps) : f32[2,1,4]
  %s = Sqrt(%a) : f32[2,1,4]
  %y = Div(%d, %s) : f32[2,3,4]
  return %y
}`, ""},
	{"layernorm with a cube instead of a square stays",
		`func @main(%x: f32[2,3,4]) {
  const %ax: i64[1] = [-1]
  const %two: f32[] = [3]
  const %eps: f32[] = [1e-05]
` + lnBody + `  return %y
}`, ""},
}

// GELU, h is f32[2,5].
var geluCases = []recognizeCase{
	{"gelu erf as BERT exports it",
		`func @main(%h: f32[2,5]) {
  const %sqrt2: f32[] = [1.4142135]
  const %one: f32[] = [1]
  const %half: f32[] = [0.5]
  %d = Div(%h, %sqrt2) : f32[2,5]
  %e = Erf(%d) : f32[2,5]
  %a = Add(%e, %one) : f32[2,5]
  %m = Mul(%h, %a) : f32[2,5]
  %y = Mul(%m, %half) : f32[2,5]
  return %y
}`, `func @main(%h: f32[2,5]) {
  %y = Gelu(%h) : f32[2,5]
  return %y
}`},
	{"gelu erf with x·(1/√2) and 0.5 applied to x first (TF)",
		`func @main(%h: f32[2,5]) {
  const %rsqrt2: f32[] = [0.70710677]
  const %one: f32[] = [1]
  const %half: f32[] = [0.5]
  %hh = Mul(%half, %h) : f32[2,5]
  %d = Mul(%h, %rsqrt2) : f32[2,5]
  %e = Erf(%d) : f32[2,5]
  %a = Add(%one, %e) : f32[2,5]
  %y = Mul(%hh, %a) : f32[2,5]
  return %y
}`, `func @main(%h: f32[2,5]) {
  %y = Gelu(%h) : f32[2,5]
  return %y
}`},
	{"gelu erf as x·(0.5·(1 + erf))",
		`func @main(%h: f32[2,5]) {
  const %sqrt2: f32[] = [1.4142135]
  const %one: f32[] = [1]
  const %half: f32[] = [0.5]
  %d = Div(%h, %sqrt2) : f32[2,5]
  %e = Erf(%d) : f32[2,5]
  %a = Add(%e, %one) : f32[2,5]
  %m = Mul(%a, %half) : f32[2,5]
  %y = Mul(%h, %m) : f32[2,5]
  return %y
}`, `func @main(%h: f32[2,5]) {
  %y = Gelu(%h) : f32[2,5]
  return %y
}`},
	{"gelu tanh as GPT-2 exports it",
		`func @main(%h: f32[2,5]) {
  const %c0_044715: f32[] = [0.044715]
  const %c0_7978846: f32[] = [0.7978846]
  const %c1: f32[] = [1]
  const %c0_5: f32[] = [0.5]
  %m = Mul(%h, %h) : f32[2,5]
  %m1 = Mul(%h, %m) : f32[2,5]
  %m2 = Mul(%c0_044715, %m1) : f32[2,5]
  %a1 = Add(%h, %m2) : f32[2,5]
  %m3 = Mul(%c0_7978846, %a1) : f32[2,5]
  %t = Tanh(%m3) : f32[2,5]
  %a2 = Add(%c1, %t) : f32[2,5]
  %m4 = Mul(%h, %a2) : f32[2,5]
  %m5 = Mul(%c0_5, %m4) : f32[2,5]
  return %m5
}`, `func @main(%h: f32[2,5]) {
  %m5 = Gelu(%h) {approximate="tanh"} : f32[2,5]
  return %m5
}`},
	{"gelu tanh with Pow(x, 3) (gelu_new)",
		`func @main(%h: f32[2,5]) {
  const %three: f32[] = [3]
  const %c0_044715: f32[] = [0.044715]
  const %c0_7978846: f32[] = [0.7978846]
  const %c1: f32[] = [1]
  const %c0_5: f32[] = [0.5]
  %hh = Mul(%c0_5, %h) : f32[2,5]
  %p = Pow(%h, %three) : f32[2,5]
  %m2 = Mul(%c0_044715, %p) : f32[2,5]
  %a1 = Add(%m2, %h) : f32[2,5]
  %m3 = Mul(%a1, %c0_7978846) : f32[2,5]
  %t = Tanh(%m3) : f32[2,5]
  %a2 = Add(%t, %c1) : f32[2,5]
  %y = Mul(%hh, %a2) : f32[2,5]
  return %y
}`, `func @main(%h: f32[2,5]) {
  %y = Gelu(%h) {approximate="tanh"} : f32[2,5]
  return %y
}`},
	{"gelu with 0.6 instead of 0.5 stays",
		`func @main(%h: f32[2,5]) {
  const %sqrt2: f32[] = [1.4142135]
  const %one: f32[] = [1]
  const %half: f32[] = [0.6]
  %d = Div(%h, %sqrt2) : f32[2,5]
  %e = Erf(%d) : f32[2,5]
  %a = Add(%e, %one) : f32[2,5]
  %m = Mul(%h, %a) : f32[2,5]
  %y = Mul(%m, %half) : f32[2,5]
  return %y
}`, ""},
	{"gelu with 1.414 for √2 stays",
		`func @main(%h: f32[2,5]) {
  const %sqrt2: f32[] = [1.414]
  const %one: f32[] = [1]
  const %half: f32[] = [0.5]
  %d = Div(%h, %sqrt2) : f32[2,5]
  %e = Erf(%d) : f32[2,5]
  %a = Add(%e, %one) : f32[2,5]
  %m = Mul(%h, %a) : f32[2,5]
  %y = Mul(%m, %half) : f32[2,5]
  return %y
}`, ""},
	{"gelu whose Erf is read twice stays",
		`func @main(%h: f32[2,5]) {
  const %sqrt2: f32[] = [1.4142135]
  const %one: f32[] = [1]
  const %half: f32[] = [0.5]
  %d = Div(%h, %sqrt2) : f32[2,5]
  %e = Erf(%d) : f32[2,5]
  %a = Add(%e, %one) : f32[2,5]
  %m = Mul(%h, %a) : f32[2,5]
  %y = Mul(%m, %half) : f32[2,5]
  %z = Add(%y, %e) : f32[2,5]
  return %z
}`, ""},
	{"gelu split between a Func and its subgraph stays",
		`func @main(%h: f32[2,5], %c: bool[]) {
  const %sqrt2: f32[] = [1.4142135]
  const %one: f32[] = [1]
  const %half: f32[] = [0.5]
  %d = Div(%h, %sqrt2) : f32[2,5]
  %e = Erf(%d) : f32[2,5]
  %a = Add(%e, %one) : f32[2,5]
  %m = Mul(%h, %a) : f32[2,5]
  %r = If(%c) : f32[2,5]
    then_branch =
      func @then_branch() {
        %y = Mul(%m, %half) : f32[2,5]
        return %y
      }
    else_branch =
      func @else_branch() {
        return %h
      }
  return %r
}`, ""},
	{"gelu tanh with x² in the cubic term stays",
		`func @main(%h: f32[2,5]) {
  const %c0_044715: f32[] = [0.044715]
  const %c0_7978846: f32[] = [0.7978846]
  const %c1: f32[] = [1]
  const %c0_5: f32[] = [0.5]
  %m = Mul(%h, %h) : f32[2,5]
  %m2 = Mul(%c0_044715, %m) : f32[2,5]
  %a1 = Add(%h, %m2) : f32[2,5]
  %m3 = Mul(%c0_7978846, %a1) : f32[2,5]
  %t = Tanh(%m3) : f32[2,5]
  %a2 = Add(%c1, %t) : f32[2,5]
  %m4 = Mul(%h, %a2) : f32[2,5]
  %m5 = Mul(%c0_5, %m4) : f32[2,5]
  return %m5
}`, ""},
}

// softmax, x is f32[2,3,4].
var softmaxCases = []recognizeCase{
	{"softmax with the max subtracted, last axis",
		`func @main(%x: f32[2,3,4]) {
  const %ax: i64[1] = [-1]
  %mx = ReduceMax(%x, %ax) : f32[2,3,1]
  %z = Sub(%x, %mx) : f32[2,3,4]
  %e = Exp(%z) : f32[2,3,4]
  %s = ReduceSum(%e, %ax) : f32[2,3,1]
  %y = Div(%e, %s) : f32[2,3,4]
  return %y
}`, `func @main(%x: f32[2,3,4]) {
  %y = Softmax(%x) : f32[2,3,4]
  return %y
}`},
	{"softmax without the max, middle axis",
		`func @main(%x: f32[2,3,4]) {
  const %ax: i64[1] = [1]
  %e = Exp(%x) : f32[2,3,4]
  %s = ReduceSum(%e, %ax) : f32[2,1,4]
  %y = Div(%e, %s) : f32[2,3,4]
  return %y
}`, `func @main(%x: f32[2,3,4]) {
  %y = Softmax(%x) {axis=1} : f32[2,3,4]
  return %y
}`},
	{"softmax with the max over another axis stays",
		`func @main(%x: f32[2,3,4]) {
  const %ax: i64[1] = [-1]
  const %ax1: i64[1] = [1]
  %mx = ReduceMax(%x, %ax1) : f32[2,1,4]
  %z = Sub(%x, %mx) : f32[2,3,4]
  %e = Exp(%z) : f32[2,3,4]
  %s = ReduceSum(%e, %ax) : f32[2,3,1]
  %y = Div(%e, %s) : f32[2,3,4]
  return %y
}`, ""},
	{"softmax over two axes stays",
		`func @main(%x: f32[2,3,4]) {
  const %ax: i64[2] = [1, 2]
  %e = Exp(%x) : f32[2,3,4]
  %s = ReduceSum(%e, %ax) : f32[2,1,1]
  %y = Div(%e, %s) : f32[2,3,4]
  return %y
}`, ""},
	{"softmax without keepdims stays",
		`func @main(%x: f32[2,3,4]) {
  const %ax: i64[1] = [0]
  %e = Exp(%x) : f32[2,3,4]
  %s = ReduceSum(%e, %ax) {keepdims=0} : f32[3,4]
  %y = Div(%e, %s) : f32[2,3,4]
  return %y
}`, ""},
}

// the BERT attention mask; %m is the mask as the model takes it.
var attentionMaskCases = []recognizeCase{
	{"attention mask as BERT exports it: i64 mask through Unsqueeze, (1 − m)·K",
		`func @main(%m: i64[2,5], %scores: f32[2,4,5,5]) {
  const %ax: i64[2] = [1, 2]
  const %one: f32[] = [1]
  const %k: f32[] = [-10000]
  %u = Unsqueeze(%m, %ax) : i64[2,1,1,5]
  %c = Cast(%u) {to=1} : f32[2,1,1,5]
  %s = Sub(%one, %c) : f32[2,1,1,5]
  %y = Mul(%s, %k) : f32[2,1,1,5]
  %z = Add(%scores, %y) : f32[2,4,5,5]
  return %z
}`, `func @main(%m: i64[2,5], %scores: f32[2,4,5,5]) {
  const %ax: i64[2] = [1, 2]
  %u = Unsqueeze(%m, %ax) : i64[2,1,1,5]
  %y = AttentionMask(%u) {value=-10000, to=1} : f32[2,1,1,5]
  %z = Add(%scores, %y) : f32[2,4,5,5]
  return %z
}`},
	{"attention mask with K first, a bool mask and the float32 minimum",
		`func @main(%m: bool[2,1,1,5]) {
  const %one: f32[] = [1]
  const %k: f32[] = [-3.4028235e+38]
  %c = Cast(%m) {to=1} : f32[2,1,1,5]
  %s = Sub(%one, %c) : f32[2,1,1,5]
  %y = Mul(%k, %s) : f32[2,1,1,5]
  return %y
}`, `func @main(%m: bool[2,1,1,5]) {
  %y = AttentionMask(%m) {value=-3.4028235e+38, to=1} : f32[2,1,1,5]
  return %y
}`},
	{"attention mask in f64 with ones of shape [1,1,1,1] and a one-element K",
		`func @main(%m: i32[2,1,1,5]) {
  const %one: f64[1,1,1,1] = [1]
  const %k: f64[1] = [-10000]
  %c = Cast(%m) {to=11} : f64[2,1,1,5]
  %s = Sub(%one, %c) : f64[2,1,1,5]
  %y = Mul(%s, %k) : f64[2,1,1,5]
  return %y
}`, `func @main(%m: i32[2,1,1,5]) {
  %y = AttentionMask(%m) {value=-10000, to=11} : f64[2,1,1,5]
  return %y
}`},
	{"attention mask of a float mask",
		`func @main(%m: f32[2,5]) {
  const %one: f32[] = [1]
  const %k: f32[] = [-10000]
  %c = Cast(%m) {to=1} : f32[2,5]
  %s = Sub(%one, %c) : f32[2,5]
  %y = Mul(%s, %k) : f32[2,5]
  return %y
}`, `func @main(%m: f32[2,5]) {
  %y = AttentionMask(%m) {value=-10000, to=1} : f32[2,5]
  return %y
}`},
	{"attention mask with Sub(m, 1) stays",
		`func @main(%m: i64[2,1,1,5]) {
  const %one: f32[] = [1]
  const %k: f32[] = [-10000]
  %c = Cast(%m) {to=1} : f32[2,1,1,5]
  %s = Sub(%c, %one) : f32[2,1,1,5]
  %y = Mul(%s, %k) : f32[2,1,1,5]
  return %y
}`, ""},
	{"attention mask whose K is no constant stays",
		`func @main(%m: i64[2,1,1,5], %k: f32[]) {
  const %one: f32[] = [1]
  %c = Cast(%m) {to=1} : f32[2,1,1,5]
  %s = Sub(%one, %c) : f32[2,1,1,5]
  %y = Mul(%s, %k) : f32[2,1,1,5]
  return %y
}`, ""},
	{"attention mask whose K is no scalar stays",
		`func @main(%m: i64[2,1,1,5]) {
  const %one: f32[] = [1]
  const %k: f32[5] = [-10000, -10000, -10000, -10000, -1]
  %c = Cast(%m) {to=1} : f32[2,1,1,5]
  %s = Sub(%one, %c) : f32[2,1,1,5]
  %y = Mul(%s, %k) : f32[2,1,1,5]
  return %y
}`, ""},
	{"attention mask whose Cast is read by another node stays",
		`func @main(%m: i64[2,1,1,5]) {
  const %one: f32[] = [1]
  const %k: f32[] = [-10000]
  %c = Cast(%m) {to=1} : f32[2,1,1,5]
  %s = Sub(%one, %c) : f32[2,1,1,5]
  %y = Mul(%s, %k) : f32[2,1,1,5]
  %z = Add(%y, %c) : f32[2,1,1,5]
  return %z
}`, ""},
	{"attention mask with a Cast to an integer stays",
		`func @main(%m: bool[2,1,1,5]) {
  const %one: i64[] = [1]
  const %k: i64[] = [-10000]
  %c = Cast(%m) {to=7} : i64[2,1,1,5]
  %s = Sub(%one, %c) : i64[2,1,1,5]
  %y = Mul(%s, %k) : i64[2,1,1,5]
  return %y
}`, ""},
	{"attention mask whose ones broadcast the mask up stays",
		`func @main(%m: i64[2,1,1,5]) {
  const %one: f32[1,3,1,1] = [1, 1, 1]
  const %k: f32[] = [-10000]
  %c = Cast(%m) {to=1} : f32[2,1,1,5]
  %s = Sub(%one, %c) : f32[2,3,1,5]
  %y = Mul(%s, %k) : f32[2,3,1,5]
  return %y
}`, ""},
	{"attention mask with 0.999 for 1 stays",
		`func @main(%m: i64[2,1,1,5]) {
  const %one: f32[] = [0.999]
  const %k: f32[] = [-10000]
  %c = Cast(%m) {to=1} : f32[2,1,1,5]
  %s = Sub(%one, %c) : f32[2,1,1,5]
  %y = Mul(%s, %k) : f32[2,1,1,5]
  return %y
}`, ""},
	{"attention mask in f64 whose K is no float32 stays",
		`func @main(%m: i64[2,1,1,5]) {
  const %one: f64[] = [1]
  const %k: f64[] = [0.1]
  %c = Cast(%m) {to=11} : f64[2,1,1,5]
  %s = Sub(%one, %c) : f64[2,1,1,5]
  %y = Mul(%s, %k) : f64[2,1,1,5]
  return %y
}`, ""},
}

// TestRecognizeCases: before/after text for every pattern and variant, and the near
// misses that must stay as they are.
func TestRecognizeCases(t *testing.T) {
	for _, c := range recognizeCases() {
		t.Run(c.name, func(t *testing.T) {
			want := c.after
			if want == "" {
				_, want = recognizeRun(t, c.before) // dce alone: the text as parsed
				m, err := graph.Parse(`module opsets(""=13)` + "\n" + c.before)
				if err != nil {
					t.Fatal(err)
				}
				if orig := strings.TrimSpace(graph.PrintFunc(m.Main)); orig != want {
					t.Fatalf("changed:\n%s\nwant it unchanged:\n%s", want, orig)
				}
				return
			}
			if _, got := recognizeRun(t, c.before); got != want {
				t.Errorf("got\n%s\nwant\n%s", got, want)
			}
		})
	}
}

func recognizeCases() []recognizeCase {
	var all []recognizeCase
	for _, l := range [][]recognizeCase{layerNormCases, geluCases, softmaxCases, attentionMaskCases, hardSwishCases} {
		all = append(all, l...)
	}
	return all
}

// TestRecognizeNumeric: every rewritten case computes what its decomposed form computes
// (reference evaluator, random inputs of each parameter's dtype, within 1e-5).
func TestRecognizeNumeric(t *testing.T) {
	for _, c := range recognizeCases() {
		if c.after == "" {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			before, err := graph.Parse(`module opsets(""=13)` + "\n" + c.before)
			if err != nil {
				t.Fatal(err)
			}
			after, _ := recognizeRun(t, c.before)
			in := map[string]ref.Value{}
			for i, p := range before.Main.Params {
				shape, _ := p.Type.ConstShape()
				x := rnd(uint64(20+i), shape...)
				v := x.Float64s()
				for k := range v {
					v[k] *= 3 // reach where erf and tanh bend
				}
				in[p.Name] = tensor.FromFloat64s(p.Type.DType, shape, v) // masks: ints in [-2, 2], bools
			}
			want, err := ref.Eval(before, in, ref.Options{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := ref.Eval(after, in, ref.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for r := range want {
				g, w := got[r].(*tensor.Tensor).Float64s(), want[r].(*tensor.Tensor).Float64s()
				for i := range w {
					if d := g[i] - w[i]; d > 1e-5 || d < -1e-5 {
						t.Fatalf("result %d element %d: %v recognized, %v decomposed", r, i, g[i], w[i])
					}
				}
			}
		})
	}
}

// TestRecognizeInPipeline: recognize runs at O1 and above, after fold-constants (a
// constant computed by a node is seen by value) and before dce, and inside subgraphs.
func TestRecognizeInPipeline(t *testing.T) {
	for o := 0; o <= 3; o++ {
		has := false
		for _, p := range passes.Level(o) {
			has = has || p.Name == "recognize"
		}
		if has != (o >= 1) {
			t.Errorf("O%d has recognize: %v", o, has)
		}
	}
	m, err := graph.Parse(`module opsets(""=13)
func @main(%h: f32[2,5], %c: bool[]) {
  const %two: f32[] = [2]
  const %one: f32[] = [1]
  const %half: f32[] = [0.5]
  const %ax: i64[1] = [1]
  %sqrt2 = Sqrt(%two) : f32[]
  %d = Div(%h, %sqrt2) : f32[2,5]
  %e = Erf(%d) : f32[2,5]
  %a = Add(%e, %one) : f32[2,5]
  %m = Mul(%h, %a) : f32[2,5]
  %y = Mul(%m, %half) : f32[2,5]
  %r = If(%c) : f32[2,5]
    then_branch =
      func @then_branch() {
        %s = Exp(%y) : f32[2,5]
        %t = ReduceSum(%s, %ax) : f32[2,1]
        %u = Div(%s, %t) : f32[2,5]
        return %u
      }
    else_branch =
      func @else_branch() {
        return %y
      }
  return %r
}`)
	if err != nil {
		t.Fatal(err)
	}
	if err := passes.Level(1).Run(&passes.Context{Eval: evalNode, Check: true}, m); err != nil {
		t.Fatal(err)
	}
	text := graph.Print(m)
	for _, want := range []string{"Gelu(%h)", "Softmax(%y) :"} {
		if !strings.Contains(text, want) {
			t.Errorf("no %s in\n%s", want, text)
		}
	}
	for _, gone := range []string{"Erf(", "Exp(", "Sqrt("} {
		if strings.Contains(text, gone) {
			t.Errorf("%s left in\n%s", gone, text)
		}
	}
}
