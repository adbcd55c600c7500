package cpu

import (
	"testing"

	"github.com/kilnrt/kiln/graph"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/tensor"
)

// intWidths are the integer types the bitwise ops take.
var intWidths = []tensor.DType{tensor.Int8, tensor.Int16, tensor.Int32, tensor.Int64,
	tensor.Uint8, tensor.Uint16, tensor.Uint32, tensor.Uint64}

// bitPatterns are n values of dt from bit patterns that set the sign bit, the high and
// low halves of each byte, all ones and none (FromInt64s wraps them into dt).
func bitPatterns(dt tensor.DType, seed uint64, n int) *tensor.Tensor {
	edges := []uint64{0, ^uint64(0), 0xf0f0f0f0f0f0f0f0, 0x0f0f0f0f0f0f0f0f, 0x8000000000000080, 0x7f7f7f7f7f7f7f7f, 1}
	v := make([]int64, n)
	x := seed*0x9e3779b97f4a7c15 + 1
	for i := range v {
		if i < len(edges) {
			v[(i+int(seed))%n] = int64(edges[i])
			continue
		}
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		v[(i+int(seed))%n] = int64(x)
	}
	return tensor.FromInt64s(dt, tensor.Shape{n}, v)
}

func reshaped(t *testing.T, x *tensor.Tensor, shape ...int) *tensor.Tensor {
	t.Helper()
	r, err := x.Reshape(tensor.Shape(shape))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestBitwiseOpsMatchReferenceOnEveryIntegerWidth runs BitwiseAnd, BitwiseOr and
// BitwiseXor on each signed and unsigned width, on equal shapes of odd size, with a row
// broadcast against a matrix and a scalar against a vector, and BitwiseNot on each width;
// the inputs hold the sign bit, all ones and nibble patterns (uint8 0xf0 ^ 0xff = 0x0f).
func TestBitwiseOpsMatchReferenceOnEveryIntegerWidth(t *testing.T) {
	l := Strategies(kernels.Default())
	for _, dt := range intWidths {
		for _, op := range []graph.Op{graph.OpBitwiseAnd, graph.OpBitwiseOr, graph.OpBitwiseXor} {
			nt.CheckNode(t, l, op, nil, 1, nt.In(bitPatterns(dt, 1, 37)), nt.In(bitPatterns(dt, 2, 37)))
			nt.CheckNode(t, l, op, nil, 1, nt.In(reshaped(t, bitPatterns(dt, 3, 35), 7, 5)), nt.In(bitPatterns(dt, 4, 5)))
			nt.CheckNode(t, l, op, nil, 1, nt.In(bitPatterns(dt, 5, 9)), nt.In(reshaped(t, bitPatterns(dt, 6, 1))))
		}
		nt.CheckNode(t, l, graph.OpBitwiseNot, nil, 1, nt.In(bitPatterns(dt, 7, 37)))
		nt.CheckNode(t, l, graph.OpBitwiseNot, nil, 1, nt.In(reshaped(t, bitPatterns(dt, 8, 30), 2, 3, 5)))
	}
}

// TestBitwiseOpsRefuseFloats: the bitwise ops are defined on integers; a float input
// is refused by inference, naming the node.
func TestBitwiseOpsRefuseFloats(t *testing.T) {
	for _, op := range []graph.Op{graph.OpBitwiseAnd, graph.OpBitwiseNot} {
		b := graph.NewBuilder("main")
		x := b.Param("x", graph.TensorType(tensor.Float32, graph.StaticShape(4)...))
		in := []*graph.Value{x}
		if op != graph.OpBitwiseNot {
			in = append(in, x)
		}
		if _, err := b.Node(op, nil, 1, in...); err == nil {
			t.Errorf("%v on float32 was accepted", op)
		}
	}
}
