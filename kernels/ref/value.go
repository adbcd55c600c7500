package ref

import (
	"fmt"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

// Value is a runtime value of the evaluator: *tensor.Tensor, *Sequence or *Optional.
type Value any

// Sequence is an ONNX sequence of tensors.
type Sequence struct {
	Elem  tensor.DType
	Items []*tensor.Tensor
}

// Optional is an ONNX optional; V is nil when empty.
type Optional struct {
	Elem graph.Type
	V    Value
}

// Describe prints a short description of a value for messages.
func Describe(v Value) string {
	switch x := v.(type) {
	case nil:
		return "<none>"
	case *tensor.Tensor:
		return x.DType.String() + x.Shape.String()
	case *Sequence:
		return fmt.Sprintf("seq<%v>(len %d)", x.Elem, len(x.Items))
	case *Optional:
		if x.V == nil {
			return "opt<empty>"
		}
		return "opt<" + Describe(x.V) + ">"
	}
	return fmt.Sprintf("%T", v)
}
