package onnx

import (
	"os"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loader/onnx/onnxpb"
)

// fuzzLimit keeps fuzzed tensors small: a file may claim any size, but it must not make
// the decoder allocate more than this.
const fuzzLimit = 1 << 20

// seedModels are small hand-built models covering initializers (raw and typed), Constant
// attribute forms, subgraphs and opset upgrades.
func seedModels() [][]byte {
	i64 := func(v int64) *int64 { return &v }
	s := func(v string) *string { return &v }
	i32 := func(v int32) *int32 { return &v }
	at := func(t onnxpb.AttributeProto_AttributeType) *onnxpb.AttributeProto_AttributeType { return &t }
	f32 := int32(onnxpb.TensorProto_FLOAT)
	vi := func(name string, dims ...int64) *onnxpb.ValueInfoProto {
		var ds []*onnxpb.TensorShapeProto_Dimension
		for _, d := range dims {
			if d < 0 {
				ds = append(ds, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: "batch"}})
			} else {
				ds = append(ds, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}})
			}
		}
		return &onnxpb.ValueInfoProto{Name: s(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
			TensorType: &onnxpb.TypeProto_Tensor{ElemType: &f32, Shape: &onnxpb.TensorShapeProto{Dim: ds}}}}}
	}
	model := func(opset int64, g *onnxpb.GraphProto) []byte {
		b, err := proto.Marshal(&onnxpb.ModelProto{IrVersion: i64(7), Graph: g,
			OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: s(""), Version: i64(opset)}}})
		if err != nil {
			panic(err)
		}
		return b
	}
	add := model(13, &onnxpb.GraphProto{
		Name:        s("g"),
		Input:       []*onnxpb.ValueInfoProto{vi("x", -1, 4)},
		Output:      []*onnxpb.ValueInfoProto{vi("y", -1, 4)},
		Initializer: []*onnxpb.TensorProto{{Name: s("w"), DataType: i32(f32), Dims: []int64{4}, FloatData: []float32{1, 2, 3, 4}}},
		Node: []*onnxpb.NodeProto{
			{OpType: s("Add"), Input: []string{"x", "w"}, Output: []string{"a"}},
			{OpType: s("Constant"), Output: []string{"k"}, Attribute: []*onnxpb.AttributeProto{{Name: s("value_ints"), Type: at(onnxpb.AttributeProto_INTS), Ints: []int64{1}}}},
			{OpType: s("Unsqueeze"), Input: []string{"a", "k"}, Output: []string{"u"}},
			{OpType: s("Squeeze"), Input: []string{"u", "k"}, Output: []string{"y"}},
		},
	})
	softmax := model(11, &onnxpb.GraphProto{
		Name:   s("g"),
		Input:  []*onnxpb.ValueInfoProto{vi("x", 2, 3, 4)},
		Output: []*onnxpb.ValueInfoProto{vi("y", 2, 3, 4)},
		Node: []*onnxpb.NodeProto{{OpType: s("Softmax"), Input: []string{"x"}, Output: []string{"y"},
			Attribute: []*onnxpb.AttributeProto{{Name: s("axis"), Type: at(onnxpb.AttributeProto_INT), I: i64(1)}}}},
	})
	thenG := &onnxpb.GraphProto{Name: s("then"), Output: []*onnxpb.ValueInfoProto{vi("x", 2)}}
	ifm := model(13, &onnxpb.GraphProto{
		Name:   s("g"),
		Input:  []*onnxpb.ValueInfoProto{vi("x", 2), {Name: s("c"), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{ElemType: i32(int32(onnxpb.TensorProto_BOOL)), Shape: &onnxpb.TensorShapeProto{}}}}}},
		Output: []*onnxpb.ValueInfoProto{vi("y", 2)},
		Node: []*onnxpb.NodeProto{{OpType: s("If"), Input: []string{"c"}, Output: []string{"y"}, Attribute: []*onnxpb.AttributeProto{
			{Name: s("then_branch"), Type: at(onnxpb.AttributeProto_GRAPH), G: thenG},
			{Name: s("else_branch"), Type: at(onnxpb.AttributeProto_GRAPH), G: thenG},
		}}},
	})
	huge := model(13, &onnxpb.GraphProto{
		Name:        s("g"),
		Output:      []*onnxpb.ValueInfoProto{vi("w", 4)},
		Initializer: []*onnxpb.TensorProto{{Name: s("w"), DataType: i32(f32), Dims: []int64{1 << 40, 1 << 20}, RawData: []byte{1, 2, 3, 4}}},
	})
	return [][]byte{add, softmax, ifm, huge}
}

func FuzzLoad(f *testing.F) {
	for _, b := range seedModels() {
		f.Add(b)
	}
	// real exporter output, when the test data is installed
	for _, p := range []string{"/usr/share/libonnx-testdata/data/node/test_lstm_defaults/model.onnx",
		"/usr/share/libonnx-testdata/data/node/test_loop11/model.onnx",
		"/usr/share/libonnx-testdata/data/node/test_resize_upsample_scales_linear/model.onnx"} {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := LoadBytes(b, "", Options{MaxTensorBytes: fuzzLimit})
		if err == nil {
			if verr := graph.Verify(m); verr != nil {
				t.Fatalf("loaded module does not verify: %v", verr)
			}
			_ = graph.Print(m)
		}
	})
}

func FuzzDecodeData(f *testing.F) {
	t, _ := proto.Marshal(&onnxpb.TensorProto{Dims: []int64{2}, DataType: new(int32), RawData: []byte{1, 2}})
	f.Add(t, uint8(0))
	f.Add([]byte{0x0a, 0x02, 0x08, 0x01}, uint8(1))
	f.Fuzz(func(t *testing.T, b []byte, kind uint8) {
		_, _ = DecodeData(b, graph.Type{Kind: graph.Kind(kind % 3)})
	})
}

func TestSeedModelsLoad(t *testing.T) {
	seeds := seedModels()
	for i, b := range seeds[:3] {
		m, err := LoadBytes(b, "", Options{})
		if err != nil {
			t.Fatalf("seed %d: %v", i, err)
		}
		if err := graph.Verify(m); err != nil {
			t.Fatalf("seed %d: %v", i, err)
		}
	}
	// the Softmax-11 seed on axis 1 of a rank-3 input is rewritten to the 2-D form
	m, _ := LoadBytes(seeds[1], "", Options{})
	text := graph.Print(m)
	for _, want := range []string{"Flatten(%x)", "Softmax(", "{axis=1}", "Reshape("} {
		if !strings.Contains(text, want) {
			t.Errorf("Softmax-11 rewrite lacks %q:\n%s", want, text)
		}
	}
	// the model claiming a 2^60-element tensor fails without allocating it
	if _, err := LoadBytes(seeds[3], "", Options{MaxTensorBytes: fuzzLimit}); err == nil {
		t.Error("huge claimed tensor was accepted")
	}
	// the first seed keeps its symbolic batch dim through Add/Unsqueeze/Squeeze
	m, _ = LoadBytes(seeds[0], "", Options{})
	if got := m.Main.Results[0].Type.String(); got != "f32[batch,4]" {
		t.Errorf("result type %s, want f32[batch,4]", got)
	}
}
