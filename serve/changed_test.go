package serve

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/kilnrt/kiln/loader/onnx/onnxpb"
	"github.com/kilnrt/kiln/tensor"
)

// addModel is an ONNX model y = x + c for x float[2] with the constant inline: two
// values of c are two models with the same interface and different answers.
func addModel(t *testing.T, c float32) []byte {
	t.Helper()
	s := func(v string) *string { return &v }
	f32 := int32(onnxpb.TensorProto_FLOAT)
	v17 := int64(17)
	ir := int64(8)
	vi := func(name string) *onnxpb.ValueInfoProto {
		return &onnxpb.ValueInfoProto{Name: s(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{
			ElemType: &f32, Shape: &onnxpb.TensorShapeProto{Dim: []*onnxpb.TensorShapeProto_Dimension{{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: 2}}}}}}}}
	}
	m := &onnxpb.ModelProto{
		IrVersion:   &ir,
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: s(""), Version: &v17}},
		Graph: &onnxpb.GraphProto{
			Name:        s("add"),
			Input:       []*onnxpb.ValueInfoProto{vi("x")},
			Output:      []*onnxpb.ValueInfoProto{vi("y")},
			Initializer: []*onnxpb.TensorProto{{Name: s("c"), DataType: &f32, Dims: []int64{2}, FloatData: []float32{c, c}}},
			Node:        []*onnxpb.NodeProto{{OpType: s("Add"), Input: []string{"x", "c"}, Output: []string{"y"}}},
		},
	}
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// putModel writes a model file the way an operator's copy does: a new file renamed
// over the old one, with a later modification time.
func putModel(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(time.Duration(len(b)%7+1) * time.Second)
	os.Chtimes(tmp, future, future)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// addAnswer runs y = x + c on x = [10, 20] and returns y[0] - 10, that is c.
func addAnswer(t *testing.T, s *Service) float32 {
	t.Helper()
	x := tensor.MustFromSlice(tensor.Shape{2}, []float32{10, 20})
	resp, err := s.Infer(context.Background(), &InferRequest{Model: "add", Inputs: []Tensor{{Name: "x", Datatype: "FP32", Shape: []int64{2}, Data: x}}})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Outputs[0].Data.Data.([]float32)[0] - 10
}

// TestSwappedModelGetsItsOwnAnswer: model A is registered, replaced on disk by B before
// its first compile, and restored after a restart. Each server answers with the model
// its files hold, and the journal never holds B's executable under A's key (which made
// a restored A answer with B's outputs on every later start and replica).
func TestSwappedModelGetsItsOwnAnswer(t *testing.T) {
	repo, journal := t.TempDir(), t.TempDir()
	path := filepath.Join(repo, "add", "1", "model.onnx")
	a, b := addModel(t, 1), addModel(t, 2)

	putModel(t, path, a)
	s := openService(t, repo, journal)
	putModel(t, path, b) // after the scan, before the first compile
	if got := addAnswer(t, s); got != 2 {
		t.Fatalf("B on disk, first request answered c=%v, want B's 2", got)
	}
	s.Close()

	putModel(t, path, a)
	s = openService(t, repo, journal)
	if got := addAnswer(t, s); got != 1 {
		t.Fatalf("A restored after a restart answered c=%v, want A's 1 (B's executable under A's key)", got)
	}
	putModel(t, path, b) // after A has compiled: the next compile (a new shape or a restart) sees B
	s.Close()
	s = openService(t, repo, journal)
	if got := addAnswer(t, s); got != 2 {
		t.Fatalf("B after A compiled: c=%v", got)
	}
}
