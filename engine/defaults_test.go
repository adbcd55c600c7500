package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/kilnrt/kiln/compilecache"
	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/loader/onnx/onnxpb"
	"github.com/kilnrt/kiln/tensor"
)

// writeAddWithDefault writes y = x + b (f32[2]) as an IR 8 model whose input b has an
// initializer {10, 20}: an input with a default.
func writeAddWithDefault(t *testing.T) string {
	t.Helper()
	f32 := int32(onnxpb.TensorProto_FLOAT)
	vi := func(name string) *onnxpb.ValueInfoProto {
		return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
			TensorType: &onnxpb.TypeProto_Tensor{ElemType: &f32, Shape: &onnxpb.TensorShapeProto{Dim: []*onnxpb.TensorShapeProto_Dimension{
				{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: 2}}}}}}}}
	}
	b, err := proto.Marshal(&onnxpb.ModelProto{IrVersion: proto.Int64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(17)}},
		Graph: &onnxpb.GraphProto{Name: proto.String("add"), Input: []*onnxpb.ValueInfoProto{vi("x"), vi("b")},
			Initializer: []*onnxpb.TensorProto{{Name: proto.String("b"), DataType: &f32, Dims: []int64{2}, FloatData: []float32{10, 20}}},
			Output:      []*onnxpb.ValueInfoProto{vi("y")},
			Node:        []*onnxpb.NodeProto{{OpType: proto.String("Add"), Name: proto.String("add"), Input: []string{"x", "b"}, Output: []string{"y"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "model.onnx")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestInputWithADefaultIsAnInputOfTheExecutable: the model's declared inputs list the
// input with a default and its default; the compiled executable takes it as an input
// (its value is not folded in), so the default gives x + {10, 20} and a given value
// x + that value.
func TestInputWithADefaultIsAnInputOfTheExecutable(t *testing.T) {
	m, err := engine.Open("add", writeAddWithDefault(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Interface.Inputs) != 2 || m.Interface.Inputs[1].Name != "b" || m.Interface.Inputs[1].Default == nil {
		t.Fatalf("declared inputs %+v: want x, and b with its default", m.Interface.Inputs)
	}
	j, err := compilecache.Open(compilecache.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	cfg := cpuConfig(t)
	cfg.Journal = j
	c, err := newEngine(t, cfg).Load(context.Background(), m, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Runner.Close()
	if len(c.Exe.Inputs) != 2 || c.Exe.Inputs[1].Name != "b" {
		t.Fatalf("the executable's inputs are %+v, want x and b", c.Exe.Inputs)
	}
	x := tensor.MustFromSlice(tensor.Shape{2}, []float32{1, 2})
	for _, tc := range []struct {
		b    *tensor.Tensor
		want []float32
	}{
		{m.Interface.Inputs[1].Default, []float32{11, 22}},
		{tensor.MustFromSlice(tensor.Shape{2}, []float32{-1, 5}), []float32{0, 7}},
	} {
		out, err := c.Runner.Run(context.Background(), []*tensor.Tensor{x, tc.b})
		if err != nil {
			t.Fatal(err)
		}
		if got := out[0].Data.([]float32); got[0] != tc.want[0] || got[1] != tc.want[1] {
			t.Errorf("b = %v: y = %v, want %v", tc.b.Data, got, tc.want)
		}
	}
}
