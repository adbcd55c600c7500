package tune

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"
)

// Gate admits measurements for an in-process caller that shares the machine with other
// work (kiln serve tunes while it is idle): Acquire blocks until a measurement may run
// and returns a context that ends when it must stop (the server got a request), and
// release, called when the measurement is done.
type Gate interface {
	Acquire(ctx context.Context) (context.Context, func(), error)
}

// Gated is a Measurer that measures only under its Gate: each measurement waits for
// Acquire and runs under the context it returns; one the gate stops (its context ended,
// not the caller's) was disturbed and is measured again from the start at the next
// admission, so no timing taken on a busy machine is ever returned. It adds up the
// time spent measuring.
type Gated struct {
	Measurer Measurer
	Gate     Gate

	mu     sync.Mutex
	busy   time.Duration // measuring, stopped measurements included
	pauses int
}

// Measure implements Measurer.
func (g *Gated) Measure(ctx context.Context, req Request) (*Response, error) {
	for {
		gctx, release, err := g.Gate.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		start := time.Now()
		resp, err := g.Measurer.Measure(gctx, req)
		stopped := gctx.Err() != nil && ctx.Err() == nil
		release()
		g.mu.Lock()
		g.busy += time.Since(start)
		if stopped {
			g.pauses++
		}
		g.mu.Unlock()
		if !stopped {
			return resp, err
		}
	}
}

// Busy is the time spent measuring so far.
func (g *Gated) Busy() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.busy
}

// Pauses is how many measurements the gate stopped (each was measured again).
func (g *Gated) Pauses() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.pauses
}

// budgeted stops the run once its measurer has measured for the budget: Run then
// finishes the round and confirms (the confirmation is not counted against it, but it
// stops with the caller's context, outer, like every measurement).
type budgeted struct {
	*Gated
	budget time.Duration
	stop   context.CancelFunc
	outer  context.Context
}

func (b budgeted) Measure(ctx context.Context, req Request) (*Response, error) {
	if b.Busy() >= b.budget {
		b.stop()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(b.outer, cancel)()
	resp, err := b.Gated.Measure(ctx, req)
	if b.Busy() >= b.budget {
		b.stop()
	}
	return resp, err
}

// RunGated is Run for an in-process caller that lends the machine while it is idle: o's
// measurer runs under gate (Gated), o.Budget is measuring time rather than time since
// the start (waiting for the gate does not count), and the run ends when either it or
// o.Trials runs out.
func RunGated(ctx context.Context, o Options, gate Gate) (*Report, error) {
	if o.Trials <= 0 && o.Budget <= 0 {
		return nil, errors.New("tune: give a trial count or a time budget")
	}
	if o.Measurer == nil {
		return nil, errors.New("tune: no measurer")
	}
	g := &Gated{Measurer: o.Measurer, Gate: gate}
	budget := o.Budget
	if budget <= 0 {
		budget = math.MaxInt64
	}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	o.Measurer, o.Budget = budgeted{Gated: g, budget: budget, stop: stop, outer: ctx}, 0
	if o.Trials <= 0 {
		o.Trials = math.MaxInt32 // the budget ends it
	}
	rep, err := Run(rctx, o)
	if err != nil && ctx.Err() == nil && rctx.Err() != nil && errors.Is(err, context.Canceled) {
		return &Report{}, nil // the budget ran out before the defaults were measured: nothing found
	}
	return rep, err
}
