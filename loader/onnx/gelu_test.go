package onnx

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loader/onnx/onnxpb"
)

// geluModel is an opset-20 model y = Gelu(x) with the given approximate attribute
// ("" leaves it out).
func geluModel(approx string) []byte {
	s := func(v string) *string { return &v }
	f32, v20 := int32(onnxpb.TensorProto_FLOAT), int64(20)
	vi := func(name string) *onnxpb.ValueInfoProto {
		return &onnxpb.ValueInfoProto{Name: s(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{
			ElemType: &f32, Shape: &onnxpb.TensorShapeProto{Dim: []*onnxpb.TensorShapeProto_Dimension{{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: 3}}}}}}}}
	}
	node := &onnxpb.NodeProto{Name: s("g"), OpType: s("Gelu"), Input: []string{"x"}, Output: []string{"y"}}
	if approx != "" {
		typ := onnxpb.AttributeProto_STRING
		node.Attribute = []*onnxpb.AttributeProto{{Name: s("approximate"), Type: &typ, S: []byte(approx)}}
	}
	b, err := proto.Marshal(&onnxpb.ModelProto{
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: s(""), Version: &v20}},
		Graph: &onnxpb.GraphProto{Name: s("g"), Input: []*onnxpb.ValueInfoProto{vi("x")},
			Output: []*onnxpb.ValueInfoProto{vi("y")}, Node: []*onnxpb.NodeProto{node}},
	})
	if err != nil {
		panic(err)
	}
	return b
}

// TestGeluImport: Gelu maps to graph.OpGelu with its string attribute (default "none");
// an approximation ONNX does not define is refused.
func TestGeluImport(t *testing.T) {
	for approx, want := range map[string]string{"": "none", "none": "none", "tanh": "tanh"} {
		m, err := LoadBytes(geluModel(approx), t.TempDir(), Options{})
		if err != nil {
			t.Fatalf("approximate %q: %v", approx, err)
		}
		n := m.Main.Nodes[0]
		if a, ok := n.Attrs.(*graph.GeluAttrs); n.Op != graph.OpGelu || !ok || a.Approximate != want {
			t.Errorf("approximate %q: got %v %#v, want Gelu %q", approx, n.Op, n.Attrs, want)
		}
	}
	if _, err := LoadBytes(geluModel("erf"), t.TempDir(), Options{}); err == nil {
		t.Error(`approximate="erf" was accepted`)
	}
}
