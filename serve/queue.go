package serve

import (
	"encoding/json"
	"fmt"
	"math"
	"sync"
	"time"
)

// QueuePolicy is how a priority level of the dynamic batcher queues requests (Triton's
// ModelQueuePolicy).
type QueuePolicy struct {
	// Timeout is how long a request may wait in the queue (0: without limit).
	Timeout time.Duration
	// Delay is the timeout action DELAY: a request whose timeout expired stays queued
	// and runs after every unexpired request of its level. Without it (REJECT) the
	// request fails with ErrUnavailable ("Request timeout expired").
	Delay bool
	// AllowOverride lets a request's "timeout" parameter shorten Timeout.
	AllowOverride bool
	// MaxSize bounds the requests waiting at the level (0: unbounded); a request
	// beyond it fails at once with ErrUnavailable ("Exceeds maximum queue size").
	MaxSize int
}

// timeoutFor is the timeout of a request that asks for override (0: none asked), as
// Triton decides it: the override counts only where allowed and shorter than the
// policy's own, so a policy without a timeout gives none.
func (q QueuePolicy) timeoutFor(override time.Duration) time.Duration {
	if q.AllowOverride && override > 0 && override < q.Timeout {
		return override
	}
	return q.Timeout
}

// Triton's texts for a request the queue turns away.
const (
	msgQueueFull = "Exceeds maximum queue size"
	msgExpired   = "Request timeout expired"
)

// requestQueue holds the requests waiting in a batcher, by priority level (level 1
// first; one level when the model has no priorities), each level in arrival order
// with the requests it delayed after the others. Its methods are safe for concurrent
// use; ready has a value whenever a request was queued since the batcher last looked.
type requestQueue struct {
	mu     sync.Mutex
	levels []*levelQueue
	ready  chan struct{}
}

type levelQueue struct {
	policy  QueuePolicy
	waiting []*pending // arrival order
	delayed []*pending // expired under DELAY, in the order they expired
}

func newRequestQueue(spec BatchSpec) *requestQueue {
	q := &requestQueue{ready: make(chan struct{}, 1)}
	for level := 1; level <= max(spec.PriorityLevels, 1); level++ {
		pol := spec.QueuePolicy
		if p, ok := spec.LevelPolicies[level]; ok {
			pol = p
		}
		q.levels = append(q.levels, &levelQueue{policy: pol})
	}
	return q
}

// levelOf is the queue index of a request's priority, as Triton maps it: 0 or a
// level past PriorityLevels is the default level.
func levelOf(spec BatchSpec, priority uint64) int {
	if spec.PriorityLevels == 0 {
		return 0
	}
	if priority == 0 || priority > uint64(spec.PriorityLevels) {
		return min(max(spec.DefaultPriority, 1), spec.PriorityLevels) - 1 // validated: 1..PriorityLevels
	}
	return int(priority) - 1
}

// push queues p at its level, with its deadline from the level's policy and the
// request's timeout override; a full level refuses it.
func (q *requestQueue) push(p *pending, level int, override time.Duration) error {
	q.mu.Lock()
	l := q.levels[level]
	if l.policy.MaxSize > 0 && len(l.waiting)+len(l.delayed) >= l.policy.MaxSize {
		q.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrUnavailable, msgQueueFull)
	}
	if t := l.policy.timeoutFor(override); t > 0 {
		p.deadline = p.enq.Add(t)
	}
	l.waiting = append(l.waiting, p)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
	return nil
}

// expire applies the levels' policies at now: requests whose caller gave up leave,
// expired ones are rejected (returned, to be answered) or delayed; it returns the
// earliest deadline still ahead (zero: none).
func (q *requestQueue) expire(now time.Time) (rejected []*pending, next time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, l := range q.levels {
		kept := l.waiting[:0]
		for _, p := range l.waiting {
			switch {
			case p.gone.Load():
			case !p.deadline.IsZero() && !now.Before(p.deadline):
				if l.policy.Delay {
					l.delayed = append(l.delayed, p)
				} else {
					rejected = append(rejected, p)
				}
			default:
				kept = append(kept, p)
				if !p.deadline.IsZero() && (next.IsZero() || p.deadline.Before(next)) {
					next = p.deadline
				}
			}
		}
		clear(l.waiting[len(kept):])
		l.waiting = kept
		delayed := l.delayed[:0]
		for _, p := range l.delayed {
			if !p.gone.Load() {
				delayed = append(delayed, p)
			}
		}
		clear(l.delayed[len(delayed):])
		l.delayed = delayed
	}
	return rejected, next
}

// peek returns the batch that would form now: the first request in priority order
// (levels from 1, each level's waiting requests before its delayed ones) and every
// later one with its shape key that fits, up to maxRows rows.
func (q *requestQueue) peek(maxRows int) (batch []*pending, rows int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var key string
	for _, l := range q.levels {
		for _, list := range [][]*pending{l.waiting, l.delayed} {
			for _, p := range list {
				switch {
				case p.gone.Load():
				case batch == nil:
					batch, rows, key = []*pending{p}, p.rows, p.key
				case p.key == key && rows+p.rows <= maxRows:
					batch, rows = append(batch, p), rows+p.rows
				}
			}
		}
	}
	return batch, rows
}

// remove takes a batch that peek returned out of the queue.
func (q *requestQueue) remove(batch []*pending) {
	taken := make(map[*pending]bool, len(batch))
	for _, p := range batch {
		taken[p] = true
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, l := range q.levels {
		for _, list := range []*[]*pending{&l.waiting, &l.delayed} {
			kept := (*list)[:0]
			for _, p := range *list {
				if !taken[p] {
					kept = append(kept, p)
				}
			}
			clear((*list)[len(kept):])
			*list = kept
		}
	}
}

// size is the number of requests queued.
func (q *requestQueue) size() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, l := range q.levels {
		n += len(l.waiting) + len(l.delayed)
	}
	return n
}

// drain empties the queue and returns what it held.
func (q *requestQueue) drain() []*pending {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []*pending
	for _, l := range q.levels {
		out = append(out, l.waiting...)
		out = append(out, l.delayed...)
		l.waiting, l.delayed = nil, nil
	}
	return out
}

// requestQueueing is what a request asks of the queue through its parameters:
// "priority" (a level; 0 or one past the model's levels is the default) and "timeout"
// (microseconds in the queue, honoured where the level's policy allows an override).
type requestQueueing struct {
	priority uint64
	timeout  time.Duration
}

func queueingOf(params map[string]any) (requestQueueing, error) {
	var r requestQueueing
	var err error
	if v, ok := params["priority"]; ok {
		if r.priority, err = unsignedParam("priority", v); err != nil {
			return r, err
		}
	}
	if v, ok := params["timeout"]; ok {
		us, err := unsignedParam("timeout", v)
		if err != nil {
			return r, err
		}
		r.timeout = time.Duration(min(us, math.MaxInt64/uint64(time.Microsecond))) * time.Microsecond
	}
	return r, nil
}

// unsignedParam reads a request parameter that must be a non-negative integer, as
// either protocol carries it (JSON numbers, gRPC int64 or uint64).
func unsignedParam(name string, v any) (uint64, error) {
	switch x := v.(type) {
	case uint64:
		return x, nil
	case int64:
		if x >= 0 {
			return uint64(x), nil
		}
	case int:
		if x >= 0 {
			return uint64(x), nil
		}
	case float64:
		if x >= 0 && x == math.Trunc(x) && x < math.MaxUint64 {
			return uint64(x), nil
		}
	case json.Number:
		var n uint64
		if _, err := fmt.Sscan(string(x), &n); err == nil {
			return n, nil
		}
	}
	return 0, fmt.Errorf("%w: parameter %q is %v: it must be a non-negative integer", ErrInvalid, name, v)
}
