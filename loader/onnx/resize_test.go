package onnx

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loader/onnx/onnxpb"
)

// TestResize19AttributesImport: an opset-19 Resize with antialias, axes and
// keep_aspect_ratio_policy over constant sizes loads with those attributes, and its
// output extents follow the policy (sizes 2×3 of a 4×4 image under not_larger: 2×2).
func TestResize19AttributesImport(t *testing.T) {
	s := func(v string) *string { return &v }
	f32, i64, v19 := int32(onnxpb.TensorProto_FLOAT), int32(onnxpb.TensorProto_INT64), int64(19)
	vi := func(name string, dims ...int64) *onnxpb.ValueInfoProto {
		var shape []*onnxpb.TensorShapeProto_Dimension
		for _, d := range dims {
			shape = append(shape, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}})
		}
		return &onnxpb.ValueInfoProto{Name: s(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{
			ElemType: &f32, Shape: &onnxpb.TensorShapeProto{Dim: shape}}}}}
	}
	ints, str, num := onnxpb.AttributeProto_INTS, onnxpb.AttributeProto_STRING, onnxpb.AttributeProto_INT
	one := int64(1)
	node := &onnxpb.NodeProto{Name: s("r"), OpType: s("Resize"), Input: []string{"x", "", "", "sizes"}, Output: []string{"y"},
		Attribute: []*onnxpb.AttributeProto{
			{Name: s("antialias"), Type: &num, I: &one},
			{Name: s("axes"), Type: &ints, Ints: []int64{2, 3}},
			{Name: s("keep_aspect_ratio_policy"), Type: &str, S: []byte("not_larger")},
			{Name: s("mode"), Type: &str, S: []byte("linear")},
		}}
	sizes := &onnxpb.TensorProto{Name: s("sizes"), DataType: &i64, Dims: []int64{2}, Int64Data: []int64{2, 3}}
	b, err := proto.Marshal(&onnxpb.ModelProto{
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: s(""), Version: &v19}},
		Graph: &onnxpb.GraphProto{Name: s("g"), Input: []*onnxpb.ValueInfoProto{vi("x", 1, 1, 4, 4)}, Initializer: []*onnxpb.TensorProto{sizes},
			Output: []*onnxpb.ValueInfoProto{vi("y", 1, 1, 2, 2)}, Node: []*onnxpb.NodeProto{node}},
	})
	if err != nil {
		t.Fatal(err)
	}
	m, err := LoadBytes(b, t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	n := m.Main.Nodes[len(m.Main.Nodes)-1]
	a, ok := n.Attrs.(*graph.ResizeAttrs)
	if n.Op != graph.OpResize || !ok || a.Antialias != 1 || len(a.Axes) != 2 || a.KeepAspectRatioPolicy != "not_larger" {
		t.Fatalf("got %v %#v", n.Op, n.Attrs)
	}
	if got := n.Outputs[0].Type.String(); got != "f32[1,1,2,2]" {
		t.Errorf("output type %s, want f32[1,1,2,2]", got)
	}
}
