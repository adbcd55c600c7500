package vm

import (
	"fmt"
	"sync"

	"github.com/kilnrt/kiln/devices"
)

// DefaultMemoryBudget is the free device memory a VM's pool keeps for later calls
// before it returns whole free buffers to the device.
const DefaultMemoryBudget = 1 << 30

// poolSpares bounds the returned Storage structs kept for later requests (a warm
// static call allocates nothing, not even on the Go heap).
const poolSpares = 64

// pool is a best-fit allocator over device buffers for the storages of calls (and
// uploaded constants). A request for n bytes takes the smallest free block of at least
// n bytes (the most recently freed among equals, for cache warmth) and splits it when
// the remainder is worth keeping (takeLocked); a miss allocates exactly n bytes from the
// device as a new parent buffer. A storage returned at the end of its call frees its
// block, which coalesces with free neighbours of the same parent. A parent goes back
// to the device only when it is whole and free: least recently used first while the
// free bytes exceed the budget (poolpressure.go), all of them on TrimMemory, or when an
// allocation fails. A static plan asks for the same sizes every call, so after the
// first call each request is an exact hit on a whole buffer: no device allocation, no
// view. Devices without devices.Slicer get exact-size hits only (a block is handed out
// whole and never split). Safe for concurrent calls.
type pool struct {
	mu      sync.Mutex
	devs    []devices.Device
	slicers []devices.Slicer      // per device; nil where buffers cannot be viewed in part
	align   []int64               // per device: DeviceAlign, the multiple blocks are cut at
	free    []freeList            // per device
	images  map[imageKey][]*block // free whole images by key, most recently freed last
	parents map[*parent]struct{}
	budget  int64
	seq     uint64 // free events so far
	closed  bool   // drained: a parent that becomes whole and free is released at once
	spare   []*Storage
	st      MemoryStats
}

func newPool(devs []devices.Device) *pool {
	p := &pool{devs: devs, slicers: make([]devices.Slicer, len(devs)), free: make([]freeList, len(devs)),
		align: make([]int64, len(devs)), parents: map[*parent]struct{}{}, images: map[imageKey][]*block{}, budget: DefaultMemoryBudget}
	for i, d := range devs {
		p.slicers[i], _ = d.(devices.Slicer)
		p.align[i] = DeviceAlign(d)
	}
	return p
}

// get hands out a storage of n bytes on device d: from a free block, or from a new
// device buffer when none fits.
func (p *pool) get(d int, n int64) (*Storage, error) {
	if d < 0 || d >= len(p.devs) || n < 0 {
		return nil, fmt.Errorf("cannot allocate %d bytes on device %d of %d", n, d, len(p.devs))
	}
	p.mu.Lock()
	var s *Storage
	if k := len(p.spare); k > 0 {
		s, p.spare = p.spare[k-1], p.spare[:k-1]
	} else {
		s = &Storage{}
	}
	s.Device, s.Size = d, n
	b := p.takeLocked(d, n, s)
	p.mu.Unlock()
	if b == nil {
		var err error
		if b, err = p.grow(d, n, s); err != nil {
			return nil, err
		}
	}
	if b.off == 0 && n == b.par.size {
		s.Buf = b.par.buf
		return s, nil
	}
	buf, err := p.slicers[d].Slice(b.par.buf, b.off, n)
	if err != nil {
		p.put(s)
		return nil, err
	}
	s.Buf = buf
	return s, nil
}

// takeLocked removes the best fit for n bytes from d's free list and hands it out to
// s, first splitting off a remainder of at least splitFloor bytes and a quarter of the
// (aligned) request as a new free block; nil on a miss.
func (p *pool) takeLocked(d int, n int64, s *Storage) *block {
	l := &p.free[d]
	i := l.fit(n)
	if i == len(*l) || p.slicers[d] == nil && (*l)[i].size != n {
		return nil
	}
	b := (*l)[i]
	l.remove(b)
	if !b.free || b.owner != nil {
		panic(fmt.Sprintf("BUG: free list holds a handed-out block at %d", b.off))
	}
	if p.slicers[d] != nil {
		if want := roundUp(max(n, 1), p.align[d]); b.size > want && b.size-want >= max(splitFloor, want/4) {
			r := splitBlock(b, want)
			r.free = true
			p.seq++
			r.seq = p.seq
			l.insert(r)
			p.st.Splits++
		}
	}
	b.free, b.owner = false, s
	s.blk, s.root, s.base = b, b.par.buf, b.off
	p.st.Hits++
	p.st.Free -= b.size
	p.st.InUse += b.size
	return b
}

// grow allocates a new parent of exactly n bytes handed out whole to s. An allocation
// the device refuses is retried once after returning every whole free buffer.
func (p *pool) grow(d int, n int64, s *Storage) (*block, error) {
	buf, err := p.devs[d].Alloc(n)
	if err != nil {
		if p.trim() == 0 {
			return nil, err
		}
		if buf, err = p.devs[d].Alloc(n); err != nil {
			return nil, err
		}
	}
	par := &parent{dev: d, buf: buf, size: n}
	b := &block{par: par, size: n, owner: s}
	par.first = b
	p.mu.Lock()
	defer p.mu.Unlock()
	p.parents[par] = struct{}{}
	s.blk, s.root, s.base = b, buf, 0
	p.st.Misses++
	p.st.Allocs++
	p.st.Buffers++
	p.st.Held += n
	p.st.InUse += n
	return b, nil
}

// put returns a storage handed out by get; its block coalesces with free neighbours.
// A storage returned twice, or not from this pool, is a BUG.
func (p *pool) put(s *Storage) {
	p.release(p.putLocked(s))
}

func (p *pool) putLocked(s *Storage) []*parent {
	p.mu.Lock()
	defer p.mu.Unlock()
	b := s.blk
	if b == nil || b.free || b.owner != s {
		panic(fmt.Sprintf("BUG: a %d-byte storage returned to the pool twice or not taken from it", s.Size))
	}
	*s = Storage{} // a stale reference to it fails loudly rather than aliases the block
	if len(p.spare) < poolSpares {
		p.spare = append(p.spare, s)
	}
	b.free, b.owner = true, nil
	p.st.InUse -= b.size
	p.st.Free += b.size
	if b.par.image != nil {
		p.putImageLocked(b)
		if p.closed {
			return []*parent{p.dropLocked(b)}
		}
		return p.overBudgetLocked()
	}
	l := &p.free[b.par.dev]
	if b.prev != nil && b.prev.free {
		l.remove(b.prev)
		a := b.prev
		mergeBlocks(a, b)
		b = a
	}
	if b.next != nil && b.next.free {
		l.remove(b.next)
		mergeBlocks(b, b.next)
	}
	p.seq++
	b.seq = p.seq
	l.insert(b)
	if p.closed {
		if b.whole() {
			return []*parent{p.dropLocked(b)}
		}
		return nil
	}
	return p.overBudgetLocked()
}
