package cuda

import (
	"fmt"
	"unsafe"

	"github.com/kilnrt/kiln/devices"
)

// buffer is device memory from cuMemAlloc, or a view of it (parent set).
type buffer struct {
	ptr    uint64 // CUdeviceptr
	size   int64
	parent *buffer
}

func (b *buffer) Size() int64 { return b.size }

// maxAlloc bounds one allocation (a size from an untrusted model never reaches the driver
// as a huge request).
const maxAlloc = 1 << 40

// Alloc implements devices.Device: zeroed device memory. A zero-size buffer holds one
// byte, so that every buffer has a distinct, valid address.
func (d *Device) Alloc(n int64) (devices.Buffer, error) {
	if n < 0 || n > maxAlloc {
		return nil, fmt.Errorf("%w: cannot allocate %d bytes", devices.ErrBadBuffer, n)
	}
	if err := d.enter(); err != nil {
		return nil, err
	}
	defer d.leave()
	drv := d.drv
	b := &buffer{size: n}
	bytes := uintptr(max(n, 1))
	if err := drv.check("cuMemAlloc", drv.call(drv.memAlloc, uintptr(unsafe.Pointer(&b.ptr)), bytes)); err != nil {
		return nil, fmt.Errorf("%w: allocating %d bytes on CUDA device %d: %v", devices.ErrBadBuffer, n, d.ordinal, err)
	}
	if err := drv.check("cuMemsetD8Async", drv.call(drv.memsetD8Async, uintptr(b.ptr), 0, bytes, d.stream)); err != nil {
		drv.call(drv.memFree, uintptr(b.ptr))
		return nil, fmt.Errorf("%w: zeroing %d bytes: %v", devices.ErrBadBuffer, n, err)
	}
	d.mu.Lock()
	d.alive[b] = true
	d.mu.Unlock()
	return b, nil
}

// own checks that b is a live buffer (or a view of one) of this device.
func (d *Device) own(b devices.Buffer) (*buffer, error) {
	cb, ok := b.(*buffer)
	if !ok || cb == nil {
		return nil, fmt.Errorf("%w: buffer of another device (%T)", devices.ErrBadBuffer, b)
	}
	root := cb
	if cb.parent != nil {
		root = cb.parent
	}
	d.mu.Lock()
	live := d.alive[root]
	d.mu.Unlock()
	if !live {
		return nil, fmt.Errorf("%w: buffer was freed or belongs to another device", devices.ErrBadBuffer)
	}
	return cb, nil
}

// Slice implements devices.Slicer: a view of size bytes at offset inside b, valid while
// b is; views are not freed themselves.
func (d *Device) Slice(b devices.Buffer, offset, size int64) (devices.Buffer, error) {
	cb, err := d.own(b)
	if err != nil {
		return nil, err
	}
	if offset < 0 || size < 0 || offset > cb.size || size > cb.size-offset {
		return nil, fmt.Errorf("%w: view [%d, %d) of a %d-byte buffer", devices.ErrBadBuffer, offset, offset+size, cb.size)
	}
	root := cb
	if cb.parent != nil {
		root = cb.parent
	}
	return &buffer{ptr: cb.ptr + uint64(offset), size: size, parent: root}, nil
}

// Free implements devices.Device. It waits for the launched work first, which may still
// use the memory.
func (d *Device) Free(b devices.Buffer) error {
	cb, err := d.own(b)
	if err != nil {
		return err
	}
	if cb.parent != nil {
		return fmt.Errorf("%w: a view is freed with the buffer it views", devices.ErrBadBuffer)
	}
	d.mu.Lock()
	live := d.alive[cb]
	delete(d.alive, cb)
	d.mu.Unlock()
	if !live { // freed concurrently
		return fmt.Errorf("%w: buffer was freed", devices.ErrBadBuffer)
	}
	if err := d.enter(); err != nil {
		return err
	}
	defer d.leave()
	err = d.syncStream()
	if r := d.drv.call(d.drv.memFree, uintptr(cb.ptr)); err == nil {
		err = d.drv.check("cuMemFree", r)
	}
	return err
}

// CopyIn implements devices.Device. The copy is queued on the stream after the work
// launched before it; src may be reused on return, since the driver stages pageable host
// memory before it returns.
func (d *Device) CopyIn(dst devices.Buffer, src []byte) error {
	b, err := d.own(dst)
	if err != nil {
		return err
	}
	if int64(len(src)) > b.size {
		return fmt.Errorf("%w: copying %d bytes into a %d-byte buffer", devices.ErrBadBuffer, len(src), b.size)
	}
	if len(src) == 0 {
		return nil
	}
	if err := d.enter(); err != nil {
		return err
	}
	defer d.leave()
	r := d.drv.call(d.drv.memcpyHtoDAsync, uintptr(b.ptr), uintptr(unsafe.Pointer(&src[0])), uintptr(len(src)), d.stream)
	return d.drv.check("cuMemcpyHtoDAsync", r)
}

// CopyOut implements devices.Device: it waits for the work launched before it and for
// the copy itself. It does not read the status block: Sync reports kernels' codes.
func (d *Device) CopyOut(dst []byte, src devices.Buffer) error {
	b, err := d.own(src)
	if err != nil {
		return err
	}
	if int64(len(dst)) > b.size {
		return fmt.Errorf("%w: copying %d bytes out of a %d-byte buffer", devices.ErrBadBuffer, len(dst), b.size)
	}
	if len(dst) == 0 {
		return nil
	}
	if err := d.enter(); err != nil {
		return err
	}
	defer d.leave()
	return d.copyOut(unsafe.Pointer(&dst[0]), b.ptr, len(dst))
}

// copyOut copies n bytes at src to host memory at dst and waits; the caller has entered.
func (d *Device) copyOut(dst unsafe.Pointer, src uint64, n int) error {
	drv := d.drv
	if err := drv.check("cuMemcpyDtoHAsync", drv.call(drv.memcpyDtoHAsync, uintptr(dst), uintptr(src), uintptr(n), d.stream)); err != nil {
		return err
	}
	return d.syncStream()
}

// Copy implements devices.Device: a device-to-device copy queued on the stream.
func (d *Device) Copy(dst, src devices.Buffer) error {
	s, err := d.own(src)
	if err != nil {
		return err
	}
	t, err := d.own(dst)
	if err != nil {
		return err
	}
	if s.size > t.size {
		return fmt.Errorf("%w: copying %d bytes into a %d-byte buffer", devices.ErrBadBuffer, s.size, t.size)
	}
	if s.size == 0 {
		return nil
	}
	if err := d.enter(); err != nil {
		return err
	}
	defer d.leave()
	r := d.drv.call(d.drv.memcpyDtoDAsync, uintptr(t.ptr), uintptr(s.ptr), uintptr(s.size), d.stream)
	return d.drv.check("cuMemcpyDtoDAsync", r)
}
