package onnx_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/kilnrt/kiln/loader/onnx"
	"github.com/kilnrt/kiln/loader/onnx/onnxpb"
	"github.com/kilnrt/kiln/tensor"
)

// addWithDefault is y = x + b, with x and b both graph inputs of type f32[2] and b also
// an initializer ({10, 20}) of type bType, in a model of IR version ir.
func addWithDefault(t *testing.T, ir int64, bType onnxpb.TensorProto_DataType) []byte {
	t.Helper()
	f32 := int32(onnxpb.TensorProto_FLOAT)
	vi := func(name string) *onnxpb.ValueInfoProto {
		return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
			TensorType: &onnxpb.TypeProto_Tensor{ElemType: &f32, Shape: &onnxpb.TensorShapeProto{Dim: []*onnxpb.TensorShapeProto_Dimension{
				{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: 2}}}}}}}}
	}
	bt := int32(bType)
	init := &onnxpb.TensorProto{Name: proto.String("b"), DataType: &bt, Dims: []int64{2}, FloatData: []float32{10, 20}}
	if bType == onnxpb.TensorProto_INT64 {
		init.FloatData, init.Int64Data = nil, []int64{10, 20}
	}
	b, err := proto.Marshal(&onnxpb.ModelProto{IrVersion: proto.Int64(ir),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(17)}},
		Graph: &onnxpb.GraphProto{Name: proto.String("add"), Input: []*onnxpb.ValueInfoProto{vi("x"), vi("b")},
			Initializer: []*onnxpb.TensorProto{init}, Output: []*onnxpb.ValueInfoProto{vi("y")},
			Node: []*onnxpb.NodeProto{{OpType: proto.String("Add"), Name: proto.String("add"), Input: []string{"x", "b"}, Output: []string{"y"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestInputWithInitializerIsAnInputWithADefault: from IR version 4 on, a graph input
// that has an initializer stays an input (a parameter, no constant) whose default is
// the initializer, in the loaded module and in the interface read without loading; in
// an IR version 3 model, where every initializer is listed as an input, it is a
// constant and no input.
func TestInputWithInitializerIsAnInputWithADefault(t *testing.T) {
	for _, ir := range []int64{3, 4, 8} {
		path := filepath.Join(t.TempDir(), "model.onnx")
		if err := os.WriteFile(path, addWithDefault(t, ir, onnxpb.TensorProto_FLOAT), 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := onnx.Load(path, onnx.Options{})
		if err != nil {
			t.Fatalf("IR %d: %v", ir, err)
		}
		sc, err := onnx.Scan(path)
		if err != nil {
			t.Fatalf("IR %d: %v", ir, err)
		}
		var params []string
		for _, p := range m.Main.Params {
			params = append(params, p.Name)
			if p.Const != nil {
				t.Errorf("IR %d: parameter %q is a constant", ir, p.Name)
			}
		}
		var inputs []string
		for _, in := range sc.Interface.Inputs {
			inputs = append(inputs, in.Name)
		}
		if ir < 4 {
			if len(params) != 1 || len(inputs) != 1 || len(m.Main.Consts) != 1 || m.Defaults != nil || len(sc.Interface.Constants) != 1 {
				t.Errorf("IR %d: parameters %v, interface inputs %v, %d constants, defaults %v; want x alone and b a constant", ir, params, inputs, len(m.Main.Consts), m.Defaults)
			}
			continue
		}
		if len(params) != 2 || params[1] != "b" || len(inputs) != 2 || inputs[1] != "b" || len(m.Main.Consts) != 0 {
			t.Fatalf("IR %d: parameters %v, interface inputs %v, %d constants; want x and b, no constant", ir, params, inputs, len(m.Main.Consts))
		}
		for what, def := range map[string]*tensor.Tensor{"module": m.Defaults["b"], "interface": sc.Interface.Inputs[1].Default, "signature": sc.Signature.Defaults["b"]} {
			if def == nil {
				t.Fatalf("IR %d: the %s has no default for b", ir, what)
			}
			if got := def.Float64s(); len(got) != 2 || got[0] != 10 || got[1] != 20 {
				t.Errorf("IR %d: the %s's default for b is %v, want [10 20]", ir, what, got)
			}
		}
		if sc.Interface.Inputs[0].Default != nil {
			t.Errorf("IR %d: x has a default", ir)
		}
	}
}

// TestDefaultOfAnotherTypeThanItsInputIsInvalid: an initializer that is not a value of
// its input's declared type cannot be the input's default: the load and the scan refuse
// the model, naming the input.
func TestDefaultOfAnotherTypeThanItsInputIsInvalid(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.onnx")
	if err := os.WriteFile(path, addWithDefault(t, 8, onnxpb.TensorProto_INT64), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := onnx.Load(path, onnx.Options{}); !errors.Is(err, onnx.ErrInvalid) {
		t.Errorf("load: %v, want ErrInvalid", err)
	}
	if _, err := onnx.Scan(path); !errors.Is(err, onnx.ErrInvalid) {
		t.Errorf("scan: %v, want ErrInvalid", err)
	}
}

// chainWithWeights is x + w0 + w1 + ... + w(n-1), each wK an f32[2] initializer; the
// first listed of them are also graph inputs.
func chainWithWeights(t *testing.T, n, listed int) []byte {
	t.Helper()
	f32 := int32(onnxpb.TensorProto_FLOAT)
	vi := func(name string) *onnxpb.ValueInfoProto {
		return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
			TensorType: &onnxpb.TypeProto_Tensor{ElemType: &f32, Shape: &onnxpb.TensorShapeProto{Dim: []*onnxpb.TensorShapeProto_Dimension{
				{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: 2}}}}}}}}
	}
	g := &onnxpb.GraphProto{Name: proto.String("chain"), Input: []*onnxpb.ValueInfoProto{vi("x")}}
	prev := "x"
	for k := 0; k < n; k++ {
		w, out := fmt.Sprintf("w%d", k), fmt.Sprintf("y%d", k)
		g.Initializer = append(g.Initializer, &onnxpb.TensorProto{Name: proto.String(w), DataType: &f32, Dims: []int64{2}, FloatData: []float32{1, 2}})
		if k < listed {
			g.Input = append(g.Input, vi(w))
		}
		g.Node = append(g.Node, &onnxpb.NodeProto{OpType: proto.String("Add"), Name: proto.String("add" + w), Input: []string{prev, w}, Output: []string{out}})
		prev = out
	}
	g.Output = []*onnxpb.ValueInfoProto{vi(prev)}
	b, err := proto.Marshal(&onnxpb.ModelProto{IrVersion: proto.Int64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(17)}}, Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestWeightsExportedAsInputsStayConstants: a model that lists every one of its many
// initializers as a graph input (the legacy exporters' weights-as-inputs pattern) keeps
// them constants, so weights fold; one that lists only some of them, or has a few, keeps
// them as inputs with defaults. The load and the scan agree.
func TestWeightsExportedAsInputsStayConstants(t *testing.T) {
	n := 12
	for _, c := range []struct {
		name           string
		inits, listed  int
		wantParams     int
		wantConstNames int
	}{
		{"every one of many listed", n, n, 1, n},
		{"all but one listed", n, n - 1, n, 0},
		{"a few, all listed", 3, 3, 4, 0},
	} {
		path := filepath.Join(t.TempDir(), "model.onnx")
		if err := os.WriteFile(path, chainWithWeights(t, c.inits, c.listed), 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := onnx.Load(path, onnx.Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		sc, err := onnx.Scan(path)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(m.Main.Params) != c.wantParams || len(sc.Interface.Inputs) != c.wantParams || len(sc.Interface.Constants) != c.wantConstNames {
			t.Errorf("%s: %d parameters, %d interface inputs, %d interface constants; want %d, %d, %d",
				c.name, len(m.Main.Params), len(sc.Interface.Inputs), len(sc.Interface.Constants), c.wantParams, c.wantParams, c.wantConstNames)
		}
		if c.wantConstNames > 0 && len(m.Defaults) != 0 {
			t.Errorf("%s: defaults %v, want none", c.name, m.Defaults)
		}
	}
}
