package vm

import (
	"fmt"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/tensor"
)

// Value is what a register holds: *Storage, *Tensor, *Host or *Tuple.
type Value interface{ value() }

// Storage is one device allocation (an arena tensors are placed in): Buf holds exactly
// its Size bytes. A storage from the VM's pool may be a block inside a larger device
// buffer (root, at byte base); tensors in it are viewed from root at base+Offset.
type Storage struct {
	Device int
	Buf    devices.Buffer
	Size   int64

	constant bool           // holds a constant: kernels may read it, never write it
	root     devices.Buffer // the device buffer Buf lies in; nil when Buf is one itself
	base     int64          // Buf's offset inside root
	blk      *block         // the pool's block, while handed out; nil for mapped constants
	img      *imageKey      // an image storage's key (Buf is the image); nil for a buffer
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
