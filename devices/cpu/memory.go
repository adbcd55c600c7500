package cpu

import (
	"fmt"
	"syscall"

	"github.com/kilnrt/kiln/devices"
)

// buffer is anonymous mmap'ed memory (it never moves and the GC never scans it), or
// host memory lent through MapHost (foreign: read-only for the device, never unmapped).
type buffer struct {
	mem     []byte
	size    int64
	parent  *buffer // set on views (Slice)
	foreign bool    // MapHost: the caller owns mem
}

func (b *buffer) Size() int64 { return b.size }

// Bytes exposes the buffer's memory (valid until Free).
func (b *buffer) Bytes() []byte { return b.mem[:b.size] }

// Alloc implements devices.Device; memory is zeroed and page aligned.
func (d *Device) Alloc(n int64) (devices.Buffer, error) {
	if n < 0 || n > 1<<40 {
		return nil, fmt.Errorf("%w: cannot allocate %d bytes", devices.ErrBadBuffer, n)
	}
	mem, err := syscall.Mmap(-1, 0, int(max(n, 1)), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("%w: mmap %d bytes: %v", devices.ErrBadBuffer, n, err)
	}
	b := &buffer{mem: mem, size: n}
	d.mu.Lock()
	d.alive[b] = true
	d.mu.Unlock()
	return b, nil
}

// MapHost implements devices.HostMapper: a buffer over mem without a copy. The caller
// keeps mem valid and unchanged until Free, which forgets the buffer and leaves mem
// alone; CopyIn into it is refused. Memory from the Go heap is kept reachable by the
// buffer (the Go heap does not move objects).
func (d *Device) MapHost(mem []byte) (devices.Buffer, error) {
	if len(mem) == 0 { // a launch passes &mem[0]: give empty constants a real page
		return d.Alloc(0)
	}
	b := &buffer{mem: mem[:len(mem):len(mem)], size: int64(len(mem)), foreign: true}
	d.mu.Lock()
	d.alive[b] = true
	d.mu.Unlock()
	return b, nil
}

func (d *Device) own(b devices.Buffer) (*buffer, error) {
	cb, ok := b.(*buffer)
	if !ok {
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
		return nil, fmt.Errorf("%w: buffer was freed", devices.ErrBadBuffer)
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
	if offset < 0 || size < 0 || offset+size > cb.size {
		return nil, fmt.Errorf("%w: view [%d, %d) of a %d-byte buffer", devices.ErrBadBuffer, offset, offset+size, cb.size)
	}
	root := cb
	if cb.parent != nil {
		root = cb.parent
	}
	mem := cb.mem[offset:]
	if len(mem) == 0 { // an empty view at the very end: point at the last byte, never read
		mem = cb.mem[len(cb.mem)-1:]
	}
	return &buffer{mem: mem, size: size, parent: root}, nil
}

// Free implements devices.Device.
func (d *Device) Free(b devices.Buffer) error {
	cb, err := d.own(b)
	if err != nil {
		return err
	}
	if cb.parent != nil {
		return fmt.Errorf("%w: a view is freed with the buffer it views", devices.ErrBadBuffer)
	}
	d.mu.Lock()
	delete(d.alive, cb)
	d.mu.Unlock()
	if cb.foreign {
		return nil
	}
	return syscall.Munmap(cb.mem)
}

// CopyIn implements devices.Device.
func (d *Device) CopyIn(dst devices.Buffer, src []byte) error {
	b, err := d.own(dst)
	if err != nil {
		return err
	}
	if b.foreign || b.parent != nil && b.parent.foreign {
		return fmt.Errorf("%w: host memory mapped with MapHost is read-only for the device", devices.ErrBadBuffer)
	}
	if int64(len(src)) > b.size {
		return fmt.Errorf("%w: copying %d bytes into a %d-byte buffer", devices.ErrBadBuffer, len(src), b.size)
	}
	copy(b.mem, src)
	return nil
}

// CopyOut implements devices.Device.
func (d *Device) CopyOut(dst []byte, src devices.Buffer) error {
	b, err := d.own(src)
	if err != nil {
		return err
	}
	if int64(len(dst)) > b.size {
		return fmt.Errorf("%w: copying %d bytes out of a %d-byte buffer", devices.ErrBadBuffer, len(dst), b.size)
	}
	copy(dst, b.mem[:len(dst)])
	return nil
}

// Copy implements devices.Device.
func (d *Device) Copy(dst, src devices.Buffer) error {
	s, err := d.own(src)
	if err != nil {
		return err
	}
	return d.CopyIn(dst, s.mem[:s.size])
}
