package vm

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/kilnrt/kiln/devices"
)

// fakeDev is a device with real host memory behind its buffers, views (Slicer when
// slicing is set), a capacity, and a count of allocations; its other methods are not
// used by the pool.
type fakeDev struct {
	devices.Device
	mu       sync.Mutex
	live     map[*fakeBuf]bool
	capacity int64 // the most live bytes Alloc grants; 0: no limit
	bytes    int64
	allocs   int
	errs     []error
}

type fakeBuf struct {
	mem  []byte
	root *fakeBuf // set on views
	off  int64
}

func (b *fakeBuf) Size() int64 { return int64(len(b.mem)) }

func newFakeDev() *fakeDev { return &fakeDev{live: map[*fakeBuf]bool{}} }

func (d *fakeDev) Info() devices.Info { return devices.Info{Kind: "fake", Fingerprint: "fake"} }

func (d *fakeDev) Alloc(n int64) (devices.Buffer, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.capacity > 0 && d.bytes+n > d.capacity {
		return nil, fmt.Errorf("%w: out of memory", devices.ErrBadBuffer)
	}
	b := &fakeBuf{mem: make([]byte, n)}
	d.live[b] = true
	d.bytes += n
	d.allocs++
	return b, nil
}

func (d *fakeDev) Free(b devices.Buffer) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	fb := b.(*fakeBuf)
	if fb.root != nil || !d.live[fb] {
		err := errors.New("freeing a view or a dead buffer")
		d.errs = append(d.errs, err)
		return err
	}
	delete(d.live, fb)
	d.bytes -= fb.Size()
	return nil
}

func (d *fakeDev) liveBytes() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.bytes
}

// slicer is fakeDev with views.
type slicer struct{ *fakeDev }

func (d slicer) Slice(b devices.Buffer, off, size int64) (devices.Buffer, error) {
	fb := b.(*fakeBuf)
	if fb.root != nil || off < 0 || size < 0 || off+size > fb.Size() {
		return nil, fmt.Errorf("bad view [%d, %d) of %d bytes", off, off+size, fb.Size())
	}
	return &fakeBuf{mem: fb.mem[off : off+size : off+size], root: fb, off: off}, nil
}

// checked fails t when the pool's invariants do not hold or the device saw a bad free.
func checked(t *testing.T, p *pool, d *fakeDev) {
	t.Helper()
	p.mu.Lock()
	err := p.checkLocked()
	p.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.errs) > 0 {
		t.Fatal(d.errs[0])
	}
	var held int64
	for par := range p.parents {
		if !d.live[par.buf.(*fakeBuf)] {
			t.Fatal("the pool holds a buffer the device freed")
		}
		held += par.size
	}
	if held != d.bytes {
		t.Fatalf("the pool holds %d bytes, the device has %d live", held, d.bytes)
	}
}

func mustGet(t *testing.T, p *pool, n int64) *Storage {
	t.Helper()
	s, err := p.get(0, n)
	if err != nil {
		t.Fatal(err)
	}
	if s.Buf.Size() != n {
		t.Fatalf("a %d-byte request got a %d-byte buffer", n, s.Buf.Size())
	}
	return s
}

// viewOK checks that a storage's buffer is its range of its root.
func viewOK(t *testing.T, s *Storage) {
	t.Helper()
	fb := s.Buf.(*fakeBuf)
	switch {
	case fb.root == nil && (fb != s.root || s.base != 0):
		t.Fatalf("whole buffer handed as a storage at %d", s.base)
	case fb.root != nil && (fb.root != s.root || fb.off != s.base):
		t.Fatalf("view at %d of another buffer, storage says %d", fb.off, s.base)
	}
}
