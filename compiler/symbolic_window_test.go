package compiler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loader/onnx"
	"github.com/kilnrt/kiln/loader/onnx/onnxpb"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// stridedWindowModule: strided windows over a symbolic height and width, whose output
// counts are no polynomials of them (floor((h - 1) / 2) + 1): two branches striding
// alike and added, a padded MaxPool, a padded AveragePool counting the taps inside,
// and a Conv without padding that needs 3 input rows; and stride 1 with SAME padding (a
// 2×2 Conv, a MaxPool), whose padding does not depend on the extent.
func stridedWindowModule(t *testing.T) *graph.Module {
	t.Helper()
	w3 := make([]string, 36)
	for i := range w3 {
		w3[i] = fmt.Sprint(float32(i%7)*0.25 - 0.7)
	}
	m, err := graph.Parse(`module opsets(""=17)
func @main(%x: f32[1,2,h,w]) {
  const %w3: f32[2,2,3,3] = [` + strings.Join(w3, ", ") + `]
  const %w1: f32[2,2,1,1] = [0.5, -1, 2, 0.25]
  const %w2: f32[2,2,2,2] = [1, -0.5, 0.25, 2, -1, 0.75, 0.5, -2, 1.5, 0.125, -0.25, 1, 0.5, 0.5, -1, 2]
  %a = Conv(%x, %w3) {kernel_shape=[3,3], pads=[1,1,1,1], strides=[2,2]} : f32[1,2,_p,_q]
  %b = Conv(%x, %w1) {kernel_shape=[1,1], strides=[2,2]} : f32[1,2,_p,_q]
  %s = Add(%a, %b) : f32[1,2,_p,_q]
  %r = Relu(%s) : f32[1,2,_p,_q]
  %m = MaxPool(%r) {kernel_shape=[3,3], pads=[1,1,1,1], strides=[2,2]} : f32[1,2,_u,_v]
  %g = AveragePool(%m) {kernel_shape=[2,3], pads=[1,0,1,2], strides=[3,2]} : f32[1,2,_i,_j]
  %c = Conv(%x, %w3) {kernel_shape=[3,3], strides=[2,3]} : f32[1,2,_k,_l]
  %e = Conv(%x, %w2) {auto_pad="SAME_UPPER", kernel_shape=[2,2]} : f32[1,2,h,w]
  %f = MaxPool(%e) {auto_pad="SAME_LOWER", kernel_shape=[3,2]} : f32[1,2,h,w]
  return %g, %c, %f
}`)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestSymbolicStridedWindows: compiled once with h and w free (at -O0 and -O3), the
// executable computes the strided windows' output counts from the input's shape (odd
// and even extents, windows that only just fit, and inputs too small for the unpadded
// Conv, whose output is then empty) and matches the reference at each.
func TestSymbolicStridedWindows(t *testing.T) {
	for _, level := range []engine.Level{engine.O0, engine.LevelDefault} {
		t.Run(level.String(), func(t *testing.T) {
			m := stridedWindowModule(t)
			var runs [][]*tensor.Tensor
			for i, hw := range [][2]int{{9, 13}, {16, 16}, {3, 3}, {4, 7}, {2, 8}, {1, 1}, {33, 20}, {9, 13}} {
				runs = append(runs, []*tensor.Tensor{f32(uint64(i+1), 1, 2, hw[0], hw[1])})
			}
			_, res := checkSymbolic(t, m, target.Host(), Options{Recipe: engine.Recipe{Level: level}}, runs)
			if got := res.Exe.Inputs[0].Shape; got[2] != -1 || got[3] != -1 {
				t.Fatalf("input shape %v: want h and w dynamic", got)
			}
		})
	}
}

// TestSymbolicSAMEStride2CompilesPerShape: SAME padding with stride 2 over a symbolic
// extent pads by the extent's parity, which no kernel definition takes yet: the generic
// build is refused naming it (a server then compiles per shape), never a wrong kernel.
func TestSymbolicSAMEStride2CompilesPerShape(t *testing.T) {
	m, err := graph.Parse(`module opsets(""=17)
func @main(%x: f32[1,1,h,w]) {
  const %w: f32[1,1,3,3] = [1, 2, 3, 4, 5, 6, 7, 8, 9]
  %c = Conv(%x, %w) {auto_pad="SAME_UPPER", kernel_shape=[3,3], strides=[2,2]} : f32[1,1,_a,_b]
  return %c
}`)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Build(m, target.Host(), Options{CPU: openCPU(t)})
	if err == nil || !strings.Contains(err.Error(), "auto_pad SAME_UPPER and stride 2") {
		t.Fatalf("got %v, want a refusal naming SAME with stride 2", err)
	}
}

// TestSymbolicBroadcastOfFreeDimsIsChecked: free dims that meet in a broadcast (an Add
// of x[n] and z[m]), in a MatMul's reduction (a[r,k] by b[j,4]), on Concat's other axis
// (x[n] beside c[q] as columns) or in a Gemm's C (c against 4 columns) are taken to be
// equal, so the kernels read them as equal; a call where they differ fails with
// vm.ErrGenericShape naming the node, never reads past an operand (z of 1 element read
// as 3 gave x's own elements back).
func TestSymbolicBroadcastOfFreeDimsIsChecked(t *testing.T) {
	m, err := graph.Parse(`module opsets(""=17)
func @main(%x: f32[n], %z: f32[m], %a: f32[r,k], %b: f32[j,4], %c: f32[q]) {
  const %ax: i64[1]{1} = [1]
  %s = Add(%x, %z) : f32[n]
  %p = MatMul(%a, %b) : f32[r,4]
  %x2 = Unsqueeze(%x, %ax) : f32[n,1]
  %c2 = Unsqueeze(%c, %ax) : f32[q,1]
  %cc = Concat(%x2, %c2) {axis=1} : f32[n,2]
  %g = Gemm(%a, %b, %c) {transA=0} : f32[r,4]
  return %s, %p, %cc, %g
}`)
	if err != nil {
		t.Fatal(err)
	}
	in := func(n, m, r, k, j, q int) []*tensor.Tensor {
		return []*tensor.Tensor{f32(1, n), f32(2, m), f32(3, r, k), f32(4, j, 4), f32(5, q)}
	}
	runs := [][]*tensor.Tensor{in(4, 4, 2, 5, 5, 4), in(4, 4, 1, 1, 1, 4)}
	machine, _ := checkSymbolic(t, m, target.Host(), Options{}, runs)
	for _, c := range []struct {
		name string
		in   []*tensor.Tensor
		node string
	}{
		{"z of 1 element", in(4, 1, 2, 5, 5, 4), "Add"},
		{"z of 2 elements", in(4, 2, 2, 5, 5, 4), "Add"},
		{"k 5, j 6", in(4, 4, 2, 5, 6, 4), "MatMul"},
		{"c of 3 beside x of 4", in(4, 4, 4, 5, 5, 3), "Concat"},
		{"Gemm's C of 1 element", in(1, 1, 2, 5, 5, 1), "Gemm"},
	} {
		_, err := machine.Run(context.Background(), c.in)
		if !errors.Is(err, vm.ErrGenericShape) || !strings.Contains(err.Error(), c.node) {
			t.Fatalf("%s: got %v, want ErrGenericShape naming %s", c.name, err, c.node)
		}
	}
}

// TestSymbolicStridedWindowPerSequenceItem: a SequenceMap whose body strides a Conv
// over each item's own width (x split into pieces of run-time widths) recomputes the
// body's derived extents from every item's shape, as the reference does, at two splits.
func TestSymbolicStridedWindowPerSequenceItem(t *testing.T) {
	info := func(name string, et onnxpb.TensorProto_DataType, dims ...any) *onnxpb.ValueInfoProto {
		var ds []*onnxpb.TensorShapeProto_Dimension
		for _, d := range dims {
			switch d := d.(type) {
			case int:
				ds = append(ds, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: int64(d)}})
			case string:
				ds = append(ds, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: d}})
			}
		}
		return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
			TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(int32(et)), Shape: &onnxpb.TensorShapeProto{Dim: ds}}}}}
	}
	ints := func(name string, v ...int64) *onnxpb.AttributeProto {
		return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INTS.Enum(), Ints: v}
	}
	node := func(op string, in, out []string, attrs ...*onnxpb.AttributeProto) *onnxpb.NodeProto {
		return &onnxpb.NodeProto{OpType: proto.String(op), Input: in, Output: out, Attribute: attrs}
	}
	w := make([]float32, 3*2*3*3)
	for i := range w {
		w[i] = float32(i%5)*0.5 - 1
	}
	f, i64 := onnxpb.TensorProto_FLOAT, onnxpb.TensorProto_INT64
	body := &onnxpb.GraphProto{Name: proto.String("body"),
		Node:   []*onnxpb.NodeProto{node("Conv", []string{"item", "w"}, []string{"out"}, ints("pads", 1, 1, 1, 1), ints("strides", 2, 2))},
		Input:  []*onnxpb.ValueInfoProto{info("item", f, 1, 2, "bh", "bw")},
		Output: []*onnxpb.ValueInfoProto{{Name: proto.String("out")}}}
	g := &onnxpb.GraphProto{Name: proto.String("g"),
		Node: []*onnxpb.NodeProto{
			node("SplitToSequence", []string{"x", "split"}, []string{"seq"}, &onnxpb.AttributeProto{Name: proto.String("axis"), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(3)}),
			node("SequenceMap", []string{"seq"}, []string{"mapped"}, &onnxpb.AttributeProto{Name: proto.String("body"), Type: onnxpb.AttributeProto_GRAPH.Enum(), G: body}),
			node("ConcatFromSequence", []string{"mapped"}, []string{"y"}, &onnxpb.AttributeProto{Name: proto.String("axis"), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(3)}),
		},
		Initializer: []*onnxpb.TensorProto{{Name: proto.String("w"), DataType: proto.Int32(int32(f)), Dims: []int64{3, 2, 3, 3}, FloatData: w}},
		Input:       []*onnxpb.ValueInfoProto{info("x", f, 1, 2, "h", "w"), info("split", i64, 2)},
		Output:      []*onnxpb.ValueInfoProto{{Name: proto.String("y")}}}
	b, err := proto.Marshal(&onnxpb.ModelProto{IrVersion: proto.Int64(8), OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(17)}}, Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	m, err := onnx.LoadBytes(b, "", onnx.Options{})
	if err != nil {
		t.Fatal(err)
	}
	split := func(v ...int64) *tensor.Tensor { return tensor.MustFromSlice(tensor.Shape{len(v)}, v) }
	checkSymbolic(t, m, target.Host(), Options{}, [][]*tensor.Tensor{
		{f32(1, 1, 2, 7, 9), split(4, 5)},
		{f32(2, 1, 2, 5, 12), split(3, 9)},
	})
}
