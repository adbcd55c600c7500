package onnx

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loader/onnx/onnxpb"
)

// signalNodeModel loads a model of one node at the given opset over float inputs of the
// given shapes (named in0, in1, ...) and int64 initializers.
func signalNodeModel(t *testing.T, opset int64, node *onnxpb.NodeProto, inputs [][]int64, inits map[string][]int64) *graph.Module {
	t.Helper()
	s := func(v string) *string { return &v }
	f32, i64 := int32(onnxpb.TensorProto_FLOAT), int32(onnxpb.TensorProto_INT64)
	g := &onnxpb.GraphProto{Name: s("g"), Node: []*onnxpb.NodeProto{node}}
	for k, dims := range inputs {
		var shape []*onnxpb.TensorShapeProto_Dimension
		for _, d := range dims {
			shape = append(shape, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}})
		}
		g.Input = append(g.Input, &onnxpb.ValueInfoProto{Name: s(node.Input[k]), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
			TensorType: &onnxpb.TypeProto_Tensor{ElemType: &f32, Shape: &onnxpb.TensorShapeProto{Dim: shape}}}}})
	}
	for name, v := range inits {
		var dims []int64 // one value: a scalar
		if len(v) != 1 {
			dims = []int64{int64(len(v))}
		}
		g.Initializer = append(g.Initializer, &onnxpb.TensorProto{Name: s(name), DataType: &i64, Dims: dims, Int64Data: v})
	}
	g.Output = []*onnxpb.ValueInfoProto{{Name: s(node.Output[0])}}
	b, err := proto.Marshal(&onnxpb.ModelProto{OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: s(""), Version: &opset}}, Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	m, err := LoadBytes(b, t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func signalIntAttr(name string, v int64) *onnxpb.AttributeProto {
	typ := onnxpb.AttributeProto_INT
	return &onnxpb.AttributeProto{Name: &name, Type: &typ, I: &v}
}

// TestDFTAxisLoadsAsInputAtEveryOpset: DFT-17's axis attribute (default 1) and
// DFT-20's axis input both become input 2, and the transformed axis's extent follows
// (onesided: n/2+1).
func TestDFTAxisLoadsAsInputAtEveryOpset(t *testing.T) {
	s := func(v string) *string { return &v }
	cases := []struct {
		name  string
		opset int64
		node  *onnxpb.NodeProto
		inits map[string][]int64
		axis  int64
		want  string
	}{
		{"17 default axis", 17, &onnxpb.NodeProto{OpType: s("DFT"), Input: []string{"x"}, Output: []string{"y"}}, nil, 1, "f32[1,5,6,2]"},
		{"17 axis 2 onesided", 17, &onnxpb.NodeProto{OpType: s("DFT"), Input: []string{"x"}, Output: []string{"y"},
			Attribute: []*onnxpb.AttributeProto{signalIntAttr("axis", 2), signalIntAttr("onesided", 1)}}, nil, 2, "f32[1,5,4,2]"},
		{"20 axis input", 20, &onnxpb.NodeProto{OpType: s("DFT"), Input: []string{"x", "", "axis"}, Output: []string{"y"},
			Attribute: []*onnxpb.AttributeProto{signalIntAttr("onesided", 1)}}, map[string][]int64{"axis": {-3}}, -3, "f32[1,3,6,2]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := signalNodeModel(t, c.opset, c.node, [][]int64{{1, 5, 6, 1}}, c.inits)
			n := m.Main.Nodes[len(m.Main.Nodes)-1]
			if n.Op != graph.OpDFT {
				t.Fatalf("loaded %v", n.Op)
			}
			axis := n.ConstInput(2)
			if axis == nil || axis.Len() != 1 || axis.Int64s()[0] != c.axis {
				t.Fatalf("input 2 is %v, want the constant %d", axis, c.axis)
			}
			if got := n.Outputs[0].Type.String(); got != c.want {
				t.Errorf("output type %s, want %s", got, c.want)
			}
		})
	}
}

// TestRoiAlign10LoadsWithOutputHalfPixel: RoiAlign-10 has no
// coordinate_transformation_mode and means output_half_pixel; RoiAlign-16 without it
// means half_pixel.
func TestRoiAlign10LoadsWithOutputHalfPixel(t *testing.T) {
	s := func(v string) *string { return &v }
	for opset, want := range map[int64]string{10: "output_half_pixel", 16: "half_pixel"} {
		node := &onnxpb.NodeProto{OpType: s("RoiAlign"), Input: []string{"x", "rois", "bi"}, Output: []string{"y"},
			Attribute: []*onnxpb.AttributeProto{signalIntAttr("output_height", 2), signalIntAttr("output_width", 3)}}
		m := signalNodeModel(t, opset, node, [][]int64{{1, 2, 8, 8}, {4, 4}}, map[string][]int64{"bi": {0, 0, 0, 0}})
		n := m.Main.Nodes[len(m.Main.Nodes)-1]
		a, ok := n.Attrs.(*graph.RoiAlignAttrs)
		if !ok || a.CoordinateTransformationMode != want {
			t.Errorf("opset %d: attributes %#v, want coordinate_transformation_mode %s", opset, n.Attrs, want)
		}
		if got := n.Outputs[0].Type.String(); got != "f32[4,2,2,3]" {
			t.Errorf("opset %d: output type %s, want f32[4,2,2,3]", opset, got)
		}
	}
}
