package vm

import (
	"fmt"
	"unsafe"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/tensor"
)

// bindConst makes a constant a tensor on device 0: over its own memory through hm when
// hm is set and that memory is the raw encoding, else as an uploaded copy.
func (m *VM) bindConst(hm devices.HostMapper, c *tensor.Tensor) (*Tensor, error) {
	raw, ok := c.NativeBytes()
	if hm == nil || !ok {
		return m.upload(0, c, &m.storages)
	}
	buf, err := hm.MapHost(raw)
	if err != nil {
		return nil, err
	}
	s := &Storage{Device: 0, Buf: buf, Size: int64(len(raw))}
	m.storages = append(m.storages, s)
	return &Tensor{Storage: s, DType: c.DType, Shape: int64Shape(c.Shape)}, nil
}

// upload copies a host tensor into a new storage on device d.
func (m *VM) upload(d int, t *tensor.Tensor, owned *[]*Storage) (*Tensor, error) {
	raw, ok := t.NativeBytes()
	if !ok {
		var err error
		if raw, err = t.Raw(); err != nil {
			return nil, err
		}
	}
	s, err := m.allocStorage(d, int64(len(raw)))
	if err != nil {
		return nil, err
	}
	*owned = append(*owned, s)
	buf := s.Buf
	if err := m.devs[d].CopyIn(buf, raw); err != nil {
		return nil, err
	}
	return &Tensor{Storage: s, DType: t.DType, Shape: int64Shape(t.Shape)}, nil
}

func int64Shape(s tensor.Shape) []int64 {
	out := make([]int64, len(s))
	for i, x := range s {
		out[i] = int64(x)
	}
	return out
}

// host returns a host copy of a tensor value.
func (c *call) host(v Value) (*tensor.Tensor, error) {
	switch x := v.(type) {
	case *Host:
		return x.T, nil
	case *Tensor:
		if err := c.sync(x.Storage.Device); err != nil {
			return nil, err
		}
		buf, err := c.view(x)
		if err != nil {
			return nil, err
		}
		shape := make(tensor.Shape, len(x.Shape))
		for i, d := range x.Shape {
			shape[i] = int(d)
		}
		// copy straight into the host tensor's elements where they are the device's
		// bytes (one copy, not two)
		if t := tensor.New(x.DType, shape); int64(t.Len()*x.DType.Size()) == x.Bytes() {
			if b, ok := t.NativeBytes(); ok {
				if err := c.m.devs[x.Storage.Device].CopyOut(b, buf); err != nil {
					return nil, err
				}
				return t, nil
			}
		}
		raw := make([]byte, x.Bytes())
		if err := c.m.devs[x.Storage.Device].CopyOut(raw, buf); err != nil {
			return nil, err
		}
		return tensor.FromRaw(x.DType, shape, raw)
	}
	return nil, fmt.Errorf("%T is not a tensor", v)
}

// view is the device buffer holding exactly a tensor's bytes: the storage's own buffer
// when the tensor fills it, else a view of the device buffer the storage lies in. A
// tensor in an image is the image itself (at offset 0; it may hold fewer bytes), which
// copies read or write a prefix of.
func (c *call) view(t *Tensor) (devices.Buffer, error) {
	s := t.Storage
	if t.Offset == 0 && t.Bytes() == s.Size || s.img != nil {
		return s.Buf, nil // an image, which cannot be viewed: its tensor is its first bytes
	}
	sl, ok := c.m.devs[s.Device].(devices.Slicer)
	if !ok {
		return nil, fmt.Errorf("device %d cannot place tensors at offsets", s.Device)
	}
	if s.root != nil {
		return sl.Slice(s.root, s.base+t.Offset, t.Bytes())
	}
	return sl.Slice(s.Buf, t.Offset, t.Bytes())
}

// alloc takes a storage of n bytes for the call, within its RequestBytes limit (what
// names the storage in the refusal, which wraps ErrInput and ErrMemoryLimit).
func (c *call) alloc(d int, n int64, what string) (*Storage, error) {
	if err := c.reserve(n, what); err != nil {
		return nil, err
	}
	s, err := c.m.allocStorage(d, n)
	if err != nil {
		return nil, err
	}
	c.storages = append(c.storages, s)
	c.held += n
	return s, nil
}

// reserve checks that the call may hold n more bytes.
func (c *call) reserve(n int64, what string) error {
	if held, err := tensor.CheckedAdd(c.held, n); err != nil || held > c.m.limits.RequestBytes {
		return fmt.Errorf("%w: %w", ErrInput, c.m.limits.RequestError(what, c.held+n))
	}
	return nil
}

// upload copies a host tensor to device d for the call, within its RequestBytes limit.
func (c *call) upload(d int, t *tensor.Tensor, what string) (*Tensor, error) {
	n := int64(t.Len()) * int64(t.DType.Size())
	if err := c.reserve(n, what); err != nil {
		return nil, err
	}
	u, err := c.m.upload(d, t, &c.storages)
	if err != nil {
		return nil, err
	}
	c.held += u.Storage.Size
	return u, nil
}

// minBoundInput is the least input bind maps rather than copies: below it a copy costs
// less than the mapping's bookkeeping. (Large Go allocations start on a page, so a large
// host tensor is mapped every time or never.)
const minBoundInput = 64 << 10

// bind makes a host input of the call a device tensor on device 0 without a copy where
// it can: where device 0 maps host memory (the CPU) and the tensor's elements are its
// native bytes, minBoundInput or more, starting DataAlign-aligned (what a kernel
// assumes of every buffer), the storage is a view of them, marked constant (a kernel
// never writes it: the launch check refuses one that would, and the device refuses to
// copy into it) and freed, the bytes left alone, when the call ends. Otherwise the
// tensor is copied (upload). Either way its bytes count against the call's
// RequestBytes.
func (c *call) bind(t *tensor.Tensor, what string) (*Tensor, error) {
	hm, ok := c.m.devs[0].(devices.HostMapper)
	raw, native := t.NativeBytes()
	if !ok || !native || len(raw) < minBoundInput || uintptr(unsafe.Pointer(unsafe.SliceData(raw)))%DataAlign != 0 {
		return c.upload(0, t, what)
	}
	n := int64(len(raw))
	if err := c.reserve(n, what); err != nil {
		return nil, err
	}
	buf, err := hm.MapHost(raw)
	if err != nil {
		return nil, err
	}
	s := &Storage{Device: 0, Buf: buf, Size: n, constant: true}
	c.borrowed = append(c.borrowed, s)
	c.held += n
	return &Tensor{Storage: s, DType: t.DType, Shape: int64Shape(t.Shape)}, nil
}

// allocStorage takes a storage of n bytes on device d from the pool (a free block, or a
// new device buffer).
func (m *VM) allocStorage(d int, n int64) (*Storage, error) { return m.pool.get(d, n) }

// deviceCopy copies a tensor value to a new storage of the call on device d: within
// a device through Copy (queued behind the kernels that write the source), else
// through host memory (CopyOut after the source's device is synchronized, then CopyIn).
// A tensor in an image copies within the device when it fills the image (Copy moves
// the whole image), else through host memory.
func (c *call) deviceCopy(v Value, d int) (*Tensor, error) {
	if t, ok := v.(*Tensor); ok && t.Storage.Device == d && t.Bytes() > 0 && (t.Storage.img == nil || t.Bytes() == t.Storage.Size) {
		s, err := c.alloc(d, t.Bytes(), "a copy on the device")
		if err != nil {
			return nil, err
		}
		src, err := c.view(t)
		if err != nil {
			return nil, err
		}
		if err := c.m.devs[d].Copy(s.Buf, src); err != nil {
			return nil, err
		}
		return &Tensor{Storage: s, DType: t.DType, Shape: append([]int64{}, t.Shape...)}, nil
	}
	h, err := c.host(v)
	if err != nil {
		return nil, err
	}
	return c.upload(d, h, "a copy to the device")
}
