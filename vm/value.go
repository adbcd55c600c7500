package vm

import (
	"fmt"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/tensor"
)

// Value is what a register holds: *Storage, *Tensor, *Host or *Tuple.
type Value interface{ value() }

// Storage is one device allocation (an arena tensors are placed in).
type Storage struct {
	Device int
	Buf    devices.Buffer
	Size   int64

	constant bool // holds a constant: kernels may read it, never write it
}

// Tensor is a tensor in device storage at a byte offset.
type Tensor struct {
	Storage *Storage
	Offset  int64
	DType   tensor.DType
	Shape   []int64
}

// Host is a tensor in host memory: a shape, a scalar, a builtin's result.
type Host struct{ T *tensor.Tensor }

// Tuple groups values (multiple outputs).
type Tuple struct{ Fields []Value }

func (*Storage) value() {}
func (*Tensor) value()  {}
func (*Host) value()    {}
func (*Tuple) value()   {}

// Bytes is the tensor's size in bytes.
func (t *Tensor) Bytes() int64 {
	n := int64(t.DType.Size())
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

func shapeOf(v Value) ([]int64, error) {
	switch x := v.(type) {
	case *Tensor:
		return x.Shape, nil
	case *Host:
		out := make([]int64, len(x.T.Shape))
		for i, d := range x.T.Shape {
			out[i] = int64(d)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%T has no shape", v)
}
