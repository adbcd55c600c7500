package onnx_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loader/onnx"
	"github.com/kilnrt/kiln/loader/onnx/onnxpb"
)

func f32Info(name string, dims ...int64) *onnxpb.ValueInfoProto {
	ds := []*onnxpb.TensorShapeProto_Dimension{}
	for _, d := range dims {
		ds = append(ds, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}})
	}
	return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
		TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)), Shape: &onnxpb.TensorShapeProto{Dim: ds}}}}}
}

func node(name, op string, in []string, out ...string) *onnxpb.NodeProto {
	return &onnxpb.NodeProto{Name: proto.String(name), OpType: proto.String(op), Input: in, Output: out}
}

func marshalGraph(t *testing.T, g *onnxpb.GraphProto) []byte {
	t.Helper()
	b, err := proto.Marshal(&onnxpb.ModelProto{IrVersion: proto.Int64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(17)}}, Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// orderModel is y = Add(Mul(Relu(x), w), x) with w = Cast(w16), written in the given
// node order (names "relu", "mul", "add", "cast").
func orderModel(t *testing.T, order ...string) []byte {
	t.Helper()
	all := map[string]*onnxpb.NodeProto{
		"relu": node("relu", "Relu", []string{"x"}, "r"),
		"mul":  node("mul", "Mul", []string{"r", "w"}, "m"),
		"add":  node("add", "Add", []string{"m", "x"}, "y"),
		"cast": {Name: proto.String("cast"), OpType: proto.String("Cast"), Input: []string{"w16"}, Output: []string{"w"},
			Attribute: []*onnxpb.AttributeProto{{Name: proto.String("to"), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(int64(onnxpb.TensorProto_FLOAT))}}},
	}
	var nodes []*onnxpb.NodeProto
	for _, name := range order {
		nodes = append(nodes, all[name])
	}
	// 0.5, -2, 1.25 as float16 bits
	w16 := &onnxpb.TensorProto{Name: proto.String("w16"), Dims: []int64{3}, DataType: proto.Int32(int32(onnxpb.TensorProto_FLOAT16)),
		Int32Data: []int32{0x3800, 0xc000, 0x3d00}}
	return marshalGraph(t, &onnxpb.GraphProto{Name: proto.String("order"), Node: nodes, Initializer: []*onnxpb.TensorProto{w16},
		Input: []*onnxpb.ValueInfoProto{f32Info("x", 2, 3)}, Output: []*onnxpb.ValueInfoProto{f32Info("y", 2, 3)}})
}

func nodeNames(f *graph.Func) []string {
	var names []string
	for _, n := range f.Nodes {
		names = append(names, n.Name)
	}
	return names
}

// TestNodesOutOfOrderAreSorted: a model whose nodes are not in topological order (a Cast
// appended after its consumers, or the whole list reversed) loads with its nodes sorted,
// keeping the file's order among the nodes that were already in place; a model in order
// keeps its order.
func TestNodesOutOfOrderAreSorted(t *testing.T) {
	cases := []struct{ file, want []string }{
		{[]string{"relu", "mul", "add", "cast"}, []string{"relu", "cast", "mul", "add"}},
		{[]string{"add", "mul", "relu", "cast"}, []string{"relu", "cast", "mul", "add"}},
		{[]string{"cast", "add", "mul", "relu"}, []string{"cast", "relu", "mul", "add"}},
		{[]string{"cast", "relu", "mul", "add"}, []string{"cast", "relu", "mul", "add"}},
		{[]string{"relu", "cast", "mul", "add"}, []string{"relu", "cast", "mul", "add"}},
	}
	for _, c := range cases {
		m, err := onnx.LoadBytes(orderModel(t, c.file...), "", onnx.Options{})
		if err != nil {
			t.Fatalf("nodes %v: %v", c.file, err)
		}
		if got := nodeNames(m.Main); !slices.Equal(got, c.want) {
			t.Errorf("nodes %v loaded in the order %v, want %v", c.file, got, c.want)
		}
	}
}

// TestSubgraphReadingALaterNodeIsSorted: an If whose branch reads a value of the main
// graph produced by a node listed after the If is placed after that node, and a branch's
// own nodes are sorted too.
func TestSubgraphReadingALaterNodeIsSorted(t *testing.T) {
	then := &onnxpb.GraphProto{Name: proto.String("then"),
		Node:   []*onnxpb.NodeProto{node("t2", "Neg", []string{"t1"}, "t"), node("t1", "Relu", []string{"late"}, "t1")},
		Output: []*onnxpb.ValueInfoProto{f32Info("t", 3)}}
	els := &onnxpb.GraphProto{Name: proto.String("else"),
		Node:   []*onnxpb.NodeProto{node("e1", "Identity", []string{"x"}, "e")},
		Output: []*onnxpb.ValueInfoProto{f32Info("e", 3)}}
	graphAttr := onnxpb.AttributeProto_GRAPH
	ifNode := node("if", "If", []string{"c"}, "y")
	ifNode.Attribute = []*onnxpb.AttributeProto{{Name: proto.String("then_branch"), Type: &graphAttr, G: then},
		{Name: proto.String("else_branch"), Type: &graphAttr, G: els}}
	cond := f32Info("c")
	cond.Type.GetTensorType().ElemType = proto.Int32(int32(onnxpb.TensorProto_BOOL))
	b := marshalGraph(t, &onnxpb.GraphProto{Name: proto.String("sub"),
		Node:  []*onnxpb.NodeProto{ifNode, node("late", "Abs", []string{"x"}, "late")},
		Input: []*onnxpb.ValueInfoProto{f32Info("x", 3), cond}, Output: []*onnxpb.ValueInfoProto{f32Info("y", 3)}})
	m, err := onnx.LoadBytes(b, "", onnx.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := nodeNames(m.Main); !slices.Equal(got, []string{"late", "if"}) {
		t.Fatalf("main graph in the order %v, want [late if]", got)
	}
	thenF := m.Main.Nodes[1].Attrs.(*graph.IfAttrs).ThenBranch
	if got := nodeNames(thenF); !slices.Equal(got, []string{"t1", "t2"}) {
		t.Fatalf("then branch in the order %v, want [t1 t2]", got)
	}
}

// TestNodeCycleIsAnErrorNamingItsNodes: nodes that read each other's outputs are an
// invalid model, and the error names the nodes on the cycle (not the ones downstream).
func TestNodeCycleIsAnErrorNamingItsNodes(t *testing.T) {
	b := marshalGraph(t, &onnxpb.GraphProto{Name: proto.String("cycle"),
		Node: []*onnxpb.NodeProto{
			node("a", "Add", []string{"x", "c"}, "a"),
			node("b", "Relu", []string{"a"}, "b"),
			node("c", "Neg", []string{"b"}, "c"),
			node("d", "Abs", []string{"c"}, "y"),
		},
		Input: []*onnxpb.ValueInfoProto{f32Info("x", 3)}, Output: []*onnxpb.ValueInfoProto{f32Info("y", 3)}})
	_, err := onnx.LoadBytes(b, "", onnx.Options{})
	if !errors.Is(err, onnx.ErrInvalid) {
		t.Fatalf("a cycle loaded with %v, want ErrInvalid", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, "cycle") || !strings.Contains(msg, `"a" -> "b" -> "c" -> "a"`) || strings.Contains(msg, `"d"`) {
		t.Fatalf("error %q does not name the cycle a -> b -> c -> a alone", msg)
	}
}
