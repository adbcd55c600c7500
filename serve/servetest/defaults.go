package servetest

import (
	"os"
	"path/filepath"

	"google.golang.org/protobuf/proto"

	"github.com/kilnrt/kiln/loader/onnx/onnxpb"
)

// DefaultB is the default of the "addb" model's input b.
var DefaultB = []float32{10, 20}

// WriteDefaultsRepo adds the model "addb" (version 1, no config.pbtxt) to the
// repository repo: y = x + b, x, b and y FP32 [2], where b is a graph input with an
// initializer (DefaultB), in a model of IR version ir: from 4 on an input with a
// default, which a request may omit; before, a constant.
func WriteDefaultsRepo(repo string, ir int64) error {
	f32 := int32(onnxpb.TensorProto_FLOAT)
	vi := func(name string) *onnxpb.ValueInfoProto {
		return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
			TensorType: &onnxpb.TypeProto_Tensor{ElemType: &f32, Shape: &onnxpb.TensorShapeProto{Dim: []*onnxpb.TensorShapeProto_Dimension{
				{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: 2}}}}}}}}
	}
	b, err := proto.Marshal(&onnxpb.ModelProto{IrVersion: proto.Int64(ir),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(17)}},
		Graph: &onnxpb.GraphProto{Name: proto.String("addb"), Input: []*onnxpb.ValueInfoProto{vi("x"), vi("b")},
			Initializer: []*onnxpb.TensorProto{{Name: proto.String("b"), DataType: &f32, Dims: []int64{2}, FloatData: DefaultB}},
			Output:      []*onnxpb.ValueInfoProto{vi("y")},
			Node:        []*onnxpb.NodeProto{{OpType: proto.String("Add"), Name: proto.String("add"), Input: []string{"x", "b"}, Output: []string{"y"}}}}})
	if err != nil {
		return err
	}
	dir := filepath.Join(repo, "addb", "1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "model.onnx"), b, 0o644)
}
