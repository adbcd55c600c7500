package serve

import (
	"context"
	"sync"
	"time"
)

// idleGate decides when background tuning may use the machine. The server is idle
// when no inference is in flight or queued (Service.enter/leave count them from
// admission to answer) and none has been for IdleAfter. Acquire waits for that and
// returns a context that ends when the next inference arrives (a pause): work under it
// stops at once and is done again at the next idle time. The duty cycle spreads the
// work: after a piece that took d, the next may start only (1-duty)/duty·d later, so
// tuning uses at most that fraction of the idle time.
type idleGate struct {
	after time.Duration
	duty  float64
	now   func() time.Time
	base  context.Context // ends when the service closes: Acquire gives up, held work stops

	mu        sync.Mutex
	inflight  int
	last      time.Time                   // when the server last turned idle (or the gate was made)
	notBefore time.Time                   // the duty cycle's rest ends
	held      map[*int]context.CancelFunc // the contexts handed out, ended at the next arrival
	pauses    int                         // arrivals that cut held work short
	wake      chan struct{}               // closed at the next state change
}

func newIdleGate(base context.Context, after time.Duration, duty float64, now func() time.Time) *idleGate {
	return &idleGate{after: after, duty: duty, now: now, base: base, last: now(), held: map[*int]context.CancelFunc{}, wake: make(chan struct{})}
}

// arrive counts an inference in; work held under the gate is told to stop. It
// reports whether some was (a pause).
func (g *idleGate) arrive() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inflight++
	cut := len(g.held) > 0
	for k, cancel := range g.held {
		cancel()
		delete(g.held, k)
	}
	if cut {
		g.pauses++
	}
	g.signal()
	return cut
}

// depart counts an inference out; the idle time starts when the last one leaves.
func (g *idleGate) depart() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inflight--
	if g.inflight == 0 {
		g.last = g.now()
	}
	g.signal()
}

func (g *idleGate) signal() {
	close(g.wake)
	g.wake = make(chan struct{})
}

// busy reports whether inferences are in flight or the server has not yet been idle
// for IdleAfter.
func (g *idleGate) busy() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.readyIn()
	return !ok
}

// readyIn is how long until work may start (g.mu held); ok false while inferences are
// in flight.
func (g *idleGate) readyIn() (time.Duration, bool) {
	if g.inflight > 0 {
		return 0, false
	}
	now := g.now()
	wait := max(g.last.Add(g.after).Sub(now), g.notBefore.Sub(now))
	return wait, wait <= 0
}

// Acquire waits until the server is idle (or ctx ends, or the service closes) and
// returns a context that ends at the next inference's arrival, and release, to call
// when the work is done (it starts the duty cycle's rest).
func (g *idleGate) Acquire(ctx context.Context) (context.Context, func(), error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		if g.base.Err() != nil {
			return nil, nil, context.Canceled
		}
		g.mu.Lock()
		wait, ok := g.readyIn()
		if ok {
			wctx, cancel := context.WithCancel(ctx)
			unwatch := context.AfterFunc(g.base, cancel)
			key, start := new(int), g.now()
			g.held[key] = cancel
			g.mu.Unlock()
			release := func() {
				unwatch()
				g.mu.Lock()
				delete(g.held, key)
				if g.duty < 1 {
					d := g.now().Sub(start)
					g.notBefore = g.now().Add(time.Duration(float64(d) * (1 - g.duty) / g.duty))
				}
				g.mu.Unlock()
				cancel()
			}
			return wctx, release, nil
		}
		wake := g.wake
		g.mu.Unlock()
		var timer <-chan time.Time
		t := time.NewTimer(max(wait, time.Millisecond)) // the idle time or the rest runs out then
		if wait > 0 {
			timer = t.C
		}
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil, ctx.Err()
		case <-g.base.Done():
			t.Stop()
			return nil, nil, context.Canceled
		case <-wake:
		case <-timer:
		}
		t.Stop()
	}
}

// pausesSoFar is how many times held work was cut short by an arrival.
func (g *idleGate) pausesSoFar() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.pauses
}

// working reports whether work is held under the gate now.
func (g *idleGate) working() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.held) > 0
}
