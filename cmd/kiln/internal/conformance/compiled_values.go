package conformance

import (
	"errors"
	"fmt"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// ErrCompiledUnsupported: a test input the compiled engine cannot take (a case it
// skips, not a failure).
var ErrCompiledUnsupported = errors.New("not supported by the compiled engine")

// vmValue is a test's input as the VM takes it: a tensor, a vm.SeqValue or a
// vm.OptValue.
func vmValue(v ref.Value) (any, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case *tensor.Tensor:
		return x, nil
	case *ref.Sequence:
		return &vm.SeqValue{Elem: x.Elem, Items: x.Items}, nil
	case *ref.Optional:
		if x.V == nil {
			return &vm.OptValue{}, nil
		}
		inner, err := vmValue(x.V)
		if err != nil {
			return nil, err
		}
		return &vm.OptValue{V: inner}, nil
	}
	return nil, fmt.Errorf("%w: %s", ErrCompiledUnsupported, ref.Describe(v))
}

// refValue is the VM's output as the reference evaluator's value of type t (an
// optional's contained type comes from t).
func refValue(v any, t graph.Type) ref.Value {
	switch x := v.(type) {
	case *vm.SeqValue:
		return &ref.Sequence{Elem: x.Elem, Items: x.Items}
	case *vm.OptValue:
		o := &ref.Optional{}
		var inner graph.Type
		if t.Elem != nil {
			o.Elem, inner = *t.Elem, *t.Elem
		}
		if x.V != nil {
			o.V = refValue(x.V, inner)
		}
		return o
	case *tensor.Tensor:
		return x
	}
	return nil
}
