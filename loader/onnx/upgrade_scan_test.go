package onnx_test

import (
	"errors"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/loader/onnx"
	"github.com/kilnrt/kiln/loader/onnx/onnxpb"
	"github.com/kilnrt/kiln/tensor"
)

// scan8Model is an opset-8 Scan summing rows: state s[B,2], scan input x[B,3,2] scanned
// along its axis 1 (reversed when reverse), outputs the final state y[B,2] and each
// step's sum z[B,3,2]; seqLens adds the sequence_lens input.
func scan8Model(t *testing.T, batch int64, reverse, seqLens bool) []byte {
	t.Helper()
	s := func(v string) *string { return &v }
	f32, i64, v8 := int32(onnxpb.TensorProto_FLOAT), int32(onnxpb.TensorProto_INT64), int64(8)
	vi := func(name string, elem int32, dims ...int64) *onnxpb.ValueInfoProto {
		var ds []*onnxpb.TensorShapeProto_Dimension
		for _, d := range dims {
			ds = append(ds, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}})
		}
		return &onnxpb.ValueInfoProto{Name: s(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{
			ElemType: &elem, Shape: &onnxpb.TensorShapeProto{Dim: ds}}}}}
	}
	body := &onnxpb.GraphProto{Name: s("body"),
		Input:  []*onnxpb.ValueInfoProto{vi("sum_in", f32, 2), vi("next", f32, 2)},
		Output: []*onnxpb.ValueInfoProto{vi("sum_out", f32, 2), vi("scan_out", f32, 2)},
		Node: []*onnxpb.NodeProto{
			{OpType: s("Add"), Input: []string{"sum_in", "next"}, Output: []string{"sum_out"}},
			{OpType: s("Identity"), Input: []string{"sum_out"}, Output: []string{"scan_out"}},
		}}
	gt, it, its := onnxpb.AttributeProto_GRAPH, onnxpb.AttributeProto_INT, onnxpb.AttributeProto_INTS
	one, dir := int64(1), int64(0)
	if reverse {
		dir = 1
	}
	inputs := []*onnxpb.ValueInfoProto{vi("s", f32, batch, 2), vi("x", f32, batch, 3, 2)}
	first := ""
	if seqLens {
		inputs = append(inputs, vi("lens", i64, batch))
		first = "lens"
	}
	node := &onnxpb.NodeProto{Name: s("scan"), OpType: s("Scan"), Input: []string{first, "s", "x"}, Output: []string{"y", "z"},
		Attribute: []*onnxpb.AttributeProto{
			{Name: s("body"), Type: &gt, G: body},
			{Name: s("num_scan_inputs"), Type: &it, I: &one},
			{Name: s("directions"), Type: &its, Ints: []int64{dir}},
		}}
	b, err := proto.Marshal(&onnxpb.ModelProto{
		IrVersion:   &one,
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: s(""), Version: &v8}},
		Graph: &onnxpb.GraphProto{Name: s("g"), Input: inputs,
			Output: []*onnxpb.ValueInfoProto{vi("y", f32, batch, 2), vi("z", f32, batch, 3, 2)}, Node: []*onnxpb.NodeProto{node}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestOpset8ScanRunsEachBatchRowOverItsOwnSequence(t *testing.T) {
	for _, reverse := range []bool{false, true} {
		m, err := onnx.LoadBytes(scan8Model(t, 2, reverse, false), t.TempDir(), onnx.Options{})
		if err != nil {
			t.Fatal(err)
		}
		s := tensor.MustFromSlice(tensor.Shape{2, 2}, []float32{0, 0, 100, 200})
		x := tensor.MustFromSlice(tensor.Shape{2, 3, 2}, []float32{1, 2, 3, 4, 5, 6, 10, 20, 30, 40, 50, 60})
		out, err := ref.Eval(m, map[string]ref.Value{"s": s, "x": x}, ref.Options{})
		if err != nil {
			t.Fatal(err)
		}
		y, z := out[0].(*tensor.Tensor), out[1].(*tensor.Tensor)
		if want := "f32[2,2]{9, 12, 190, 320}"; y.String() != want {
			t.Errorf("reverse %v: final state %v, want %s", reverse, y, want)
		}
		want := []float64{1, 2, 4, 6, 9, 12, 110, 220, 140, 260, 190, 320}
		if reverse {
			want = []float64{5, 6, 8, 10, 9, 12, 150, 260, 180, 300, 190, 320}
		}
		if !z.Shape.Equal(tensor.Shape{2, 3, 2}) || !slices.Equal(z.Float64s(), want) {
			t.Errorf("reverse %v: scan output %v %v, want %v", reverse, z.Shape, z.Float64s(), want)
		}
	}
}

func TestOpset8ScanWithSequenceLengthsIsUnsupported(t *testing.T) {
	_, err := onnx.LoadBytes(scan8Model(t, 2, false, true), t.TempDir(), onnx.Options{})
	if !errors.Is(err, onnx.ErrUnsupported) {
		t.Fatalf("got %v, want ErrUnsupported", err)
	}
}
