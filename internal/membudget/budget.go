package membudget

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
)

// DefaultReleaseAfter is the Options.ReleaseAfter servers use: a burst of large
// requests worth 64 MiB.
const DefaultReleaseAfter = 64 << 20

// Options configure a Budget.
type Options struct {
	// LargeBytes is the size from which a request counts as large for returning
	// memory (0: 16 MiB).
	LargeBytes int64
	// ReleaseAfter, when positive, returns memory to the operating system once
	// large requests holding at least this many bytes in all have been released
	// and the budget is nearly idle (see the package documentation). 0: never.
	ReleaseAfter int64
	// ReleaseInterval is the least time between two returns (0: defaultReleaseInterval).
	ReleaseInterval time.Duration
	// FreeOSMemory returns memory to the operating system (nil: two garbage
	// collections and debug.FreeOSMemory). Tests replace it.
	FreeOSMemory func()
}

// Budget is a number of bytes that requests reserve while they hold data in memory.
type Budget struct {
	size int64
	sem  *semaphore.Weighted
	used atomic.Int64
	rel  *releaser // nil: memory is not returned
}

// New returns a budget of size bytes (size > 0).
func New(size int64, opts Options) *Budget {
	if size <= 0 {
		panic(fmt.Sprintf("BUG: membudget.New with size %d", size))
	}
	b := &Budget{size: size, sem: semaphore.NewWeighted(size)}
	if opts.ReleaseAfter > 0 {
		b.rel = newReleaser(opts, &b.used)
	}
	return b
}

// Size is the budget's size in bytes (0 for a nil budget).
func (b *Budget) Size() int64 {
	if b == nil {
		return 0
	}
	return b.size
}

// InUse is the number of bytes reserved now.
func (b *Budget) InUse() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}

// Reserve reserves n bytes (at most the budget's size), waiting until they are free
// or ctx ends; it returns ctx's error then, wrapped. Waiters are served in order of
// arrival, so a large reservation is not starved by small ones.
func (b *Budget) Reserve(ctx context.Context, n int64) (*Reservation, error) {
	if b == nil {
		return nil, nil
	}
	n = min(max(n, 0), b.size)
	if n == 0 { // nothing to hold: no need to queue behind waiters
		return &Reservation{b: b}, nil
	}
	if err := b.sem.Acquire(ctx, n); err != nil {
		return nil, fmt.Errorf("waiting for %d bytes of the request memory budget (%d bytes, %d reserved): %w", n, b.size, b.used.Load(), err)
	}
	b.used.Add(n)
	return &Reservation{b: b, n: n}, nil
}

// Reservation is bytes reserved from a Budget. It is used by one goroutine at a time.
type Reservation struct {
	b *Budget
	n int64
}

// Bytes is the number of bytes the reservation holds now.
func (r *Reservation) Bytes() int64 {
	if r == nil {
		return 0
	}
	return r.n
}

// Shrink gives back the bytes beyond n (the data's real size, once it is known); it
// never grows the reservation.
func (r *Reservation) Shrink(n int64) {
	if r == nil || r.b == nil || n >= r.n {
		return
	}
	n = max(n, 0)
	r.b.give(r.n-n, 0)
	r.n = n
}

// Release gives every byte back. Calling it again does nothing.
func (r *Reservation) Release() {
	if r == nil || r.b == nil {
		return
	}
	r.b.give(r.n, r.n)
	r.b, r.n = nil, 0
}

// give returns n bytes to the budget; held is the size of a request that is done
// with its data (0 for a Shrink), which counts towards returning memory.
func (b *Budget) give(n, held int64) {
	if n > 0 {
		b.used.Add(-n)
		b.sem.Release(n)
	}
	if b.rel != nil {
		b.rel.done(held, b.used.Load())
	}
}

// defaultReleaseInterval bounds the forced collections to one every 2 s under a steady
// load of large requests, and is the longest a burst's memory waits after its last
// request (at 10 s, a burst of four 200 MiB gRPC calls that the budget ran one after
// another over 5 s on a loaded machine kept 900 MB resident past 5 s: the return after
// the first call set the next one 10 s later).
const defaultReleaseInterval = 2 * time.Second

// releaser returns memory to the operating system after large requests are done.
type releaser struct {
	large, after int64
	interval     time.Duration
	free         func()
	inUse        *atomic.Int64 // the budget's reserved bytes
	owed         atomic.Int64  // bytes of large requests released since the last return

	mu      sync.Mutex
	last    time.Time // when the last return started
	pending bool      // a return is scheduled or running
}

func newReleaser(o Options, inUse *atomic.Int64) *releaser {
	r := &releaser{large: o.LargeBytes, after: o.ReleaseAfter, interval: o.ReleaseInterval, free: o.FreeOSMemory, inUse: inUse}
	if r.large <= 0 {
		r.large = 16 << 20
	}
	if r.interval <= 0 {
		r.interval = defaultReleaseInterval
	}
	if r.free == nil {
		r.free = freeOSMemory
	}
	return r
}

// done records that a request of held bytes no longer holds them, with inUse bytes
// still reserved, and schedules a return when one is owed and the budget is nearly
// idle. A small request only checks (one atomic load), so that the return owed by
// large requests happens when the last of them is done even if small ones follow.
func (r *releaser) done(held, inUse int64) {
	if held >= r.large {
		r.owed.Add(held)
	}
	if r.owed.Load() < r.after || inUse >= r.large {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending {
		return
	}
	r.pending = true
	time.AfterFunc(max(r.interval-time.Since(r.last), 0), r.run)
}

// run returns memory when the budget is still nearly idle. A return that was
// scheduled for later (the interval had not passed) and finds a large request
// running is dropped, owed bytes kept: the done of the last request of the burst
// schedules it again, so the memory of that request is returned too instead of
// waiting for another interval after a return that came before it ended.
func (r *releaser) run() {
	r.mu.Lock()
	if r.inUse.Load() >= r.large {
		r.pending = false
		r.mu.Unlock()
		return
	}
	r.owed.Store(0)
	r.last = time.Now()
	r.mu.Unlock()
	r.free()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending = false
	// requests that ended while this return ran found it pending and scheduled none:
	// their bytes are owed a return of their own
	if r.owed.Load() >= r.after && r.inUse.Load() < r.large {
		r.pending = true
		time.AfterFunc(max(r.interval-time.Since(r.last), 0), r.run)
	}
}

// freeOSMemory runs a collection, so that buffers parked in sync.Pools move to
// their victim caches, then debug.FreeOSMemory, whose collection drops those and
// which returns every free page to the operating system.
func freeOSMemory() {
	runtime.GC()
	debug.FreeOSMemory()
}
