package vm

import (
	"fmt"
	"math"

	"github.com/kilnrt/kiln/tensor"
)

// Names of the standard builtins the compiler emits.
const (
	// BuiltinLoopContinue(i, max, cond) is the bool i < max && cond != 0: the test at the
	// top of a compiled ONNX Loop.
	BuiltinLoopContinue = "loop.continue"
	// BuiltinLoopNext(i) is i + 1 (int64).
	BuiltinLoopNext = "loop.next"
)

// StdBuiltins is the table of host builtins every VM may use: scalar bookkeeping of
// compiled control flow, the shapes of symbolic dims and the host shape functions of
// value-dependent shapes (builtins_hostshape.go). Each checks its arguments and returns an error, never panics,
// on a malformed executable.
func StdBuiltins() map[string]Builtin {
	b := map[string]Builtin{
		BuiltinLoopContinue: loopContinue,
		BuiltinLoopNext:     loopNext,
		BuiltinShapeDim:     shapeDim,
		BuiltinShapeExpect:  shapeExpect,
		BuiltinShapeEval:    shapeEval,
		BuiltinShapeAtMost:  shapeAtMost,
		BuiltinShapeDerive:  shapeDerive,
		BuiltinShapeAgree:   shapeAgree,
		BuiltinScanAppend:   scanAppend,
		BuiltinScanFinish:   scanFinish,
		BuiltinScanSlice:    scanSlice,
	}
	for name, f := range hostShapeBuiltins() {
		b[name] = f
	}
	return b
}

func scalarArg(name string, args []*tensor.Tensor, i int) (float64, error) {
	if i >= len(args) || args[i] == nil || args[i].Len() != 1 || !(args[i].DType.IsNumeric() || args[i].DType == tensor.Bool) {
		return 0, fmt.Errorf("%s: argument %d is not a numeric scalar", name, i)
	}
	return args[i].Float64s()[0], nil
}

func loopContinue(args []*tensor.Tensor) (*tensor.Tensor, error) {
	if len(args) != 3 {
		return nil, fmt.Errorf("%s takes 3 arguments, got %d", BuiltinLoopContinue, len(args))
	}
	i, err := scalarArg(BuiltinLoopContinue, args, 0)
	if err != nil {
		return nil, err
	}
	if args[1].DType != tensor.Int64 || args[1].Len() != 1 {
		return nil, fmt.Errorf("%s: the trip count is %v%v, want an int64 scalar", BuiltinLoopContinue, args[1].DType, args[1].Shape)
	}
	limit := args[1].Int64s()[0]
	cond, err := scalarArg(BuiltinLoopContinue, args, 2)
	if err != nil {
		return nil, err
	}
	ok := int64(i) < limit && cond != 0 && !math.IsNaN(cond)
	return tensor.Scalar(ok), nil
}

func loopNext(args []*tensor.Tensor) (*tensor.Tensor, error) {
	if len(args) != 1 || args[0].DType != tensor.Int64 || args[0].Len() != 1 {
		return nil, fmt.Errorf("%s takes one int64 scalar", BuiltinLoopNext)
	}
	return tensor.Scalar(args[0].Int64s()[0] + 1), nil
}
