package serve

import (
	"fmt"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loader/onnx"
)

// tensorsOnly refuses a model whose interface has an input or output that is not a
// tensor (an ONNX sequence or optional): the Open Inference Protocol has tensors only,
// so no request could give it or receive it. The error names the tensor and its type.
func tensorsOnly(it *onnx.Interface) error {
	for _, side := range []struct {
		what string
		ios  []onnx.NamedType
	}{{"input", it.Inputs}, {"output", it.Outputs}} {
		for i, io := range side.ios {
			if io.Type.Kind != graph.KindTensor {
				return fmt.Errorf("model %s %d, %q, is %v: the inference protocol carries tensors only, so kiln does not serve sequences or optionals", side.what, i, io.Name, io.Type)
			}
		}
	}
	return nil
}
