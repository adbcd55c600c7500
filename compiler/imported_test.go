package compiler_test

import (
	"context"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/kilnrt/kiln/compiler"
	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/loader/onnx"
	"github.com/kilnrt/kiln/loader/onnx/onnxpb"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// Models whose import needs more than a straight walk of the file: nodes out of
// topological order, values of unknown rank inside subgraphs. Each is loaded, evaluated
// by the reference and compiled at -O0 and -O3, and the compiled engine must answer as
// the reference does.

func tensorInfo(name string, et onnxpb.TensorProto_DataType, dims ...int64) *onnxpb.ValueInfoProto {
	ds := []*onnxpb.TensorShapeProto_Dimension{}
	for _, d := range dims {
		ds = append(ds, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}})
	}
	return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
		TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(int32(et)), Shape: &onnxpb.TensorShapeProto{Dim: ds}}}}}
}

func protoNode(name, op string, in []string, out []string, attrs ...*onnxpb.AttributeProto) *onnxpb.NodeProto {
	return &onnxpb.NodeProto{Name: proto.String(name), OpType: proto.String(op), Input: in, Output: out, Attribute: attrs}
}

func graphAttr(name string, g *onnxpb.GraphProto) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_GRAPH.Enum(), G: g}
}

func marshalModel(t *testing.T, g *onnxpb.GraphProto) []byte {
	t.Helper()
	b, err := proto.Marshal(&onnxpb.ModelProto{IrVersion: proto.Int64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(17)}}, Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// floats is a tensor of the shape with small deterministic values.
func floats(seed int, shape ...int) *tensor.Tensor {
	x := tensor.New(tensor.Float32, tensor.Shape(shape))
	v := x.Data.([]float32)
	for i := range v {
		v[i] = float32((i*7+seed*13)%17-8) / 8
	}
	return x
}

// runBothEngines loads model, evaluates it with the reference and with the compiled
// engine at -O0 and -O3 on inputs (in graph-input order, names), and compares. A
// compile or run refusal is reported through refused (nil: the test fails on one).
func runBothEngines(t *testing.T, model []byte, names []string, inputs []*tensor.Tensor, refused func(level engine.Level, err error)) {
	t.Helper()
	m, err := onnx.LoadBytes(model, "", onnx.Options{})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	refIn := map[string]ref.Value{}
	byName := map[string]*tensor.Tensor{}
	for i, n := range names {
		refIn[n] = inputs[i]
		byName[n] = inputs[i]
	}
	want, err := ref.Eval(m, refIn, ref.Options{})
	if err != nil {
		t.Fatalf("reference: %v", err)
	}
	dev := openDevice(t)
	for _, level := range []engine.Level{engine.O0, engine.O3} {
		fail := func(stage string, err error) {
			t.Helper()
			if refused == nil {
				t.Fatalf("%v %s: %v", level, stage, err)
			}
			refused(level, err)
		}
		dims, err := engine.DimsFromInputs(m, byName)
		if err != nil {
			t.Fatalf("dims: %v", err)
		}
		res, err := compiler.Build(m, target.Host(), compiler.Options{Dims: dims, CPU: dev, Jobs: 2, Recipe: engine.Recipe{Level: level}})
		if err != nil {
			fail("compile", err)
			continue
		}
		machine, err := vm.Load(res.Exe, []devices.Device{dev}, vm.StdBuiltins())
		if err != nil {
			t.Fatalf("%v: loading the executable: %v", level, err)
		}
		got, err := machine.Run(context.Background(), inputs)
		machine.Close()
		if err != nil {
			fail("run", err)
			continue
		}
		for i := range want {
			if msg := differ(got[i], want[i].(*tensor.Tensor)); msg != "" {
				t.Fatalf("%v output %d: %s", level, i, msg)
			}
		}
	}
}

// TestUnsortedModelMatchesOnBothEngines: a model whose node list is reversed, with the
// Cast that converts its float16 weight last (as a conversion tool leaves it), loads
// sorted and answers on the compiled engine as on the reference.
func TestUnsortedModelMatchesOnBothEngines(t *testing.T) {
	to := &onnxpb.AttributeProto{Name: proto.String("to"), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(int64(onnxpb.TensorProto_FLOAT))}
	nodes := []*onnxpb.NodeProto{
		protoNode("cast", "Cast", []string{"w16"}, []string{"w"}, to),
		protoNode("relu", "Relu", []string{"x"}, []string{"r"}),
		protoNode("mul", "Mul", []string{"r", "w"}, []string{"m"}),
		protoNode("add", "Add", []string{"m", "x"}, []string{"a"}),
		protoNode("sig", "Sigmoid", []string{"a"}, []string{"y"}),
	}
	for i, j := 0, len(nodes)-1; i < j; i, j = i+1, j-1 {
		nodes[i], nodes[j] = nodes[j], nodes[i]
	}
	// 0.5, -2, 1.25 as float16 bits
	w16 := &onnxpb.TensorProto{Name: proto.String("w16"), Dims: []int64{3}, DataType: proto.Int32(int32(onnxpb.TensorProto_FLOAT16)),
		Int32Data: []int32{0x3800, 0xc000, 0x3d00}}
	model := marshalModel(t, &onnxpb.GraphProto{Name: proto.String("reversed"), Node: nodes, Initializer: []*onnxpb.TensorProto{w16},
		Input:  []*onnxpb.ValueInfoProto{tensorInfo("x", onnxpb.TensorProto_FLOAT, 2, 3)},
		Output: []*onnxpb.ValueInfoProto{tensorInfo("y", onnxpb.TensorProto_FLOAT, 2, 3)}})
	runBothEngines(t, model, []string{"x"}, []*tensor.Tensor{floats(1, 2, 3)}, nil)
}
