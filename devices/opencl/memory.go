package opencl

import (
	"fmt"
	"unsafe"

	"github.com/kilnrt/kiln/devices"
)

// buffer is a cl_mem (root set to itself), or a view of one: the root's memory at an
// offset. A view is not a cl_mem of its own: copies address it as the root at the
// offset, and Launch passes the root and the offset (kernels take both).
type buffer struct {
	mem    uintptr // cl_mem of the root
	offset int64   // inside the root; 0 for a root
	size   int64
	root   *buffer // the buffer itself for a root
	// img is an image's shape and format; nil for a buffer.
	img *imageShape
}

func (b *buffer) Size() int64 { return b.size }

// maxAlloc bounds one allocation (a size from an untrusted model never reaches the driver
// as a huge request).
const maxAlloc = 1 << 40

// Alloc implements devices.Device: zeroed device memory. OpenCL refuses empty buffers,
// so a zero-size buffer holds one byte.
func (d *Device) Alloc(n int64) (devices.Buffer, error) {
	if n < 0 || n > maxAlloc {
		return nil, fmt.Errorf("%w: cannot allocate %d bytes", devices.ErrBadBuffer, n)
	}
	if n > d.dinfo.MaxAllocBytes {
		return nil, fmt.Errorf("%w: cannot allocate %d bytes: %s allows at most %d in one buffer (CL_DEVICE_MAX_MEM_ALLOC_SIZE)", devices.ErrBadBuffer, n, d.where, d.dinfo.MaxAllocBytes)
	}
	if err := d.open(); err != nil {
		return nil, err
	}
	a := d.api
	bytes := uintptr(max(n, 1))
	mem, s := a.create(a.createBuffer, d.ctx, memReadWrite, bytes, 0)
	if s != success {
		return nil, fmt.Errorf("%w: allocating %d bytes on %s: %v", devices.ErrBadBuffer, n, d.where, check("clCreateBuffer", s))
	}
	if err := d.fill(mem, 0, bytes); err != nil {
		a.call(a.releaseMemObject, mem)
		return nil, fmt.Errorf("%w: zeroing %d bytes: %v", devices.ErrBadBuffer, n, err)
	}
	b := &buffer{mem: mem, size: n}
	b.root = b
	d.mu.Lock()
	d.alive[b] = true
	d.mu.Unlock()
	return b, nil
}

// fill queues zeroing n bytes of mem at offset.
func (d *Device) fill(mem, offset, n uintptr) error {
	zero := new(byte)
	return check("clEnqueueFillBuffer", d.api.call(d.api.enqueueFillBuffer, d.queue, mem, uintptr(unsafe.Pointer(zero)), 1, offset, n, 0, 0, 0))
}

// own checks that b is a live buffer (or a view of one) of this device.
func (d *Device) own(b devices.Buffer) (*buffer, error) {
	cb, ok := b.(*buffer)
	if !ok || cb == nil || cb.root == nil {
		return nil, fmt.Errorf("%w: buffer of another device (%T)", devices.ErrBadBuffer, b)
	}
	d.mu.Lock()
	live := d.alive[cb.root]
	d.mu.Unlock()
	if !live {
		return nil, fmt.Errorf("%w: buffer was freed or belongs to another device", devices.ErrBadBuffer)
	}
	if err := d.open(); err != nil {
		return nil, err
	}
	return cb, nil
}

// Slice implements devices.Slicer: a view of size bytes at offset inside b, valid while
// b is; views are not freed themselves. A view at any offset can be copied to and from
// and passed to a kernel (as its root and the offset).
func (d *Device) Slice(b devices.Buffer, offset, size int64) (devices.Buffer, error) {
	cb, err := d.own(b)
	if err != nil {
		return nil, err
	}
	if cb.img != nil {
		return nil, fmt.Errorf("%w: a view of a %s: images cannot be sliced", devices.ErrBadBuffer, cb.img)
	}
	if offset < 0 || size < 0 || offset > cb.size || size > cb.size-offset {
		return nil, fmt.Errorf("%w: view [%d, %d) of a %d-byte buffer", devices.ErrBadBuffer, offset, offset+size, cb.size)
	}
	return &buffer{mem: cb.mem, offset: cb.offset + offset, size: size, root: cb.root}, nil
}

// Free implements devices.Device. OpenCL keeps the memory until the commands queued on
// it have finished, so Free does not wait.
func (d *Device) Free(b devices.Buffer) error {
	cb, err := d.own(b)
	if err != nil {
		return err
	}
	if cb.root != cb {
		return fmt.Errorf("%w: a view is freed with the buffer it views", devices.ErrBadBuffer)
	}
	d.mu.Lock()
	live := d.alive[cb]
	delete(d.alive, cb)
	d.mu.Unlock()
	if !live { // freed concurrently
		return fmt.Errorf("%w: buffer was freed", devices.ErrBadBuffer)
	}
	return check("clReleaseMemObject", d.api.call(d.api.releaseMemObject, cb.mem))
}

// CopyIn implements devices.Device: a blocking write queued after the work before it, so
// src may be reused on return.
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
	if b.img != nil {
		return d.writeImage(b, src)
	}
	a := d.api
	s := a.call(a.enqueueWriteBuffer, d.queue, b.mem, clTrue, uintptr(b.offset), uintptr(len(src)), uintptr(unsafe.Pointer(&src[0])), 0, 0, 0)
	return check("clEnqueueWriteBuffer", s)
}

// CopyOut implements devices.Device: a blocking read, after the work queued before it.
// It does not read the status block: Sync reports kernels' codes.
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
	if b.img != nil {
		return d.readImage(dst, b)
	}
	a := d.api
	s := a.call(a.enqueueReadBuffer, d.queue, b.mem, clTrue, uintptr(b.offset), uintptr(len(dst)), uintptr(unsafe.Pointer(&dst[0])), 0, 0, 0)
	return check("clEnqueueReadBuffer", s)
}

// Copy implements devices.Device: a device-to-device copy queued after the work before
// it. Overlapping ranges of one buffer are refused by OpenCL (CL_MEM_COPY_OVERLAP).
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
	if s.img != nil || t.img != nil {
		return d.copyImage(t, s)
	}
	a := d.api
	r := a.call(a.enqueueCopyBuffer, d.queue, s.mem, t.mem, uintptr(s.offset), uintptr(t.offset), uintptr(s.size), 0, 0, 0)
	if err := check("clEnqueueCopyBuffer", r); err != nil {
		return fmt.Errorf("%w: %v", devices.ErrBadBuffer, err)
	}
	return nil
}
