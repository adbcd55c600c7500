package tensor

import (
	"fmt"
	"reflect"
	"strings"
)

// Tensor is a dense host tensor. Data is a slice of DType.GoType().
type Tensor struct {
	DType DType
	Shape Shape
	Data  any
}

// New allocates a zero-filled tensor.
func New(dt DType, shape Shape) *Tensor {
	if !dt.Valid() {
		panic(fmt.Sprintf("BUG: tensor.New with invalid dtype %d", dt))
	}
	n := shape.NumElements()
	data := reflect.MakeSlice(reflect.SliceOf(dt.GoType()), n, n).Interface()
	return &Tensor{DType: dt, Shape: shape.Clone(), Data: data}
}

// FromSlice wraps data (not copied) as a tensor of the given shape; the dtype is
// inferred from the slice's element type.
func FromSlice(shape Shape, data any) (*Tensor, error) {
	rv := reflect.ValueOf(data)
	if rv.Kind() != reflect.Slice {
		return nil, fmt.Errorf("%w: data is %T, not a slice", ErrDType, data)
	}
	dt := Undefined
	for d, info := range dtypeTable {
		if info.gtype == rv.Type().Elem() {
			dt = d
		}
	}
	if dt == Undefined {
		return nil, fmt.Errorf("%w: no dtype for element type %v", ErrDType, rv.Type().Elem())
	}
	if rv.Len() != shape.NumElements() {
		return nil, fmt.Errorf("%w: %d elements for shape %v", ErrShape, rv.Len(), shape)
	}
	return &Tensor{DType: dt, Shape: shape.Clone(), Data: data}, nil
}

// MustFromSlice is FromSlice for data the caller built itself; a mismatch is a bug.
func MustFromSlice(shape Shape, data any) *Tensor {
	t, err := FromSlice(shape, data)
	if err != nil {
		panic("BUG: " + err.Error())
	}
	return t
}

// Scalar makes a rank-0 tensor from a Go value of a tensor element type.
func Scalar[T any](v T) *Tensor { return MustFromSlice(Shape{}, []T{v}) }

// Len is the number of elements.
func (t *Tensor) Len() int { return reflect.ValueOf(t.Data).Len() }

// Clone deep-copies the tensor.
func (t *Tensor) Clone() *Tensor {
	rv := reflect.ValueOf(t.Data)
	cp := reflect.MakeSlice(rv.Type(), rv.Len(), rv.Len())
	reflect.Copy(cp, rv)
	return &Tensor{DType: t.DType, Shape: t.Shape.Clone(), Data: cp.Interface()}
}

// Reshape returns a tensor sharing t's data with a new shape of equal size.
func (t *Tensor) Reshape(s Shape) (*Tensor, error) {
	if s.NumElements() != t.Len() {
		return nil, fmt.Errorf("%w: cannot reshape %v to %v", ErrShape, t.Shape, s)
	}
	return &Tensor{DType: t.DType, Shape: s.Clone(), Data: t.Data}, nil
}

// Check verifies the tensor's invariants (dtype matches data, length matches shape).
func (t *Tensor) Check() error {
	if !t.DType.Valid() {
		return fmt.Errorf("%w: %d", ErrDType, t.DType)
	}
	rv := reflect.ValueOf(t.Data)
	if rv.Kind() != reflect.Slice || rv.Type().Elem() != t.DType.GoType() {
		return fmt.Errorf("%w: data %T does not hold %v", ErrDType, t.Data, t.DType)
	}
	for _, d := range t.Shape {
		if d < 0 {
			return fmt.Errorf("%w: negative extent in %v", ErrShape, t.Shape)
		}
	}
	if rv.Len() != t.Shape.NumElements() {
		return fmt.Errorf("%w: %d elements for shape %v", ErrShape, rv.Len(), t.Shape)
	}
	return nil
}

// String is a short summary, with the first values for small tensors.
func (t *Tensor) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v%v", t.DType, t.Shape)
	rv := reflect.ValueOf(t.Data)
	n := min(rv.Len(), 8)
	b.WriteString("{")
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprint(&b, rv.Index(i).Interface())
	}
	if rv.Len() > n {
		b.WriteString(", ...")
	}
	b.WriteString("}")
	return b.String()
}
