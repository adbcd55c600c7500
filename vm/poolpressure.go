package vm

import (
	"fmt"
	"slices"
)

// MemoryStats describes a VM's storage pool: the device memory of call storages and of
// uploaded constants (constants mapped in place are not in it).
type MemoryStats struct {
	Held    int64 // bytes of device buffers the pool holds: InUse + Free
	InUse   int64 // bytes of blocks handed out (running calls' storages, constants)
	Free    int64 // bytes of free blocks kept for later calls
	Buffers int   // device buffers held
	Budget  int64 // the most free bytes kept before whole free buffers are returned

	Allocs   uint64 // device allocations made
	Releases uint64 // device buffers returned
	Hits     uint64 // requests served from a free block
	Misses   uint64 // requests that allocated a new device buffer
	Splits   uint64 // hits that split a larger block
}

// MemoryStats reports the pool's bytes and counters.
func (m *VM) MemoryStats() MemoryStats {
	m.pool.mu.Lock()
	defer m.pool.mu.Unlock()
	st := m.pool.st
	st.Budget = m.pool.budget
	return st
}

// SetMemoryBudget sets the most free device memory the pool keeps for later calls
// (DefaultMemoryBudget unless set; 0 keeps nothing once a call ends) and returns whole
// free buffers, least recently used first, until the free bytes are within it.
func (m *VM) SetMemoryBudget(bytes int64) {
	p := m.pool
	p.mu.Lock()
	p.budget = max(bytes, 0)
	rel := p.overBudgetLocked()
	p.mu.Unlock()
	p.release(rel)
}

// TrimMemory returns every whole free buffer to its device (a server under memory
// pressure, or one going idle) and reports the bytes returned. Buffers partly in use
// by running calls stay.
func (m *VM) TrimMemory() int64 { return m.pool.trim() }

// Reserve adds a free buffer of the given bytes on device d to the pool, so that later
// calls split it instead of allocating: a caller that knows an upper bound of a call's
// dynamic storages (from symbol bounds in the model or its config) plans against it.
// Reserved memory counts against the budget like any free memory.
func (m *VM) Reserve(d int, bytes int64) error {
	s, err := m.pool.get(d, bytes)
	if err != nil {
		return fmt.Errorf("%w: reserving %d bytes: %v", ErrRun, bytes, err)
	}
	m.pool.put(s)
	return nil
}

// overBudgetLocked takes whole free parents out of the pool, least recently freed
// first, while the free bytes exceed the budget; the caller releases them unlocked.
func (p *pool) overBudgetLocked() []*parent {
	var rel []*parent
	for p.st.Free > p.budget {
		var lru *block
		for _, l := range p.free {
			for _, b := range l {
				if b.whole() && (lru == nil || b.seq < lru.seq) {
					lru = b
				}
			}
		}
		for _, b := range p.freeImagesLocked() {
			if lru == nil || b.seq < lru.seq {
				lru = b
			}
		}
		if lru == nil {
			break
		}
		rel = append(rel, p.dropLocked(lru))
	}
	return rel
}

// dropLocked takes a whole free block's parent out of the pool.
func (p *pool) dropLocked(b *block) *parent {
	if !b.free || !b.whole() {
		panic(fmt.Sprintf("BUG: releasing a parent that is not whole and free (block at %d)", b.off))
	}
	if b.par.image != nil {
		p.removeImageLocked(b)
	} else {
		p.free[b.par.dev].remove(b)
	}
	delete(p.parents, b.par)
	p.st.Free -= b.size
	p.st.Held -= b.size
	p.st.Buffers--
	p.st.Releases++
	return b.par
}

// release returns parents taken out of the pool to their devices.
func (p *pool) release(rel []*parent) {
	for _, par := range rel {
		p.devs[par.dev].Free(par.buf)
	}
}

// trim releases every whole free parent and reports their bytes.
func (p *pool) trim() int64 {
	p.mu.Lock()
	var rel []*parent
	var n int64
	for _, l := range p.free {
		for _, b := range slices.Clone(l) {
			if b.whole() {
				n += b.size
				rel = append(rel, p.dropLocked(b))
			}
		}
	}
	for _, b := range p.freeImagesLocked() {
		n += b.size
		rel = append(rel, p.dropLocked(b))
	}
	p.mu.Unlock()
	p.release(rel)
	return n
}

// drain releases every free buffer and makes later returns release theirs as soon as
// they are whole again (VM.Close; a call still running then frees its memory at its
// end).
func (p *pool) drain() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.trim()
}
