package conformance

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/kilnrt/kiln/loader/onnx/onnxpb"
)

// writeGroupNormCase writes a one-node GroupNormalization case (num_groups 2, epsilon
// 0) at the given opset over x f32[1,4,2] and scale and bias inputs of their values,
// with its expected output.
func writeGroupNormCase(t *testing.T, dir string, opset int64, x, scale, bias, want []float32) {
	t.Helper()
	s := func(v string) *string { return &v }
	f32 := int32(onnxpb.TensorProto_FLOAT)
	dims := map[string][]int64{"x": {1, 4, 2}, "y": {1, 4, 2}, "scale": {int64(len(scale))}, "bias": {int64(len(bias))}}
	vi := func(name string) *onnxpb.ValueInfoProto {
		var shape []*onnxpb.TensorShapeProto_Dimension
		for _, d := range dims[name] {
			shape = append(shape, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}})
		}
		return &onnxpb.ValueInfoProto{Name: s(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
			TensorType: &onnxpb.TypeProto_Tensor{ElemType: &f32, Shape: &onnxpb.TensorShapeProto{Dim: shape}}}}}
	}
	groups, eps := int64(2), float32(0)
	it, ft := onnxpb.AttributeProto_INT, onnxpb.AttributeProto_FLOAT
	m := &onnxpb.ModelProto{OpsetImport: []*onnxpb.OperatorSetIdProto{{Version: &opset}}, Graph: &onnxpb.GraphProto{
		Name: s("g"), Input: []*onnxpb.ValueInfoProto{vi("x"), vi("scale"), vi("bias")}, Output: []*onnxpb.ValueInfoProto{vi("y")},
		Node: []*onnxpb.NodeProto{{OpType: s("GroupNormalization"), Input: []string{"x", "scale", "bias"}, Output: []string{"y"},
			Attribute: []*onnxpb.AttributeProto{{Name: s("num_groups"), Type: &it, I: &groups}, {Name: s("epsilon"), Type: &ft, F: &eps}}}},
	}}
	writeProto(t, filepath.Join(dir, "model.onnx"), m)
	for i, in := range []struct {
		name string
		v    []float32
	}{{"x", x}, {"scale", scale}, {"bias", bias}, {"y", want}} {
		file := filepath.Join(dir, "test_data_set_0", fmt.Sprintf("input_%d.pb", i))
		if in.name == "y" {
			file = filepath.Join(dir, "test_data_set_0", "output_0.pb")
		}
		writeProto(t, file, &onnxpb.TensorProto{Name: s(in.name), Dims: dims[in.name], DataType: &f32, FloatData: in.v})
	}
}

// TestGroupNormalizationOfEitherOpsetRunsOnEveryEngine: GroupNormalization-18 (a scale
// and bias per group, here run-time inputs that the loader spreads over the channels)
// and GroupNormalization-21 (per channel) load and run on the reference evaluator and
// on the compiled engine at -O0 and -O3, against values computed by hand.
func TestGroupNormalizationOfEitherOpsetRunsOnEveryEngine(t *testing.T) {
	// groups {1, 3, 5, 7} (mean 4, variance 5) and {2, −2, 4, −4} (mean 0, variance 10)
	x := []float32{1, 3, 5, 7, 2, -2, 4, -4}
	r5, r10 := math.Sqrt(5), math.Sqrt(10)
	want := make([]float32, 8)
	for i, v := range []float64{2*-3/r5 + 1, 2*-1/r5 + 1, 2*1/r5 + 1, 2*3/r5 + 1, 3*2/r10 - 1, 3*-2/r10 - 1, 3*4/r10 - 1, 3*-4/r10 - 1} {
		want[i] = float32(v)
	}
	root := t.TempDir()
	writeGroupNormCase(t, filepath.Join(root, "opset18"), 18, x, []float32{2, 3}, []float32{1, -1}, want)
	writeGroupNormCase(t, filepath.Join(root, "opset21"), 21, x, []float32{2, 2, 3, 3}, []float32{1, 1, -1, -1}, want)
	engines := map[string]Options{"ref": opts(), "compiled -O0": compiledOptsAt(t, 0), "compiled -O3": compiledOpts(t)}
	for name, o := range engines {
		for _, c := range []string{"opset18", "opset21"} {
			if r := RunCase(filepath.Join(root, c), o); r.Status != Pass {
				t.Errorf("%s on %s: %s: %s", c, name, r.Status, r.Reason)
			}
		}
	}
}
