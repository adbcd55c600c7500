package onnx

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/kilnrt/kiln/loader/onnx/onnxpb"
	"github.com/kilnrt/kiln/tensor"
)

// externalModel builds a model whose initializer w lives in an external file at location.
func externalModel(location string, extraOpsets ...*onnxpb.OperatorSetIdProto) []byte {
	s := func(v string) *string { return &v }
	f32 := int32(onnxpb.TensorProto_FLOAT)
	ext := onnxpb.TensorProto_EXTERNAL
	v13 := int64(13)
	vi := func(name string) *onnxpb.ValueInfoProto {
		return &onnxpb.ValueInfoProto{Name: s(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{
			ElemType: &f32, Shape: &onnxpb.TensorShapeProto{Dim: []*onnxpb.TensorShapeProto_Dimension{{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: 3}}}}}}}}
	}
	m := &onnxpb.ModelProto{
		OpsetImport: append([]*onnxpb.OperatorSetIdProto{{Domain: s(""), Version: &v13}}, extraOpsets...),
		Graph: &onnxpb.GraphProto{
			Name:   s("g"),
			Input:  []*onnxpb.ValueInfoProto{vi("x")},
			Output: []*onnxpb.ValueInfoProto{vi("y")},
			Initializer: []*onnxpb.TensorProto{{Name: s("w"), DataType: &f32, Dims: []int64{3}, DataLocation: &ext,
				ExternalData: []*onnxpb.StringStringEntryProto{{Key: s("location"), Value: s(location)}, {Key: s("offset"), Value: s("4")}, {Key: s("length"), Value: s("12")}}}},
			Node: []*onnxpb.NodeProto{{OpType: s("Add"), Input: []string{"x", "w"}, Output: []string{"y"}}},
		},
	}
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

func TestExternalData(t *testing.T) {
	dir := t.TempDir()
	raw := make([]byte, 16)
	for i, v := range []float32{1.5, -2, 3} {
		binary.LittleEndian.PutUint32(raw[4+4*i:], math.Float32bits(v))
	}
	if err := os.MkdirAll(filepath.Join(dir, "weights"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "weights", "w.bin"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	// an opset import of a domain that no node uses is tolerated
	nchwc, v1 := "com.microsoft.nchwc", int64(1)
	path := filepath.Join(dir, "model.onnx")
	if err := os.WriteFile(path, externalModel("weights/w.bin", &onnxpb.OperatorSetIdProto{Domain: &nchwc, Version: &v1}), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := Load(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := m.Main.Consts[0].Const
	if got := w.String(); got != (tensor.MustFromSlice(tensor.Shape{3}, []float32{1.5, -2, 3})).String() {
		t.Errorf("external weights %s", got)
	}
	for _, bad := range []string{"../w.bin", "/etc/passwd", "weights/../../w.bin", "missing.bin"} {
		_, err := LoadBytes(externalModel(bad), dir, Options{})
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("location %q: got %v, want ErrInvalid", bad, err)
		}
	}
	// a symlink inside the model folder that points outside it is refused too
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "w.bin"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "w.bin"), filepath.Join(dir, "link.bin")); err == nil {
		if _, err := LoadBytes(externalModel("link.bin"), dir, Options{}); !errors.Is(err, ErrInvalid) {
			t.Errorf("symlink out of the folder: got %v, want ErrInvalid", err)
		}
	}
	// without a model directory, external data is refused as unsupported
	if _, err := LoadBytes(externalModel("weights/w.bin"), "", Options{}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("no directory: got %v", err)
	}
}

func TestUnsupportedOpError(t *testing.T) {
	s := func(v string) *string { return &v }
	v13, v1 := int64(13), int64(1)
	m, _ := proto.Marshal(&onnxpb.ModelProto{
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Version: &v13}, {Domain: s("com.example"), Version: &v1}},
		Graph: &onnxpb.GraphProto{Name: s("g"), Node: []*onnxpb.NodeProto{
			{Name: s("n1"), OpType: s("Frob"), Domain: s("com.example"), Output: []string{"y"}},
		}},
	})
	_, err := LoadBytes(m, "", Options{})
	var ue *UnsupportedOpError
	if !errors.As(err, &ue) || !errors.Is(err, ErrUnsupported) || !errors.Is(err, ErrUnsupportedOp) {
		t.Fatalf("got %v, want an UnsupportedOpError", err)
	}
	if ue.Op != "Frob" || ue.Domain != "com.example" || ue.Node != "n1" || ue.Opset != 1 {
		t.Errorf("error fields %+v", ue)
	}
	if _, err := LoadBytes([]byte("not a model"), "", Options{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("garbage: got %v, want ErrInvalid", err)
	}
}
