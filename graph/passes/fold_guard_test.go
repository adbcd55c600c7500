package passes_test

import (
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/graph/passes"
	"github.com/kilnrt/kiln/tensor"
)

// paddedGuard builds the pattern of an exporter's padded spectrogram front end: x
// f32[b,n] padded by 64 at the end of axis 1, with pads computed by ConstantOfShape →
// Concat → Reshape [-1,2] → Transpose → Reshape [-1] (inference does not follow it, so
// Pad's extents are fresh symbols until the chain folds); then the rank guard
// g = If(Shape(p)[0] == 1, Squeeze(p, [0]), Identity(p)); then an If on a constant
// condition whose branches read g (a value of the enclosing Func), and Relu of it.
func paddedGuard(t *testing.T) *graph.Module {
	t.Helper()
	b := graph.NewBuilder("main")
	op := func(b *graph.Builder, o graph.Op, attrs any, in ...*graph.Value) *graph.Value {
		t.Helper()
		v, err := b.Op1(o, attrs, in...)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	x := b.Param("x", graph.TensorType(tensor.Float32, graph.Sym("b"), graph.Sym("n")))
	zeros := op(b, graph.OpConstantOfShape, &graph.ConstantOfShapeAttrs{Value: i64s(0)}, b.Const("two", i64s(2)))
	flat := op(b, graph.OpConcat, &graph.AxisAttrs{Axis: 0}, zeros, b.Const("tail", i64s(0, 64)))
	pairs := op(b, graph.OpReshape, nil, flat, b.Const("pairs", i64s(-1, 2)))
	swapped := op(b, graph.OpTranspose, &graph.TransposeAttrs{Perm: []int64{1, 0}}, pairs)
	pads := op(b, graph.OpReshape, nil, swapped, b.Const("flat", i64s(-1)))
	p := op(b, graph.OpPad, nil, x, pads)

	rows := op(b, graph.OpGather, &graph.GatherAttrs{}, op(b, graph.OpShape, nil, p), b.Const("zero", i64s(0)))
	cond := op(b, graph.OpEqual, nil, rows, b.Const("one", i64s(1)))
	then := b.Sub("then")
	then.Return(op(then, graph.OpSqueeze, nil, p, then.Const("axes", i64s(0))))
	els := b.Sub("else")
	els.Return(op(els, graph.OpIdentity, nil, p))
	g := op(b, graph.OpIf, &graph.IfAttrs{ThenBranch: then.F, ElseBranch: els.F}, cond)

	then2 := b.Sub("then2")
	then2.Return(op(then2, graph.OpNeg, nil, g))
	els2 := b.Sub("else2")
	els2.Return(op(els2, graph.OpAbs, nil, g))
	h := op(b, graph.OpIf, &graph.IfAttrs{ThenBranch: then2.F, ElseBranch: els2.F}, b.Const("yes", tensor.Scalar(true)))
	y := op(b, graph.OpRelu, nil, h)
	m, err := b.Module(y)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestFoldedPadsDecideARankGuard: once fold-constants has folded the pads chain, Pad's
// extents are known, the rank guard on them is decided, and the If and every node
// after it (through an If whose branches read the guard's result) take the branch's
// types; with the guarded extent unbound the If keeps both branches and unknown rank.
func TestFoldedPadsDecideARankGuard(t *testing.T) {
	cases := []struct {
		name string
		dims map[string]int64
		want []string
	}{
		{"taken", map[string]int64{"b": 1, "n": 512}, []string{
			"Pad(%x, %t5) : f32[1,576]", "%t10 = If(%t9) : f32[576]", "Neg(%t10) : f32[576]", "%t11 = If(%yes) : f32[576]", "Relu(%t11) : f32[576]",
		}},
		{"not taken", map[string]int64{"b": 3, "n": 512}, []string{
			"%t10 = If(%t9) : f32[3,576]", "Relu(%t11) : f32[3,576]",
		}},
		{"not known", map[string]int64{"n": 512}, []string{
			"Pad(%x, %t5) : f32[b,576]", "%t10 = If(%t9) : f32[*]", "Relu(%t11) : f32[*]",
		}},
	}
	for _, c := range cases {
		got := run(t, paddedGuard(t), &passes.Context{Dims: c.dims, Eval: evalNode})
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: want %q in:\n%s", c.name, w, got)
			}
		}
	}
}
