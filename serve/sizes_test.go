package serve

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/kilnrt/kiln/loader/onnx/onnxpb"
	"github.com/kilnrt/kiln/tensor"
)

// onnxModel is an opset-17 model of the nodes over the initializers, inputs and
// outputs (given as name and element type; shapes are left to inference except for
// inputs, which have static dims).
func onnxModel(t *testing.T, nodes []*onnxpb.NodeProto, inits []*onnxpb.TensorProto, inputs map[string][]int64, outputs ...string) []byte {
	t.Helper()
	s := func(v string) *string { return &v }
	v17 := int64(17)
	g := &onnxpb.GraphProto{Name: s("g"), Node: nodes, Initializer: inits}
	for name, dims := range inputs {
		et := int32(onnxpb.TensorProto_INT64)
		if name == "x" {
			et = int32(onnxpb.TensorProto_FLOAT)
		}
		shape := &onnxpb.TensorShapeProto{}
		for _, d := range dims {
			shape.Dim = append(shape.Dim, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}})
		}
		g.Input = append(g.Input, &onnxpb.ValueInfoProto{Name: s(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{ElemType: &et, Shape: shape}}}})
	}
	for _, name := range outputs {
		et := int32(onnxpb.TensorProto_FLOAT)
		g.Output = append(g.Output, &onnxpb.ValueInfoProto{Name: s(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{ElemType: &et}}}})
	}
	b, err := proto.Marshal(&onnxpb.ModelProto{OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: s(""), Version: &v17}}, Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// hostileRepo adds to the mlp repository: "cos", ConstantOfShape of [2^31, 2^31]
// (2^64 bytes of float32, a byte count that wraps to 0); "conv", a Conv with strides
// 0; and "gather", Gather of a 3×2 table at the request's indices.
func hostileRepo(t *testing.T) (string, *tensor.Tensor) {
	repo, x, _ := testRepo(t)
	s := func(v string) *string { return &v }
	i64, f32 := int32(onnxpb.TensorProto_INT64), int32(onnxpb.TensorProto_FLOAT)
	ints := onnxpb.AttributeProto_INTS
	models := map[string][]byte{
		"cos": onnxModel(t, []*onnxpb.NodeProto{{Name: s("cos"), OpType: s("ConstantOfShape"), Input: []string{"shape"}, Output: []string{"y"}}},
			[]*onnxpb.TensorProto{{Name: s("shape"), DataType: &i64, Dims: []int64{2}, Int64Data: []int64{1 << 31, 1 << 31}}}, nil, "y"),
		"conv": onnxModel(t, []*onnxpb.NodeProto{{Name: s("conv0"), OpType: s("Conv"), Input: []string{"x", "w"}, Output: []string{"y"},
			Attribute: []*onnxpb.AttributeProto{{Name: s("strides"), Type: &ints, Ints: []int64{0, 0}}}}},
			[]*onnxpb.TensorProto{{Name: s("w"), DataType: &f32, Dims: []int64{1, 1, 1, 1}, FloatData: []float32{1}}}, map[string][]int64{"x": {1, 1, 4, 4}}, "y"),
		"gather": onnxModel(t, []*onnxpb.NodeProto{{Name: s("gather0"), OpType: s("Gather"), Input: []string{"data", "i"}, Output: []string{"y"}}},
			[]*onnxpb.TensorProto{{Name: s("data"), DataType: &f32, Dims: []int64{3, 2}, FloatData: []float32{0, 1, 2, 3, 4, 5}}}, map[string][]int64{"i": {2}}, "y"),
	}
	for name, b := range models {
		os.MkdirAll(filepath.Join(repo, name, "1"), 0o755)
		if err := os.WriteFile(filepath.Join(repo, name, "1", "model.onnx"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return repo, x
}

// TestHostileModelsAndRequestsLeaveTheServerServing: the ConstantOfShape model that
// used to kill the process and the stride-0 Conv are refused as unavailable models
// whose reason names the node, a Gather request with an index out of range is an
// invalid request naming the node while one with negative indices in range is
// answered, and the other models keep being served.
func TestHostileModelsAndRequestsLeaveTheServerServing(t *testing.T) {
	repo, x := hostileRepo(t)
	s := openService(t, repo, t.TempDir())
	for model, node := range map[string]string{"cos": `"cos"`, "conv": `"conv0"`} {
		req := &InferRequest{Model: model}
		if model == "conv" {
			req.Inputs = []Tensor{{Name: "x", Datatype: "FP32", Shape: []int64{1, 1, 4, 4}, Data: tensor.New(tensor.Float32, tensor.Shape{1, 1, 4, 4})}}
		}
		_, err := s.Infer(context.Background(), req)
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), node) {
			t.Errorf("%s: got %v, want ErrUnavailable naming %s", model, err, node)
		}
	}
	gather := func(i ...int64) (*InferResponse, error) {
		return s.Infer(context.Background(), &InferRequest{Model: "gather", Inputs: []Tensor{{Name: "i", Datatype: "INT64", Shape: []int64{2}, Data: tensor.MustFromSlice(tensor.Shape{2}, i)}}})
	}
	if _, err := gather(0, 5); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `"gather0"`) || !strings.Contains(err.Error(), "index 5") {
		t.Errorf("index 5 of 3: got %v, want ErrInvalid naming the node and the index", err)
	}
	resp, err := gather(-1, -3)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Outputs[0].Data.Float64s(); len(got) != 4 || got[0] != 4 || got[1] != 5 || got[2] != 0 || got[3] != 1 {
		t.Errorf("indices -1, -3 give %v, want [4 5 0 1]", got)
	}
	if _, err := s.Infer(context.Background(), request(x)); err != nil {
		t.Fatalf("mlp after the hostile requests: %v", err)
	}
}
