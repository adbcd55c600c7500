package vm

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// randomSize is log-uniform from 0 bytes to 4 MiB: small uploads and large arenas.
func randomSize(r *rand.Rand) int64 {
	if r.IntN(20) == 0 {
		return 0
	}
	return int64(1) << r.IntN(22) * int64(1+r.IntN(1<<10)) >> 10
}

// TestPoolRandom: random requests and returns, a budget that changes, trims: no two
// handed-out storages overlap, each one's buffer is its range of its parent, and every
// byte the device holds is accounted for by the pool.
func TestPoolRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	p, d := newTestPool(true)
	var live []*Storage
	for op := 0; op < 5000; op++ {
		switch k := r.IntN(100); {
		case k < 55:
			s := mustGet(t, p, randomSize(r))
			viewOK(t, s)
			live = append(live, s)
		case k < 97 && len(live) > 0:
			i := r.IntN(len(live))
			p.put(live[i])
			live = slices.Delete(live, i, i+1)
		case k < 99:
			p.mu.Lock()
			p.budget = int64(r.IntN(64)) * mib
			rel := p.overBudgetLocked()
			p.mu.Unlock()
			p.release(rel)
		default:
			p.trim()
		}
		checked(t, p, d)
		if err := disjoint(live); err != nil {
			t.Fatalf("op %d: %v", op, err)
		}
	}
	for _, s := range live {
		p.put(s)
	}
	checked(t, p, d)
	if p.st.InUse != 0 || p.st.Splits == 0 || p.st.Releases == 0 {
		t.Fatalf("after all returns: %+v", p.st)
	}
	p.drain()
	checked(t, p, d)
	if d.liveBytes() != 0 {
		t.Fatalf("%d bytes left on the device after drain", d.liveBytes())
	}
}

// disjoint checks that handed-out storages never share a byte of a parent.
func disjoint(live []*Storage) error {
	type span struct{ lo, hi int64 }
	byRoot := map[any][]span{}
	for _, s := range live {
		if s.base < 0 || s.base+s.Size > s.root.Size() || s.blk == nil || s.blk.owner != s {
			return fmt.Errorf("storage [%d, +%d) of a %d-byte parent, block %p", s.base, s.Size, s.root.Size(), s.blk)
		}
		byRoot[s.root] = append(byRoot[s.root], span{s.base, s.base + max(s.Size, 1)})
	}
	for _, sp := range byRoot {
		slices.SortFunc(sp, func(a, b span) int { return int(a.lo - b.lo) })
		for i := 1; i < len(sp); i++ {
			if sp[i].lo < sp[i-1].hi {
				return fmt.Errorf("storages [%d, %d) and [%d, %d) overlap", sp[i-1].lo, sp[i-1].hi, sp[i].lo, sp[i].hi)
			}
		}
	}
	return nil
}

// TestPoolConcurrent: goroutines take and return storages at once, each filling its
// bytes with its own mark and finding them intact before returning them (a block handed
// out twice would be overwritten). Run with -race.
func TestPoolConcurrent(t *testing.T) {
	p, d := newTestPool(true)
	p.budget = 8 * mib
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 9))
			pattern := bytes.Repeat([]byte{byte(g + 1)}, 1<<20)
			for it := 0; it < 300; it++ {
				var held []*Storage
				for k := r.IntN(5); k >= 0; k-- {
					s, err := p.get(0, randomSize(r)/4)
					if err != nil {
						errs <- err
						return
					}
					copy(s.Buf.(*fakeBuf).mem, pattern)
					held = append(held, s)
				}
				for _, s := range held {
					if mem := s.Buf.(*fakeBuf).mem; !bytes.Equal(mem, pattern[:len(mem)]) {
						errs <- fmt.Errorf("goroutine %d: its storage was written by another", g)
						return
					}
					p.put(s)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	checked(t, p, d)
	if p.st.InUse != 0 || p.st.Free > p.budget && anyWhole(p) {
		t.Fatalf("after the goroutines: %+v", p.st)
	}
}

func anyWhole(p *pool) bool {
	for _, l := range p.free {
		for _, b := range l {
			if b.whole() {
				return true
			}
		}
	}
	return false
}
