package servetest

import (
	"math"
	"os"
	"path/filepath"

	"google.golang.org/protobuf/proto"

	"github.com/kilnrt/kiln/loader/onnx/onnxpb"
)

// StatefulWidth is the width of the stateful model's rows: x, state and y are
// [batch, StatefulWidth].
const StatefulWidth = 4

// StatefulConfig is the configuration of the model WriteStatefulRepo writes as
// "stateful": the sequence batcher with the direct strategy, the implicit state
// state_in → state_out starting at zeros, 1 s of idleness allowed.
const StatefulConfig = `name: "stateful"
max_batch_size: 4
sequence_batching {
  max_sequence_idle_microseconds: 1000000
  direct { }
  state [
    {
      input_name: "state_in"
      output_name: "state_out"
      data_type: TYPE_FP32
      dims: [ 4 ]
      initial_state { data_type: TYPE_FP32 dims: [ 4 ] zero_data: true name: "zeros" }
    }
  ]
}
instance_group [ { kind: KIND_CPU count: 2 } ]
`

// ControlsConfig is the configuration of the model WriteStatefulRepo writes as
// "controls": one control input of each kind, each echoed by an output.
const ControlsConfig = `name: "controls"
max_batch_size: 4
sequence_batching {
  control_input [
    { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
    { name: "END" control [ { kind: CONTROL_SEQUENCE_END fp32_false_true: [ 0, 1 ] } ] },
    { name: "READY" control [ { kind: CONTROL_SEQUENCE_READY bool_false_true: [ false, true ] } ] },
    { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } ] }
  ]
}
`

// StatefulStep is what the stateful model computes for one row: state' =
// tanh(0.9·state + x), y = 2·state'.
func StatefulStep(state, x []float32) (next, y []float32) {
	next, y = make([]float32, len(x)), make([]float32, len(x))
	for i := range x {
		next[i] = float32(math.Tanh(float64(float32(0.9)*state[i] + x[i])))
		y[i] = 2 * next[i]
	}
	return next, y
}

// WriteStatefulRepo adds two models to the repository repo: "stateful" (inputs x and
// state_in, FP32 [batch, 4]; outputs y and state_out, StatefulStep's; config
// StatefulConfig) and "controls" (input x FP32 [batch, 1] and the control inputs
// START INT32, END FP32, READY BOOL, CORRID UINT64, each [batch, 1]; outputs y = x
// and start, end, ready, corrid echoing the controls; config ControlsConfig).
func WriteStatefulRepo(repo string) error {
	s := func(v string) *string { return &v }
	f32 := int32(onnxpb.TensorProto_FLOAT)
	node := func(op string, out string, in ...string) *onnxpb.NodeProto {
		return &onnxpb.NodeProto{Name: s(out), OpType: s(op), Input: in, Output: []string{out}}
	}
	stateful := &onnxpb.GraphProto{
		Name: s("stateful"),
		Node: []*onnxpb.NodeProto{node("Mul", "decayed", "state_in", "decay"), node("Add", "sum", "decayed", "x"),
			node("Tanh", "state_out", "sum"), node("Mul", "y", "state_out", "two")},
		Initializer: []*onnxpb.TensorProto{{Name: s("decay"), DataType: &f32, Dims: []int64{1}, FloatData: []float32{0.9}},
			{Name: s("two"), DataType: &f32, Dims: []int64{1}, FloatData: []float32{2}}},
		Input:  []*onnxpb.ValueInfoProto{valueInfo("x", onnxpb.TensorProto_FLOAT, StatefulWidth), valueInfo("state_in", onnxpb.TensorProto_FLOAT, StatefulWidth)},
		Output: []*onnxpb.ValueInfoProto{valueInfo("y", onnxpb.TensorProto_FLOAT, StatefulWidth), valueInfo("state_out", onnxpb.TensorProto_FLOAT, StatefulWidth)},
	}
	controls := &onnxpb.GraphProto{
		Name: s("controls"),
		Node: []*onnxpb.NodeProto{node("Identity", "y", "x"), node("Identity", "start", "START"), node("Identity", "end", "END"),
			node("Identity", "ready", "READY"), node("Identity", "corrid", "CORRID")},
		Input: []*onnxpb.ValueInfoProto{valueInfo("x", onnxpb.TensorProto_FLOAT, 1), valueInfo("START", onnxpb.TensorProto_INT32, 1),
			valueInfo("END", onnxpb.TensorProto_FLOAT, 1), valueInfo("READY", onnxpb.TensorProto_BOOL, 1), valueInfo("CORRID", onnxpb.TensorProto_UINT64, 1)},
		Output: []*onnxpb.ValueInfoProto{valueInfo("y", onnxpb.TensorProto_FLOAT, 1), valueInfo("start", onnxpb.TensorProto_INT32, 1),
			valueInfo("end", onnxpb.TensorProto_FLOAT, 1), valueInfo("ready", onnxpb.TensorProto_BOOL, 1), valueInfo("corrid", onnxpb.TensorProto_UINT64, 1)},
	}
	for _, m := range []struct {
		name, config string
		g            *onnxpb.GraphProto
	}{{"stateful", StatefulConfig, stateful}, {"controls", ControlsConfig, controls}} {
		if err := writeModel(repo, m.name, m.config, m.g); err != nil {
			return err
		}
	}
	return nil
}

// valueInfo is a tensor [batch, width] of the element type, batch a free dim.
func valueInfo(name string, et onnxpb.TensorProto_DataType, width int64) *onnxpb.ValueInfoProto {
	e, batch := int32(et), "batch"
	shape := &onnxpb.TensorShapeProto{Dim: []*onnxpb.TensorShapeProto_Dimension{
		{Value: &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: batch}},
		{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: width}}}}
	return &onnxpb.ValueInfoProto{Name: &name, Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{ElemType: &e, Shape: shape}}}}
}

// writeModel writes an opset-17 model of g as <repo>/<name>/1/model.onnx with its
// config.pbtxt.
func writeModel(repo, name, config string, g *onnxpb.GraphProto) error {
	v17, ir, domain := int64(17), int64(8), ""
	b, err := proto.Marshal(&onnxpb.ModelProto{IrVersion: &ir, OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: &domain, Version: &v17}}, Graph: g})
	if err != nil {
		return err
	}
	dir := filepath.Join(repo, name)
	if err := os.MkdirAll(filepath.Join(dir, "1"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "1", "model.onnx"), b, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "config.pbtxt"), []byte(config), 0o644)
}
