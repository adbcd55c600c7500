package graph

import (
	"testing"

	"github.com/kilnrt/kiln/tensor"
)

// squeezeIf builds the exporters' rank guard y = If(cond, Squeeze(x, [1]), Identity(x))
// over x f32[b,k,8], the condition built by cond from Shape(x)[1].
func squeezeIf(t *testing.T, k Dim, cond func(b *Builder, extent *Value) *Value) Type {
	t.Helper()
	b := NewBuilder("main")
	x := b.Param("x", TensorType(tensor.Float32, Sym("b"), k, Const(8)))
	extent := op1(t, b, OpGather, &GatherAttrs{}, op1(t, b, OpShape, nil, x), b.Const("one", i64s(1)))
	then := b.Sub("then")
	then.Return(op1(t, then, OpSqueeze, nil, x, then.Const("axes", i64s(1))))
	els := b.Sub("else")
	els.Return(op1(t, els, OpIdentity, nil, x))
	return op1(t, b, OpIf, &IfAttrs{ThenBranch: then.F, ElseBranch: els.F}, cond(b, extent)).Type
}

// TestIfWithAKnownConditionTakesItsBranchTypes: an If whose condition inference can
// decide (Equal of an extent that shape arithmetic knows and a constant, through Not
// and Cast) has the taken branch's types, so that a rank guard keeps the rank; with a
// condition that depends on data the branches' types merge (here to unknown rank).
func TestIfWithAKnownConditionTakesItsBranchTypes(t *testing.T) {
	equalOne := func(b *Builder, extent *Value) *Value {
		return op1(t, b, OpEqual, nil, extent, b.Const("c1", i64s(1)))
	}
	cases := []struct {
		name string
		k    Dim
		cond func(b *Builder, extent *Value) *Value
		want string
	}{
		{"equal", Const(1), equalOne, "f32[b,8]"},
		{"not equal", Const(3), equalOne, "f32[b,3,8]"},
		{"not", Const(1), func(b *Builder, e *Value) *Value {
			return op1(t, b, OpCast, &CastAttrs{To: int64(tensor.Bool)}, op1(t, b, OpNot, nil, equalOne(b, e)))
		}, "f32[b,1,8]"},
		{"same symbol", Sym("k"), func(b *Builder, e *Value) *Value {
			other := op1(t, b, OpGather, &GatherAttrs{}, op1(t, b, OpShape, nil, b.Param("z", TensorType(tensor.Float32, Sym("k")))), b.Const("zero", i64s(0)))
			return op1(t, b, OpEqual, nil, e, other)
		}, "f32[b,8]"},
		{"data", Sym("k"), equalOne, "f32[*]"},
	}
	for _, c := range cases {
		if got := squeezeIf(t, c.k, c.cond).String(); got != c.want {
			t.Errorf("%s: If type %s, want %s", c.name, got, c.want)
		}
	}
}
