package roofline

import (
	"errors"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

func f32(shape ...int64) graph.Type {
	return graph.TensorType(tensor.Float32, graph.StaticShape(shape...)...)
}

func convAttrs(group int64, stride, pad int64) *graph.ConvAttrs {
	a := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
	a.Group, a.Strides, a.Pads = group, []int64{stride, stride}, []int64{pad, pad, pad, pad}
	return a
}

// one builds a single node over parameters of the given shapes and counts its work.
func one(t *testing.T, op graph.Op, attrs any, shapes ...[]int64) Work {
	t.Helper()
	b := graph.NewBuilder("main")
	var in []*graph.Value
	for i, s := range shapes {
		in = append(in, b.Param(string(rune('a'+i)), f32(s...)))
	}
	if _, err := b.NodeNamed(op, "n", attrs, []string{"y"}, in...); err != nil {
		t.Fatal(err)
	}
	w, err := GroupWork(b.F.Nodes)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestWorkOfKnownShapesIsExact: 2 FLOPs per multiply-add of the product and 4 bytes per
// element of every input and output, for each kind of convolution and matrix product.
func TestWorkOfKnownShapesIsExact(t *testing.T) {
	gemmT := graph.OpGemm.NewAttrs().(*graph.GemmAttrs)
	gemmT.TransA = 1
	ct := graph.OpConvTranspose.NewAttrs().(*graph.ConvTransposeAttrs)
	cases := []struct {
		name   string
		op     graph.Op
		attrs  any
		shapes [][]int64
		want   Work
	}{
		{"regular 3x3 stride 2 with bias (EfficientNet-B0's stem)", graph.OpConv, convAttrs(1, 2, 1),
			[][]int64{{1, 3, 224, 224}, {32, 3, 3, 3}, {32}},
			Work{Op: graph.OpConv, Kind: "regular", Shape: "k3x3 s2 3->32 224x224->112x112",
				FLOPs: 2 * 32 * 112 * 112 * 3 * 3 * 3, Bytes: 4 * (3*224*224 + 32*27 + 32 + 32*112*112)}},
		{"pointwise", graph.OpConv, convAttrs(1, 1, 0),
			[][]int64{{1, 16, 112, 112}, {96, 16, 1, 1}},
			Work{Op: graph.OpConv, Kind: "pointwise", Shape: "k1x1 s1 16->96 112x112->112x112",
				FLOPs: 2 * 96 * 112 * 112 * 16, Bytes: 4 * (16*112*112 + 96*16 + 96*112*112)}},
		{"depthwise 5x5", graph.OpConv, convAttrs(672, 1, 2),
			[][]int64{{1, 672, 14, 14}, {672, 1, 5, 5}},
			Work{Op: graph.OpConv, Kind: "depthwise", Shape: "k5x5 s1 672->672 14x14->14x14 g672",
				FLOPs: 2 * 672 * 14 * 14 * 25, Bytes: 4 * (2*672*14*14 + 672*25)}},
		{"depthwise with a channel multiplier, batch 2", graph.OpConv, convAttrs(8, 1, 0),
			[][]int64{{2, 8, 10, 10}, {16, 1, 3, 3}},
			Work{Op: graph.OpConv, Kind: "depthwise", Shape: "n2 k3x3 s1 8->16 10x10->8x8 g8",
				FLOPs: 2 * 2 * 16 * 8 * 8 * 9, Bytes: 4 * (2*8*10*10 + 16*9 + 2*16*8*8)}},
		{"grouped", graph.OpConv, convAttrs(4, 1, 1),
			[][]int64{{1, 64, 28, 28}, {128, 16, 3, 3}},
			Work{Op: graph.OpConv, Kind: "grouped", Shape: "k3x3 s1 64->128 28x28->28x28 g4",
				FLOPs: 2 * 128 * 28 * 28 * 16 * 9, Bytes: 4 * (64*28*28 + 128*16*9 + 128*28*28)}},
		{"transposed", graph.OpConvTranspose, ct,
			[][]int64{{1, 4, 5, 5}, {4, 2, 3, 3}},
			Work{Op: graph.OpConvTranspose, Kind: "transposed", Shape: "k3x3 s1 4->2 5x5->7x7",
				FLOPs: 2 * 4 * 5 * 5 * 2 * 9, Bytes: 4 * (4*5*5 + 4*2*9 + 2*7*7)}},
		{"batched matmul", graph.OpMatMul, nil,
			[][]int64{{2, 3, 4, 5}, {5, 6}},
			Work{Op: graph.OpMatMul, Kind: "matmul", Shape: "24x5x6",
				FLOPs: 2 * 2 * 3 * 4 * 6 * 5, Bytes: 4 * (2*3*4*5 + 5*6 + 2*3*4*6)}},
		{"gemm with A transposed and C", graph.OpGemm, gemmT,
			[][]int64{{5, 4}, {5, 6}, {6}},
			Work{Op: graph.OpGemm, Kind: "matmul", Shape: "4x5x6",
				FLOPs: 2 * 4 * 6 * 5, Bytes: 4 * (5*4 + 5*6 + 6 + 4*6)}},
		{"an elementwise op: bytes alone", graph.OpAdd, nil,
			[][]int64{{3, 7}, {7}},
			Work{Op: graph.OpAdd, Bytes: 4 * (3*7 + 7 + 3*7)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := one(t, c.op, c.attrs, c.shapes...); got != c.want {
				t.Errorf("got  %+v\nwant %+v", got, c.want)
			}
		})
	}
}

// TestGroupReadsEachOutsideTensorOnce: a convolution with its fused epilogue
// (sigmoid, x·sigmoid(x), and a residual add of the convolution's own input) reads the
// input once although two of its nodes use it, reads nothing the group computes, and
// writes only the last node's output.
func TestGroupReadsEachOutsideTensorOnce(t *testing.T) {
	b := graph.NewBuilder("main")
	x := b.Param("x", f32(1, 8, 6, 6))
	w := b.Param("w", f32(8, 8, 1, 1))
	op1 := func(v *graph.Value, err error) *graph.Value {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	c := op1(b.Op1(graph.OpConv, convAttrs(1, 1, 0), x, w))
	s := op1(b.Op1(graph.OpSigmoid, nil, c))
	m := op1(b.Op1(graph.OpMul, nil, c, s))
	op1(b.Op1(graph.OpAdd, nil, m, x))
	got, err := GroupWork(b.F.Nodes)
	if err != nil {
		t.Fatal(err)
	}
	want := Work{Op: graph.OpConv, Kind: "pointwise", Shape: "k1x1 s1 8->8 6x6->6x6", FLOPs: 2 * 8 * 36 * 8, Bytes: 4 * (8*36 + 64 + 8*36)}
	if got != want {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

// TestSymbolicShapeIsNotCounted: work over a dimension only known at run time is
// refused with ErrNotCounted, not guessed.
func TestSymbolicShapeIsNotCounted(t *testing.T) {
	b := graph.NewBuilder("main")
	x := b.Param("x", graph.TensorType(tensor.Float32, graph.Sym("batch"), graph.Const(8), graph.Const(6), graph.Const(6)))
	w := b.Param("w", f32(8, 8, 1, 1))
	if _, err := b.Op1(graph.OpConv, convAttrs(1, 1, 0), x, w); err != nil {
		t.Fatal(err)
	}
	if _, err := GroupWork(b.F.Nodes); !errors.Is(err, ErrNotCounted) {
		t.Fatalf("got %v, want ErrNotCounted", err)
	}
}

// TestFractionIsTheBoundOverTheTimeTaken: the roofline's least time is the larger of
// the compute and the memory time, and the fraction is it over the time taken.
func TestFractionIsTheBoundOverTheTimeTaken(t *testing.T) {
	m := Machine{PeakFLOPs: 100e9, Bandwidth: 10e9}
	compute := Work{FLOPs: 1e9, Bytes: 1e6} // 10 ms of FMAs, 0.1 ms of memory
	memory := Work{FLOPs: 1e6, Bytes: 50e6} // 0.01 ms of FMAs, 5 ms of memory
	bytesOnly := Work{Bytes: 10e6}          // 1 ms of memory
	for _, c := range []struct {
		w          Work
		secs, want float64
	}{{compute, 0.020, 0.5}, {memory, 0.010, 0.5}, {bytesOnly, 0.004, 0.25}, {bytesOnly, 0.0005, 2}} {
		if got := m.Fraction(c.w, c.secs); got < c.want*0.999999 || got > c.want*1.000001 {
			t.Errorf("%+v in %v s: fraction %v, want %v", c.w, c.secs, got, c.want)
		}
	}
}
