package serve

import (
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loader/onnx"
	"github.com/kilnrt/kiln/tensor"
)

func TestSequenceOrOptionalInterfaceIsRefusedNamingTheTensor(t *testing.T) {
	f32 := graph.Type{DType: tensor.Float32, Shape: []graph.Dim{graph.Const(4)}}
	seq := graph.Type{Kind: graph.KindSequence, Elem: &f32}
	opt := graph.Type{Kind: graph.KindOptional, Elem: &f32}
	if err := tensorsOnly(&onnx.Interface{Inputs: []onnx.NamedType{{Name: "x", Type: f32}}, Outputs: []onnx.NamedType{{Name: "y", Type: f32}}}); err != nil {
		t.Fatalf("a tensor model: %v", err)
	}
	for _, tc := range []struct {
		it   onnx.Interface
		want string
	}{
		{onnx.Interface{Inputs: []onnx.NamedType{{Name: "x", Type: f32}, {Name: "items", Type: seq}}}, `input 1, "items", is seq<f32[4]>`},
		{onnx.Interface{Inputs: []onnx.NamedType{{Name: "x", Type: f32}}, Outputs: []onnx.NamedType{{Name: "maybe", Type: opt}}}, `output 0, "maybe", is opt<f32[4]>`},
	} {
		err := tensorsOnly(&tc.it)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "tensors only") {
			t.Errorf("%v: %v, want an error saying %s", tc.it, err, tc.want)
		}
	}
}
