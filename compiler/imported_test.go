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

// lstmWeights are the initializers of a one-direction LSTM with input size 4 and hidden
// size 3: W [1,12,4], R [1,12,3], B [1,24].
func lstmWeights() []*onnxpb.TensorProto {
	init := func(name string, dims ...int64) *onnxpb.TensorProto {
		n := int64(1)
		for _, d := range dims {
			n *= d
		}
		vals := make([]float32, n)
		for i := range vals {
			vals[i] = float32((i*5+len(name)*3)%11-5) / 10
		}
		return &onnxpb.TensorProto{Name: proto.String(name), Dims: dims, DataType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)), FloatData: vals}
	}
	return []*onnxpb.TensorProto{init("W", 1, 12, 4), init("R", 1, 12, 3), init("B", 1, 24)}
}

// unknownRankLSTMModel nests two Ifs on c; the inner then-branch reshapes x [5,1,4] by
// the input shp (whose rank the model leaves open, so the result's rank is unknown),
// takes a Softmax over its last axis and runs an LSTM on it. The other branches run the
// LSTM on x or on Relu(x). The output is the LSTM's last hidden state [1,1,3].
func unknownRankLSTMModel(t *testing.T) []byte {
	hidden := &onnxpb.AttributeProto{Name: proto.String("hidden_size"), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(3)}
	axis := &onnxpb.AttributeProto{Name: proto.String("axis"), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(-1)}
	lstm := func(name, x, yh string) *onnxpb.NodeProto {
		return protoNode(name, "LSTM", []string{x, "W", "R", "B"}, []string{"", yh}, hidden)
	}
	yh := func(name string) []*onnxpb.ValueInfoProto {
		return []*onnxpb.ValueInfoProto{tensorInfo(name, onnxpb.TensorProto_FLOAT, 1, 1, 3)}
	}
	innerThen := &onnxpb.GraphProto{Name: proto.String("inner_then"), Output: yh("h1"), Node: []*onnxpb.NodeProto{
		protoNode("reshape", "Reshape", []string{"x", "shp"}, []string{"r"}),
		protoNode("softmax", "Softmax", []string{"r"}, []string{"s"}, axis),
		lstm("lstm1", "s", "h1"),
	}}
	innerElse := &onnxpb.GraphProto{Name: proto.String("inner_else"), Output: yh("h2"), Node: []*onnxpb.NodeProto{lstm("lstm2", "x", "h2")}}
	outerThen := &onnxpb.GraphProto{Name: proto.String("outer_then"), Output: yh("h3"), Node: []*onnxpb.NodeProto{
		protoNode("inner", "If", []string{"c"}, []string{"h3"}, graphAttr("then_branch", innerThen), graphAttr("else_branch", innerElse)),
	}}
	outerElse := &onnxpb.GraphProto{Name: proto.String("outer_else"), Output: yh("h4"), Node: []*onnxpb.NodeProto{
		protoNode("relu", "Relu", []string{"x"}, []string{"rx"}), lstm("lstm4", "rx", "h4"),
	}}
	shp := tensorInfo("shp", onnxpb.TensorProto_INT64)
	shp.Type.GetTensorType().Shape = nil // rank unknown
	return marshalModel(t, &onnxpb.GraphProto{Name: proto.String("vad"), Initializer: lstmWeights(),
		Node: []*onnxpb.NodeProto{
			protoNode("outer", "If", []string{"c"}, []string{"y"}, graphAttr("then_branch", outerThen), graphAttr("else_branch", outerElse)),
		},
		Input:  []*onnxpb.ValueInfoProto{tensorInfo("x", onnxpb.TensorProto_FLOAT, 5, 1, 4), shp, tensorInfo("c", onnxpb.TensorProto_BOOL)},
		Output: yh("y")})
}

// TestUnknownRankLSTMInNestedIfRuns: an LSTM inside nested Ifs whose input has a rank
// the model leaves open loads (its inference defers the rank check to run time), the
// reference evaluates both branches, and the compiled engine answers as the reference
// does or refuses with an error (never a crash or a wrong answer).
func TestUnknownRankLSTMInNestedIfRuns(t *testing.T) {
	model := unknownRankLSTMModel(t)
	m, err := onnx.LoadBytes(model, "", onnx.Options{})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if y := m.Main.Results[0].Type; y.Rank() != 3 {
		t.Fatalf("output type %v, want rank 3 (an LSTM's hidden state)", y)
	}
	shp := tensor.MustFromSlice(tensor.Shape{3}, []int64{5, 1, 4})
	for _, c := range []bool{true, false} {
		cond := tensor.MustFromSlice(tensor.Shape{}, []bool{c})
		runBothEngines(t, model, []string{"x", "shp", "c"}, []*tensor.Tensor{floats(2, 5, 1, 4), shp, cond}, func(level engine.Level, err error) {
			t.Logf("c=%v %v: compiled engine refused: %v", c, level, err)
		})
	}
}

// rankGuardedLSTMModel is the exporters' pattern around an LSTM: x [5,1,1,4] is squeezed
// to rank 3 under an If on Shape(x)[2] == 1 (the other branch keeps x as it is, so the
// branches disagree on the rank), inside the then-branch of an If on c; the else-branch
// runs the LSTM on Squeeze(Relu(x)). The output is the last hidden state [1,1,3].
func rankGuardedLSTMModel(t *testing.T) []byte {
	hidden := &onnxpb.AttributeProto{Name: proto.String("hidden_size"), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(3)}
	yh := func(name string) []*onnxpb.ValueInfoProto {
		return []*onnxpb.ValueInfoProto{tensorInfo(name, onnxpb.TensorProto_FLOAT, 1, 1, 3)}
	}
	unranked := func(name string) []*onnxpb.ValueInfoProto {
		v := tensorInfo(name, onnxpb.TensorProto_FLOAT)
		v.Type.GetTensorType().Shape = nil
		return []*onnxpb.ValueInfoProto{v}
	}
	ints := func(name string, v ...int64) *onnxpb.TensorProto {
		return &onnxpb.TensorProto{Name: proto.String(name), Dims: []int64{int64(len(v))}, DataType: proto.Int32(int32(onnxpb.TensorProto_INT64)), Int64Data: v}
	}
	squeeze := &onnxpb.GraphProto{Name: proto.String("squeeze"), Output: unranked("sq"), Node: []*onnxpb.NodeProto{
		protoNode("squeeze", "Squeeze", []string{"x", "two"}, []string{"sq"})}}
	keep := &onnxpb.GraphProto{Name: proto.String("keep"), Output: unranked("kept"), Node: []*onnxpb.NodeProto{
		protoNode("keep", "Identity", []string{"x"}, []string{"kept"})}}
	outerThen := &onnxpb.GraphProto{Name: proto.String("outer_then"), Output: yh("h1"), Node: []*onnxpb.NodeProto{
		protoNode("shape", "Shape", []string{"x"}, []string{"shape"}),
		protoNode("extent", "Gather", []string{"shape", "two"}, []string{"extent"}),
		protoNode("is_one", "Equal", []string{"extent", "one"}, []string{"is_one"}),
		protoNode("guard", "If", []string{"is_one"}, []string{"x3"}, graphAttr("then_branch", squeeze), graphAttr("else_branch", keep)),
		protoNode("lstm1", "LSTM", []string{"x3", "W", "R", "B"}, []string{"", "h1"}, hidden),
	}}
	outerElse := &onnxpb.GraphProto{Name: proto.String("outer_else"), Output: yh("h2"), Node: []*onnxpb.NodeProto{
		protoNode("relu", "Relu", []string{"x"}, []string{"rx"}),
		protoNode("squeeze2", "Squeeze", []string{"rx", "two"}, []string{"rx3"}),
		protoNode("lstm2", "LSTM", []string{"rx3", "W", "R", "B"}, []string{"", "h2"}, hidden),
	}}
	return marshalModel(t, &onnxpb.GraphProto{Name: proto.String("guarded"),
		Initializer: append(lstmWeights(), ints("two", 2), ints("one", 1)),
		Node: []*onnxpb.NodeProto{
			protoNode("outer", "If", []string{"c"}, []string{"y"}, graphAttr("then_branch", outerThen), graphAttr("else_branch", outerElse)),
		},
		Input:  []*onnxpb.ValueInfoProto{tensorInfo("x", onnxpb.TensorProto_FLOAT, 5, 1, 1, 4), tensorInfo("c", onnxpb.TensorProto_BOOL)},
		Output: yh("y")})
}

// TestRankGuardedLSTMInNestedIfMatches: the LSTM behind a rank guard inside an If keeps
// its input's rank (the guard's condition is known from the shape), so the compiled
// engine builds it and answers as the reference does on both branches.
func TestRankGuardedLSTMInNestedIfMatches(t *testing.T) {
	model := rankGuardedLSTMModel(t)
	for _, c := range []bool{true, false} {
		cond := tensor.MustFromSlice(tensor.Shape{}, []bool{c})
		runBothEngines(t, model, []string{"x", "c"}, []*tensor.Tensor{floats(3, 5, 1, 1, 4), cond}, nil)
	}
}
