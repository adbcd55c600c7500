package passes_test

import (
	"math/rand/v2"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/graph/passes"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/tensor"
)

// chainPipeline is simplify followed by dce, so that the after text shows what remains.
func chainPipeline(t *testing.T) passes.Pipeline {
	return passes.Pipeline{pass(t, "simplify"), pass(t, "dce")}
}

// TestSimplifyChainCases: before/after text for the Reshape/Transpose/Squeeze chain rules
// of simplify, with the cases that must not change.
func TestSimplifyChainCases(t *testing.T) {
	runTable(t, chainPipeline(t), passes.Context{}, chainCases)
}

var chainCases = []textCase{
	{"a chain of views becomes one Reshape of the chain's start (to a new static shape)",
		`func @main(%x: f32[2,3,4]) {
  const %ax: i64[1] = [0]
  const %s: i64[2] = [-1, 6]
  %a = Unsqueeze(%x, %ax) : f32[1,2,3,4]
  %b = Flatten(%a) {axis=2} : f32[2,12]
  %c = Reshape(%b, %s) : f32[4,6]
  %d = Relu(%c) : f32[4,6]
  return %d
}`, `func @main(%x: f32[2,3,4]) {
  const %c_shape: i64[2]{4,6} = [4, 6]
  %c = Reshape(%x, %c_shape) : f32[4,6]
  %d = Relu(%c) : f32[4,6]
  return %d
}`},
	{"an intermediate with another reader stays computed",
		`func @main(%x: f32[2,3]) {
  const %s: i64[1] = [6]
  const %ax: i64[1] = [0]
  %a = Reshape(%x, %s) : f32[6]
  %b = Unsqueeze(%a, %ax) : f32[1,6]
  %c = Relu(%a) : f32[6]
  %d = Sigmoid(%b) : f32[1,6]
  return %c, %d
}`, `func @main(%x: f32[2,3]) {
  const %s: i64[1] = [6]
  const %b_shape: i64[2]{1,6} = [1, 6]
  %a = Reshape(%x, %s) : f32[6]
  %b = Reshape(%x, %b_shape) : f32[1,6]
  %c = Relu(%a) : f32[6]
  %d = Sigmoid(%b) : f32[1,6]
  return %c, %d
}`},
	{"a chain ending in a result keeps the result's value and name",
		`func @main(%x: f32[2,1,3]) {
  const %ax: i64[1] = [1]
  const %ax2: i64[1] = [0]
  %a = Squeeze(%x, %ax) : f32[2,3]
  %b = Unsqueeze(%a, %ax2) : f32[1,2,3]
  return %b
}`, `func @main(%x: f32[2,1,3]) {
  const %b_shape: i64[3]{1,2,3} = [1, 2, 3]
  %b = Reshape(%x, %b_shape) : f32[1,2,3]
  return %b
}`},
	{"a chain back to the start's shape is bypassed",
		`func @main(%x: f32[2,3]) {
  const %ax: i64[1] = [0]
  %a = Unsqueeze(%x, %ax) : f32[1,2,3]
  %b = Squeeze(%a, %ax) : f32[2,3]
  %c = Relu(%b) : f32[2,3]
  return %c
}`, `func @main(%x: f32[2,3]) {
  %c = Relu(%x) : f32[2,3]
  return %c
}`},
	{"identities inside a chain are seen through",
		`func @main(%x: f32[2,3]) {
  const %ax: i64[1] = [0]
  %a = Unsqueeze(%x, %ax) : f32[1,2,3]
  %i = Identity(%a) : f32[1,2,3]
  %b = Flatten(%i) : f32[1,6]
  %c = Relu(%b) : f32[1,6]
  return %c
}`, `func @main(%x: f32[2,3]) {
  const %b_shape: i64[2]{1,6} = [1, 6]
  %b = Reshape(%x, %b_shape) : f32[1,6]
  %c = Relu(%b) : f32[1,6]
  return %c
}`},
	{"a chain on symbolic shapes stays",
		`func @main(%x: f32[n,3]) {
  const %ax: i64[1] = [0]
  %a = Unsqueeze(%x, %ax) : f32[1,n,3]
  %b = Flatten(%a) {axis=2} : f32[n,3]
  %c = Relu(%b) : f32[n,3]
  return %c
}`, `func @main(%x: f32[n,3]) {
  const %ax: i64[1] = [0]
  %a = Unsqueeze(%x, %ax) : f32[1,n,3]
  %b = Flatten(%a) {axis=2} : f32[n,3]
  %c = Relu(%b) : f32[n,3]
  return %c
}`},
	{"a chain from a blocked value stays",
		`func @main(%x: f32[1,16,2,2]@c16) {
  const %s: i64[3] = [1, 16, 4]
  const %ax: i64[1] = [3]
  %a = Reshape(%x, %s) : f32[1,16,4]
  %b = Unsqueeze(%a, %ax) : f32[1,16,4,1]
  %c = Relu(%b) : f32[1,16,4,1]
  return %c
}`, `func @main(%x: f32[1,16,2,2]@c16) {
  const %s: i64[3] = [1, 16, 4]
  const %ax: i64[1] = [3]
  %a = Reshape(%x, %s) : f32[1,16,4]
  %b = Unsqueeze(%a, %ax) : f32[1,16,4,1]
  %c = Relu(%b) : f32[1,16,4,1]
  return %c
}`},
	{"a view after a non-view stays",
		`func @main(%x: f32[2,3]) {
  const %s: i64[1] = [6]
  %a = Relu(%x) : f32[2,3]
  %b = Reshape(%a, %s) : f32[6]
  return %b
}`, `func @main(%x: f32[2,3]) {
  const %s: i64[1] = [6]
  %a = Relu(%x) : f32[2,3]
  %b = Reshape(%a, %s) : f32[6]
  return %b
}`},
	{"two transposes become one with the composed permutation",
		`func @main(%x: f32[2,3,4]) {
  %a = Transpose(%x) {perm=[1,0,2]} : f32[3,2,4]
  %b = Transpose(%a) {perm=[0,2,1]} : f32[3,4,2]
  %c = Relu(%b) : f32[3,4,2]
  return %c
}`, `func @main(%x: f32[2,3,4]) {
  %b = Transpose(%x) {perm=[1,2,0]} : f32[3,4,2]
  %c = Relu(%b) : f32[3,4,2]
  return %c
}`},
	{"a default (reversing) permutation composes too",
		`func @main(%x: f32[2,3,4]) {
  %a = Transpose(%x) : f32[4,3,2]
  %b = Transpose(%a) {perm=[0,2,1]} : f32[4,2,3]
  %c = Relu(%b) : f32[4,2,3]
  return %c
}`, `func @main(%x: f32[2,3,4]) {
  %b = Transpose(%x) {perm=[2,0,1]} : f32[4,2,3]
  %c = Relu(%b) : f32[4,2,3]
  return %c
}`},
	{"transposes that cancel are bypassed",
		`func @main(%x: f32[2,3,4]) {
  %a = Transpose(%x) {perm=[2,0,1]} : f32[4,2,3]
  %b = Transpose(%a) {perm=[1,2,0]} : f32[2,3,4]
  %c = Relu(%b) : f32[2,3,4]
  return %c
}`, `func @main(%x: f32[2,3,4]) {
  %c = Relu(%x) : f32[2,3,4]
  return %c
}`},
	{"transposes that cancel into a result leave an Identity",
		`func @main(%x: f32[2,3]) {
  %a = Transpose(%x) : f32[3,2]
  %b = Transpose(%a) : f32[2,3]
  return %b
}`, `func @main(%x: f32[2,3]) {
  %b = Identity(%x) : f32[2,3]
  return %b
}`},
	{"an inner transpose with another reader stays computed",
		`func @main(%x: f32[2,3,4]) {
  %a = Transpose(%x) {perm=[1,0,2]} : f32[3,2,4]
  %b = Transpose(%a) {perm=[1,0,2]} : f32[2,3,4]
  %c = Relu(%a) : f32[3,2,4]
  %d = Sigmoid(%b) : f32[2,3,4]
  return %c, %d
}`, `func @main(%x: f32[2,3,4]) {
  %a = Transpose(%x) {perm=[1,0,2]} : f32[3,2,4]
  %c = Relu(%a) : f32[3,2,4]
  %d = Sigmoid(%x) : f32[2,3,4]
  return %c, %d
}`},
	{"a transpose moving only size-1 axes becomes a Reshape",
		`func @main(%x: f32[1,3,1,4]) {
  %a = Transpose(%x) {perm=[1,0,3,2]} : f32[3,1,4,1]
  %b = Relu(%a) : f32[3,1,4,1]
  return %b
}`, `func @main(%x: f32[1,3,1,4]) {
  const %a_shape: i64[4]{3,1,4,1} = [3, 1, 4, 1]
  %a = Reshape(%x, %a_shape) : f32[3,1,4,1]
  %b = Relu(%a) : f32[3,1,4,1]
  return %b
}`},
	{"a size-1 transpose joins the view chain around it (a Reshape's own static shape constant is kept)",
		`func @main(%x: f32[3,4]) {
  const %ax: i64[1] = [0]
  const %s: i64[1] = [12]
  %a = Unsqueeze(%x, %ax) : f32[1,3,4]
  %b = Transpose(%a) {perm=[1,0,2]} : f32[3,1,4]
  %c = Reshape(%b, %s) : f32[12]
  %d = Relu(%c) : f32[12]
  return %d
}`, `func @main(%x: f32[3,4]) {
  const %s: i64[1] = [12]
  %c = Reshape(%x, %s) : f32[12]
  %d = Relu(%c) : f32[12]
  return %d
}`},
	{"a transpose reordering axes larger than 1 stays",
		`func @main(%x: f32[1,3,1,4]) {
  %a = Transpose(%x) {perm=[0,3,2,1]} : f32[1,4,1,3]
  %b = Relu(%a) : f32[1,4,1,3]
  return %b
}`, `func @main(%x: f32[1,3,1,4]) {
  %a = Transpose(%x) {perm=[0,3,2,1]} : f32[1,4,1,3]
  %b = Relu(%a) : f32[1,4,1,3]
  return %b
}`},
	{"a transpose then a reshape (attention heads) stays",
		`func @main(%x: f32[1,4,8,2]) {
  const %s: i64[3] = [1, 8, 8]
  %a = Transpose(%x) {perm=[0,2,1,3]} : f32[1,8,4,2]
  %b = Reshape(%a, %s) : f32[1,8,8]
  return %b
}`, `func @main(%x: f32[1,4,8,2]) {
  const %s: i64[3] = [1, 8, 8]
  %a = Transpose(%x) {perm=[0,2,1,3]} : f32[1,8,4,2]
  %b = Reshape(%a, %s) : f32[1,8,8]
  return %b
}`},
	{"a size-1 transpose on a symbolic shape stays",
		`func @main(%x: f32[1,n]) {
  %a = Transpose(%x) : f32[n,1]
  %b = Relu(%a) : f32[n,1]
  return %b
}`, `func @main(%x: f32[1,n]) {
  %a = Transpose(%x) : f32[n,1]
  %b = Relu(%a) : f32[n,1]
  return %b
}`},
	{"transposes of a blocked value stay",
		`func @main(%x: f32[1,16,2,2]@c16) {
  %a = Transpose(%x) {perm=[0,2,3,1]} : f32[1,2,2,16]
  %b = Transpose(%a) {perm=[0,3,1,2]} : f32[1,16,2,2]
  %c = Relu(%b) : f32[1,16,2,2]
  return %c
}`, `func @main(%x: f32[1,16,2,2]@c16) {
  %a = Transpose(%x) {perm=[0,2,3,1]} : f32[1,2,2,16]
  %b = Transpose(%a) {perm=[0,3,1,2]} : f32[1,16,2,2]
  %c = Relu(%b) : f32[1,16,2,2]
  return %c
}`},
	{"a size-1 transpose of a blocked value stays",
		`func @main(%x: f32[1,16,1,2]@c16) {
  %a = Transpose(%x) {perm=[0,2,1,3]} : f32[1,1,16,2]
  %b = Relu(%a) : f32[1,1,16,2]
  return %b
}`, `func @main(%x: f32[1,16,1,2]@c16) {
  %a = Transpose(%x) {perm=[0,2,1,3]} : f32[1,1,16,2]
  %b = Relu(%a) : f32[1,1,16,2]
  return %b
}`},
}

// TestSimplifyChainsNumeric: the chain rules change no value. Every table case with
// static parameters, and random chains of Transpose/Unsqueeze/Squeeze/Flatten/Reshape
// (some intermediates with a second reader), are evaluated with the reference
// evaluator before and after simplify+dce on random inputs; the results must be equal
// element for element (views and transposes move data, they compute nothing).
func TestSimplifyChainsNumeric(t *testing.T) {
	for _, c := range chainCases {
		m, err := graph.Parse(`module opsets(""=17)` + "\n" + c.before)
		if err != nil {
			t.Fatal(err)
		}
		if hasSymbolicParam(m) {
			continue
		}
		checkSameValues(t, c.name, m)
	}
	r := rand.New(rand.NewPCG(11, 3))
	changed := 0
	for i := 0; i < 200; i++ {
		m, desc := randomChain(t, r)
		if checkSameValues(t, desc, m) {
			changed++
		}
	}
	if changed < 100 {
		t.Fatalf("only %d of 200 random chains were rewritten: the check is too weak", changed)
	}
}

func hasSymbolicParam(m *graph.Module) bool {
	for _, p := range m.Main.Params {
		if !p.Type.IsStatic() {
			return true
		}
	}
	return false
}

// checkSameValues evaluates m, runs simplify+dce on it and evaluates it again; it
// reports whether the passes changed the module.
func checkSameValues(t *testing.T, name string, m *graph.Module) bool {
	t.Helper()
	in := map[string]ref.Value{}
	for i, p := range m.Main.Params {
		s, _ := p.Type.ConstShape()
		in[p.Name] = rnd(uint64(100+i), s...)
	}
	before := graph.Print(m)
	want, err := ref.Eval(m, in, ref.Options{})
	if err != nil {
		t.Fatalf("%s: before: %v\n%s", name, err, before)
	}
	if err := chainPipeline(t).Run(&passes.Context{Check: true}, m); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	got, err := ref.Eval(m, in, ref.Options{})
	if err != nil {
		t.Fatalf("%s: after: %v\n%s", name, err, graph.Print(m))
	}
	for k := range want {
		w, g := want[k].(*tensor.Tensor), got[k].(*tensor.Tensor)
		if !w.Shape.Equal(g.Shape) {
			t.Fatalf("%s: result %d has shape %v after, %v before\nbefore:\n%safter:\n%s", name, k, g.Shape, w.Shape, before, graph.Print(m))
		}
		wv, gv := w.Float64s(), g.Float64s()
		for j := range wv {
			if wv[j] != gv[j] {
				t.Fatalf("%s: result %d element %d is %v after, %v before\nbefore:\n%safter:\n%s", name, k, j, gv[j], wv[j], before, graph.Print(m))
			}
		}
	}
	return graph.Print(m) != before
}

// randomChain builds x → 2..5 random view/transpose steps → result, over small extents
// with many 1s, sometimes returning an intermediate as a second result.
func randomChain(t *testing.T, r *rand.Rand) (*graph.Module, string) {
	t.Helper()
	rank := 2 + r.IntN(3)
	ext := make([]int64, rank)
	for i := range ext {
		ext[i] = []int64{1, 1, 2, 3, 4}[r.IntN(5)]
	}
	b := graph.NewBuilder("main")
	v := b.Param("x", graph.TensorType(tensor.Float32, graph.StaticShape(ext...)...))
	desc := "chain " + v.Type.String()
	var results []*graph.Value
	steps := 2 + r.IntN(4)
	for s := 0; s < steps; s++ {
		shape, _ := v.Type.ConstShape()
		var op graph.Op
		var attrs any
		var extra []*graph.Value
		switch k := r.IntN(5); {
		case k == 0 && len(shape) < 5:
			op, extra = graph.OpUnsqueeze, []*graph.Value{b.Const("", i64s(int64(r.IntN(len(shape)+1))))}
		case k == 1 && shape.NumElements() != 0:
			var axes []int64
			for i, d := range shape {
				if d == 1 {
					axes = append(axes, int64(i))
				}
			}
			if len(axes) == 0 || len(shape) == 1 {
				continue
			}
			op, extra = graph.OpSqueeze, []*graph.Value{b.Const("", i64s(axes[r.IntN(len(axes))]))}
		case k == 2:
			op, attrs = graph.OpFlatten, &graph.FlattenAttrs{Axis: int64(r.IntN(len(shape) + 1))}
		case k == 3:
			dims := make([]int64, len(shape))
			for i := range dims {
				dims[len(dims)-1-i] = int64(shape[i])
			}
			op, extra = graph.OpReshape, []*graph.Value{b.Const("", i64s(dims...))}
		default:
			perm := make([]int64, len(shape))
			for i, p := range r.Perm(len(shape)) {
				perm[i] = int64(p)
			}
			op, attrs = graph.OpTranspose, &graph.TransposeAttrs{Perm: perm}
		}
		next, err := b.Op1(op, attrs, append([]*graph.Value{v}, extra...)...)
		if err != nil {
			t.Fatalf("%s then %v: %v", desc, op, err)
		}
		if r.IntN(4) == 0 {
			results = append(results, next)
		}
		desc += " → " + op.String() + next.Type.String()
		v = next
	}
	m, err := b.Module(append(results, v)...)
	if err != nil {
		t.Fatal(err)
	}
	return m, desc
}
