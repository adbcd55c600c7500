package vm

import (
	"fmt"
	"reflect"

	"github.com/kilnrt/kiln/tensor"
)

// Scan builtins: how a compiled Loop stacks its scan outputs (one value per iteration
// along a new first axis) on the host.
const (
	// BuiltinScanAppend(acc, v) is acc with v appended as its last row; acc starts as a
	// scalar (no rows yet). Every v must have the first one's element type and shape.
	BuiltinScanAppend = "scan.append"
	// BuiltinScanFinish(acc, template[, elem]) is acc, or after no iteration an empty
	// tensor of template's element type and shape [0, elem...].
	BuiltinScanFinish = "scan.finish"
)

func scanAppend(args []*tensor.Tensor) (*tensor.Tensor, error) {
	if len(args) != 2 || args[0] == nil || args[1] == nil {
		return nil, fmt.Errorf("%s takes the accumulated rows and one value", BuiltinScanAppend)
	}
	acc, v := args[0], args[1]
	if len(acc.Shape) == 0 { // the first iteration: copy (v's memory is the loop's)
		data := reflect.AppendSlice(reflect.MakeSlice(reflect.TypeOf(v.Data), 0, v.Len()), reflect.ValueOf(v.Data))
		return &tensor.Tensor{DType: v.DType, Shape: append(tensor.Shape{1}, v.Shape...), Data: data.Interface()}, nil
	}
	if acc.DType != v.DType || !acc.Shape[1:].Equal(v.Shape) {
		return nil, fmt.Errorf("%w: a Loop scan output is %v%v in one iteration and %v%v in another", ErrInput, acc.DType, acc.Shape[1:], v.DType, v.Shape)
	}
	// append amortizes: acc's register is overwritten by the result, so sharing its
	// backing array is safe
	data := reflect.AppendSlice(reflect.ValueOf(acc.Data), reflect.ValueOf(v.Data))
	shape := append(tensor.Shape{acc.Shape[0] + 1}, acc.Shape[1:]...)
	return &tensor.Tensor{DType: acc.DType, Shape: shape, Data: data.Interface()}, nil
}

func scanFinish(args []*tensor.Tensor) (*tensor.Tensor, error) {
	if len(args) < 2 || len(args) > 3 || args[0] == nil || args[1] == nil {
		return nil, fmt.Errorf("%s takes the accumulated rows, a template and the element shape", BuiltinScanFinish)
	}
	acc, tmpl := args[0], args[1]
	if len(acc.Shape) != 0 {
		if acc.DType != tmpl.DType {
			return nil, fmt.Errorf("%s: rows of %v for an output of %v", BuiltinScanFinish, acc.DType, tmpl.DType)
		}
		return acc, nil
	}
	if len(args) < 3 || args[2] == nil || len(args[2].Shape) != 1 {
		return nil, fmt.Errorf("%s: the Loop ran no iteration and the shape of its scan output's elements is not known", BuiltinScanFinish)
	}
	shape := tensor.Shape{0}
	for _, d := range args[2].Int64s() {
		if d < 0 || d > maxExtent {
			return nil, fmt.Errorf("%s: element extent %d", BuiltinScanFinish, d)
		}
		shape = append(shape, int(d))
	}
	return tensor.New(tmpl.DType, shape), nil
}

// BuiltinScanSlice(x, axis, i, n, reverse) is x's i-th slice along axis (the
// (n-1-i)-th when reverse != 0), that axis removed: one iteration's scan input.
const BuiltinScanSlice = "scan.slice"

func scanSlice(args []*tensor.Tensor) (*tensor.Tensor, error) {
	if len(args) != 5 || args[0] == nil {
		return nil, fmt.Errorf("%s takes a tensor, an axis, an index, a count and a direction", BuiltinScanSlice)
	}
	x := args[0]
	var ints [4]int64
	for k := range ints {
		v, err := int64Scalar(BuiltinScanSlice, args, k+1)
		if err != nil {
			return nil, err
		}
		ints[k] = v
	}
	axis, i, n, reverse := ints[0], ints[1], ints[2], ints[3] != 0
	if axis < 0 || axis >= int64(len(x.Shape)) || n != int64(x.Shape[axis]) || i < 0 || i >= n {
		return nil, fmt.Errorf("%s: slice %d of %d along axis %d of a %v tensor", BuiltinScanSlice, i, n, axis, x.Shape)
	}
	if reverse {
		i = n - 1 - i
	}
	outer, inner := 1, 1
	for _, d := range x.Shape[:axis] {
		outer *= d
	}
	for _, d := range x.Shape[axis+1:] {
		inner *= d
	}
	shape := append(append(tensor.Shape{}, x.Shape[:axis]...), x.Shape[axis+1:]...)
	src := reflect.ValueOf(x.Data)
	dst := reflect.MakeSlice(src.Type(), outer*inner, outer*inner)
	for o := 0; o < outer; o++ {
		from := (o*int(n) + int(i)) * inner
		reflect.Copy(dst.Slice(o*inner, (o+1)*inner), src.Slice(from, from+inner))
	}
	return &tensor.Tensor{DType: x.DType, Shape: shape, Data: dst.Interface()}, nil
}
