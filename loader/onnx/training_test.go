package onnx_test

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loader/onnx"
	"github.com/kilnrt/kiln/loader/onnx/onnxpb"
)

// momentumModel is a Momentum node of the training domain imported at opset version.
func momentumModel(t *testing.T, version int64) []byte {
	t.Helper()
	s := func(v string) *string { return &v }
	f32, i64 := int32(onnxpb.TensorProto_FLOAT), int32(onnxpb.TensorProto_INT64)
	vi := func(name string, elem int32, dims ...int64) *onnxpb.ValueInfoProto {
		var ds []*onnxpb.TensorShapeProto_Dimension
		for _, d := range dims {
			ds = append(ds, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}})
		}
		return &onnxpb.ValueInfoProto{Name: s(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{
			ElemType: &elem, Shape: &onnxpb.TensorShapeProto{Dim: ds}}}}}
	}
	ft, st := onnxpb.AttributeProto_FLOAT, onnxpb.AttributeProto_STRING
	half, zero := float32(0.5), float32(0)
	node := &onnxpb.NodeProto{OpType: s("Momentum"), Domain: s(graph.TrainingDomain),
		Input: []string{"R", "T", "X", "G", "V"}, Output: []string{"X_new", "V_new"},
		Attribute: []*onnxpb.AttributeProto{
			{Name: s("alpha"), Type: &ft, F: &half}, {Name: s("beta"), Type: &ft, F: &half},
			{Name: s("norm_coefficient"), Type: &ft, F: &zero}, {Name: s("mode"), Type: &st, S: []byte("nesterov")},
		}}
	v17, ir := int64(17), int64(8)
	b, err := proto.Marshal(&onnxpb.ModelProto{
		IrVersion:   &ir,
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: s(""), Version: &v17}, {Domain: s(graph.TrainingDomain), Version: &version}},
		Graph: &onnxpb.GraphProto{Name: s("g"),
			Input:  []*onnxpb.ValueInfoProto{vi("R", f32), vi("T", i64), vi("X", f32, 4), vi("G", f32, 4), vi("V", f32, 4)},
			Output: []*onnxpb.ValueInfoProto{vi("X_new", f32, 4), vi("V_new", f32, 4)}, Node: []*onnxpb.NodeProto{node}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestTrainingDomainLoadsAtOpset1Only(t *testing.T) {
	m, err := onnx.LoadBytes(momentumModel(t, 1), t.TempDir(), onnx.Options{})
	if err != nil {
		t.Fatal(err)
	}
	n := m.Main.Nodes[0]
	if a, ok := n.Attrs.(*graph.MomentumAttrs); n.Op != graph.OpMomentum || !ok || a.Mode != "nesterov" {
		t.Fatalf("got %v %#v", n.Op, n.Attrs)
	}
	if _, err := onnx.LoadBytes(momentumModel(t, 2), t.TempDir(), onnx.Options{}); !errors.Is(err, onnx.ErrUnsupported) {
		t.Fatalf("opset 2: got %v, want ErrUnsupported", err)
	}
}

// TestGradientIsRefusedSayingWhy: the training domain's Gradient op is refused as
// unsupported with the reason, not as an unknown operator.
func TestGradientIsRefusedSayingWhy(t *testing.T) {
	var mp onnxpb.ModelProto
	if err := proto.Unmarshal(momentumModel(t, 1), &mp); err != nil {
		t.Fatal(err)
	}
	op := "Gradient"
	mp.Graph.Node[0].OpType, mp.Graph.Node[0].Attribute = &op, nil
	b, err := proto.Marshal(&mp)
	if err != nil {
		t.Fatal(err)
	}
	_, err = onnx.LoadBytes(b, t.TempDir(), onnx.Options{})
	if !errors.Is(err, onnx.ErrUnsupported) || !strings.Contains(err.Error(), "automatic differentiation") {
		t.Fatalf("got %v, want ErrUnsupported saying Gradient is automatic differentiation", err)
	}
}
