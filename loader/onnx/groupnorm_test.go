package onnx_test

import (
	"errors"
	"math"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/loader/onnx"
	"github.com/kilnrt/kiln/loader/onnx/onnxpb"
	"github.com/kilnrt/kiln/tensor"
)

// groupNormModel is y = GroupNormalization(x, scale, bias) with num_groups 2 and epsilon
// 0 at the given opset; x's channel extent is c, or the symbol "C" when c < 0; scale
// and bias are inputs of params values.
func groupNormModel(t *testing.T, opset, c, params int64) []byte {
	t.Helper()
	s := func(v string) *string { return &v }
	f32 := int32(onnxpb.TensorProto_FLOAT)
	vi := func(name string, dims ...int64) *onnxpb.ValueInfoProto {
		var shape []*onnxpb.TensorShapeProto_Dimension
		for _, d := range dims {
			dim := &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}}
			if d < 0 {
				dim.Value = &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: "C"}
			}
			shape = append(shape, dim)
		}
		return &onnxpb.ValueInfoProto{Name: s(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
			TensorType: &onnxpb.TypeProto_Tensor{ElemType: &f32, Shape: &onnxpb.TensorShapeProto{Dim: shape}}}}}
	}
	groups, eps := int64(2), float32(0)
	it, ft := onnxpb.AttributeProto_INT, onnxpb.AttributeProto_FLOAT
	node := &onnxpb.NodeProto{Name: s("gn"), OpType: s("GroupNormalization"), Input: []string{"x", "scale", "bias"}, Output: []string{"y"},
		Attribute: []*onnxpb.AttributeProto{{Name: s("num_groups"), Type: &it, I: &groups}, {Name: s("epsilon"), Type: &ft, F: &eps}}}
	b, err := proto.Marshal(&onnxpb.ModelProto{
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: s(""), Version: &opset}},
		Graph: &onnxpb.GraphProto{Name: s("g"), Node: []*onnxpb.NodeProto{node},
			Input:  []*onnxpb.ValueInfoProto{vi("x", 1, c, 2), vi("scale", params), vi("bias", params)},
			Output: []*onnxpb.ValueInfoProto{{Name: s("y")}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGroupNormalization18ScalesEachGroupAsOpset21ItsChannels: opset 18's scale and bias
// hold one value per group; loaded, they apply to every channel of their group, as
// opset 21's per-channel values repeated over the group do.
func TestGroupNormalization18ScalesEachGroupAsOpset21ItsChannels(t *testing.T) {
	x := tensor.MustFromSlice(tensor.Shape{1, 4, 2}, []float32{1, 3, 5, 7, 2, -2, 4, -4})
	run := func(opset int64, scale, bias []float32) []float64 {
		m, err := onnx.LoadBytes(groupNormModel(t, opset, 4, int64(len(scale))), t.TempDir(), onnx.Options{})
		if err != nil {
			t.Fatalf("opset %d: %v", opset, err)
		}
		p := func(v []float32) *tensor.Tensor { return tensor.MustFromSlice(tensor.Shape{len(v)}, v) }
		out, err := ref.Eval(m, map[string]ref.Value{"x": x, "scale": p(scale), "bias": p(bias)}, ref.Options{})
		if err != nil {
			t.Fatalf("opset %d: %v", opset, err)
		}
		return out[0].(*tensor.Tensor).Float64s()
	}
	got18 := run(18, []float32{2, 3}, []float32{1, -1})
	got21 := run(21, []float32{2, 2, 3, 3}, []float32{1, 1, -1, -1})
	// groups {1, 3, 5, 7} (mean 4, variance 5) and {2, -2, 4, -4} (mean 0, variance 10)
	r5, r10 := math.Sqrt(5), math.Sqrt(10)
	want := []float64{2*-3/r5 + 1, 2*-1/r5 + 1, 2*1/r5 + 1, 2*3/r5 + 1, 3*2/r10 - 1, 3*-2/r10 - 1, 3*4/r10 - 1, 3*-4/r10 - 1}
	for i := range want {
		if math.Abs(got18[i]-want[i]) > 1e-5 || math.Abs(got21[i]-want[i]) > 1e-5 {
			t.Fatalf("element %d: opset 18 %v, opset 21 %v, want %v", i, got18[i], got21[i], want[i])
		}
	}
}

// TestGroupNormalization18NeedsAStaticChannelCount: spreading a scale per group over
// the channels needs their count at load time (refused, naming the op); a count that
// num_groups does not divide is an invalid model at either opset.
func TestGroupNormalization18NeedsAStaticChannelCount(t *testing.T) {
	_, err := onnx.LoadBytes(groupNormModel(t, 18, -1, 2), t.TempDir(), onnx.Options{})
	var uerr *onnx.UnsupportedOpError
	if !errors.As(err, &uerr) || uerr.Op != "GroupNormalization" {
		t.Errorf("symbolic channels at opset 18: %v, want an unsupported GroupNormalization", err)
	}
	if _, err := onnx.LoadBytes(groupNormModel(t, 21, -1, 2), t.TempDir(), onnx.Options{}); err != nil {
		t.Errorf("symbolic channels at opset 21: %v", err)
	}
	for _, opset := range []int64{18, 21} {
		_, err := onnx.LoadBytes(groupNormModel(t, opset, 3, 2), t.TempDir(), onnx.Options{})
		if !errors.Is(err, onnx.ErrInvalid) {
			t.Errorf("3 channels in 2 groups at opset %d: %v, want ErrInvalid", opset, err)
		}
	}
}
