package graph

import (
	"errors"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/tensor"
)

// TestOpsAcceptInputsOfUnknownRank: an op whose inference needs its input's rank, given
// an input of unknown rank, gets outputs of the element type inference finds and unknown
// rank (the shape is checked when the node runs), unless the output's rank is known
// regardless of the input's (an LSTM's hidden state, a Reshape to a constant shape).
func TestOpsAcceptInputsOfUnknownRank(t *testing.T) {
	f32 := func(b *Builder, name string, dims ...int64) *Value {
		return b.Param(name, TensorType(tensor.Float32, StaticShape(dims...)...))
	}
	cases := []struct {
		name  string
		build func(b *Builder, x *Value) ([]*Value, error)
		want  []string
	}{
		{"Softmax", func(b *Builder, x *Value) ([]*Value, error) { return b.Node(OpSoftmax, nil, 1, x) }, []string{"f32[*]"}},
		{"Transpose", func(b *Builder, x *Value) ([]*Value, error) {
			return b.Node(OpTranspose, &TransposeAttrs{Perm: []int64{0, 2, 1}}, 1, x)
		}, []string{"f32[*]"}},
		{"MatMul", func(b *Builder, x *Value) ([]*Value, error) { return b.Node(OpMatMul, nil, 1, x, f32(b, "w", 4, 8)) }, []string{"f32[*]"}},
		{"Conv", func(b *Builder, x *Value) ([]*Value, error) {
			return b.Node(OpConv, nil, 1, x, f32(b, "w", 8, 4, 3, 3))
		}, []string{"f32[*]"}},
		{"ReduceMean", func(b *Builder, x *Value) ([]*Value, error) {
			return b.Node(OpReduceMean, nil, 1, x, b.Const("axes", i64s(1)))
		}, []string{"f32[*]"}},
		{"Concat", func(b *Builder, x *Value) ([]*Value, error) {
			return b.Node(OpConcat, &AxisAttrs{Axis: 1}, 1, x, f32(b, "y", 2, 3))
		}, []string{"f32[*]"}},
		{"Shape", func(b *Builder, x *Value) ([]*Value, error) { return b.Node(OpShape, nil, 1, x) }, []string{"i64[_d1]"}},
		{"ArgMax", func(b *Builder, x *Value) ([]*Value, error) { return b.Node(OpArgMax, nil, 1, x) }, []string{"i64[*]"}},
		{"ReshapeKeepingAnExtent", func(b *Builder, x *Value) ([]*Value, error) {
			return b.Node(OpReshape, nil, 1, x, b.Const("shape", i64s(0, -1)))
		}, []string{"f32[_d1,_d2]"}},
		{"Gemm", func(b *Builder, x *Value) ([]*Value, error) { return b.Node(OpGemm, nil, 1, x, f32(b, "w", 4, 8)) }, []string{"f32[*]"}},
		{"GRU", func(b *Builder, x *Value) ([]*Value, error) {
			return b.Node(OpGRU, &RNNAttrs{Direction: "bidirectional", HiddenSize: 3}, 2, x, f32(b, "w", 2, 9, 4), f32(b, "r", 2, 9, 3))
		}, []string{"f32[_d1,2,_d2,3]", "f32[2,_d2,3]"}},
		{"LSTM", func(b *Builder, x *Value) ([]*Value, error) {
			return b.Node(OpLSTM, &RNNAttrs{Direction: "forward", HiddenSize: 3}, 3, x, f32(b, "w", 1, 12, 4), f32(b, "r", 1, 12, 3))
		}, []string{"f32[_d1,1,_d2,3]", "f32[1,_d2,3]", "f32[1,_d2,3]"}},
	}
	for _, c := range cases {
		b := NewBuilder("main")
		x := b.Param("x", Type{Kind: KindTensor, DType: tensor.Float32, UnknownRank: true})
		outs, err := c.build(b, x)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		for i, o := range outs {
			if got := o.Type.String(); got != c.want[i] {
				t.Errorf("%s output %d: %s, want %s", c.name, i, got, c.want[i])
			}
		}
	}
}

// TestUnknownRankDoesNotHideATypeError: a node that is wrong for every rank of its
// input (an LSTM whose weight is not rank 3) is refused with its own error.
func TestUnknownRankDoesNotHideATypeError(t *testing.T) {
	b := NewBuilder("main")
	x := b.Param("x", Type{Kind: KindTensor, DType: tensor.Float32, UnknownRank: true})
	w := b.Param("w", TensorType(tensor.Float32, StaticShape(12, 4)...))
	r := b.Param("r", TensorType(tensor.Float32, StaticShape(1, 12, 3)...))
	_, err := b.Node(OpLSTM, &RNNAttrs{Direction: "forward", HiddenSize: 3}, 2, x, w, r)
	if !errors.Is(err, ErrInfer) || !strings.Contains(err.Error(), "rank 3") {
		t.Fatalf("an LSTM with a rank-2 W inferred with %v, want ErrInfer on the ranks", err)
	}
}

// TestShapesOfUnknownRankDiffer: the Shapes of two tensors of unknown rank have lengths
// that are not known to be equal.
func TestShapesOfUnknownRankDiffer(t *testing.T) {
	b := NewBuilder("main")
	unknown := Type{Kind: KindTensor, DType: tensor.Float32, UnknownRank: true}
	s1 := op1(t, b, OpShape, nil, b.Param("x", unknown))
	s2 := op1(t, b, OpShape, nil, b.Param("y", unknown))
	if s1.Type.Equal(s2.Type) {
		t.Fatalf("Shape(x) and Shape(y) have the same type %v", s1.Type)
	}
}
