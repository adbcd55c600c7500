package vm

import (
	"sync"

	"github.com/kilnrt/kiln/devices"
)

// poolPerSize bounds how many free storages of one (device, size) the pool keeps: as
// many as calls are likely to run at once; more are freed.
const poolPerSize = 8

// poolMaxBytes bounds the bytes the pool holds in all.
const poolMaxBytes = 1 << 30

type poolKey struct {
	dev  int
	size int64
}

// pool keeps the storages of finished calls for later calls of the same executable:
// a static plan asks for the same arena sizes every time, so after the first call a
// request allocates nothing (no mmap, no page faults).
type pool struct {
	mu    sync.Mutex
	free  map[poolKey][]*Storage
	bytes int64
}

func newPool() *pool { return &pool{free: map[poolKey][]*Storage{}} }

func (p *pool) get(dev int, size int64) *Storage {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := poolKey{dev, size}
	l := p.free[k]
	if len(l) == 0 {
		return nil
	}
	s := l[len(l)-1]
	p.free[k] = l[:len(l)-1]
	p.bytes -= size
	return s
}

// put keeps s for reuse; false means the pool is full and the caller frees it.
func (p *pool) put(s *Storage) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := poolKey{s.Device, s.Size}
	if len(p.free[k]) >= poolPerSize || p.bytes+s.Size > poolMaxBytes {
		return false
	}
	p.free[k] = append(p.free[k], s)
	p.bytes += s.Size
	return true
}

// drain frees every kept storage.
func (p *pool) drain(devs []devices.Device) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, l := range p.free {
		for _, s := range l {
			devs[s.Device].Free(s.Buf)
		}
		delete(p.free, k)
	}
	p.bytes = 0
}
