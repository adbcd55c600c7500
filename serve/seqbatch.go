package serve

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/tensor"
)

// The sequence batcher (Triton's sequence_batching): the requests of a sequence (one
// correlation ID, from a request with sequence_start to one with sequence_end) run one
// after another, each once the one before it has finished, and the server gives the
// model its control inputs and its implicit state. A started sequence holds a place:
// with the direct strategy a slot (lanes of max_batch_size slots, one lane per
// instance; a batch is one ready request of each ready slot of a lane, in slot order,
// the gaps padded with rows whose READY control is false); with the oldest strategy
// one of max_candidate_sequences candidate places (a batch is the oldest ready
// requests of the candidates, up to max_batch_size). Sequences started while every
// place is held wait in a backlog, in order, and take the places that sequences free
// by ending or by idling longer than max_sequence_idle_microseconds.

// seqStep is one request of a sequence waiting to run.
type seqStep struct {
	args       []*tensor.Tensor // the model's inputs in order; nil where the server gives them
	key        string           // the client inputs' shapes without the batch dim: equal keys batch together
	start, end bool
	enq        time.Time
	done       chan batchResult
}

// sequence is a started sequence.
type sequence struct {
	id        seqID
	place     int // its slot or candidate place; -1: in the backlog
	queue     []*seqStep
	running   bool             // a request of it runs: the next one waits
	ended     bool             // its sequence_end request is queued: the ID may start again
	state     []*tensor.Tensor // per seqSpec.states, without the batch dim
	idleSince time.Time        // when it last had nothing queued or running
}

func (s *sequence) ready() bool { return s != nil && !s.running && len(s.queue) > 0 }

// seqRow is a row of a batch: a sequence's request, or padding (s nil).
type seqRow struct {
	s  *sequence
	st *seqStep
}

// seqBatcher schedules a model version's sequences onto its instances.
type seqBatcher struct {
	m       *model
	spec    *seqSpec
	ctlOf   map[string]int // model input → index in spec.controls
	mu      sync.Mutex
	live    map[seqID]*sequence // started and not ended, by ID
	places  []*sequence         // the holders of the slots or candidate places
	backlog []*sequence
	kick    chan struct{}
	stop    context.CancelFunc // ends the loop: the model version is retired
}

func newSeqBatcher(m *model, spec *seqSpec) *seqBatcher {
	ctx, stop := context.WithCancel(m.svc.ctx)
	b := &seqBatcher{m: m, spec: spec, ctlOf: map[string]int{}, live: map[seqID]*sequence{},
		places: make([]*sequence, spec.places), kick: make(chan struct{}, 1), stop: stop}
	for i, c := range spec.controls {
		b.ctlOf[c.input] = i
	}
	go b.loop(ctx)
	return b
}

// inferSequence runs a request of a sequence: its inputs checked, queued behind its
// sequence's earlier requests, and its share of an execution returned.
func (m *model) inferSequence(ctx context.Context, req *InferRequest) (*InferResponse, error) {
	b := m.seq
	sp, err := sequenceParams(m.name, req.Params)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	args, shapes, err := m.checkInputs(req)
	if err != nil {
		return nil, err
	}
	outs, err := m.outputs(req)
	if err != nil {
		return nil, err
	}
	if len(req.Outputs) == 0 {
		outs = slicesDelete(outs, b.spec.keeps)
	}
	for _, o := range outs {
		if b.spec.keeps[o] {
			return nil, fmt.Errorf("%w: model %q: output %q is a sequence state the server keeps, not a response output", ErrInvalid, m.name, o)
		}
	}
	input := time.Since(t0)
	st := &seqStep{args: args, enq: time.Now(), done: make(chan batchResult, 1)}
	if b.spec.batch {
		rows, key, err := batchKey(clientArgs(args), b.spec.maxBatch)
		if err != nil {
			return nil, fmt.Errorf("%w: model %q batches sequences: %v", ErrInvalid, m.name, err)
		}
		if rows != 1 {
			return nil, fmt.Errorf("%w: model %q: a request of a sequence is one row (batch size 1), not %d", ErrInvalid, m.name, rows)
		}
		st.key = key
	}
	if err := b.enqueue(sp, st, shapes); err != nil {
		return nil, err
	}
	var r batchResult
	select {
	case r = <-st.done:
	case <-ctx.Done():
		// the request still runs in its turn, so that the sequence's state is what
		// its requests make it; its result is dropped
		return nil, fmt.Errorf("%w: waiting for sequence %s of model %q: %v", ErrDeadline, sp.id, m.name, ctx.Err())
	}
	if r.err != nil {
		return nil, r.err
	}
	t1 := time.Now()
	resp, err := m.response(req, outs, r.outs, r.outIdx)
	if err != nil {
		return nil, err
	}
	resp.Device, resp.CompileWait = r.device, r.compileWait
	// one row per request of a sequence; counted by the caller
	resp.timing = requestTiming{queued: r.queued, input: input + r.input, compute: r.compute, output: r.output + time.Since(t1), inferences: 1}
	return resp, nil
}

// clientArgs leaves out the inputs the server gives (nil).
func clientArgs(args []*tensor.Tensor) []*tensor.Tensor {
	var out []*tensor.Tensor
	for _, a := range args {
		if a != nil {
			out = append(out, a)
		}
	}
	return out
}

func slicesDelete(names []string, drop map[string]bool) []string {
	var out []string
	for _, n := range names {
		if !drop[n] {
			out = append(out, n)
		}
	}
	return out
}

// enqueue places a request in its sequence: a request with sequence_start starts one
// (a place, or the backlog), any other joins its started sequence; shapes are the
// client inputs' shapes, checked with the sequence's state and controls against the
// model's dims.
func (b *seqBatcher) enqueue(p seqParams, st *seqStep, shapes map[string][]int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.live[p.id]
	switch {
	case p.start && s != nil:
		return fmt.Errorf("%w: model %q: sequence %s is in progress; sequence_start belongs to the first request of a sequence only (end it with sequence_end, or let it idle out, before starting it again)", ErrInvalid, b.m.name, p.id)
	case p.start:
		s = &sequence{id: p.id, place: -1, state: make([]*tensor.Tensor, len(b.spec.states))}
		for k, ss := range b.spec.states {
			s.state[k] = ss.initial // never modified: a step replaces it
		}
	case s == nil: // Triton's words
		return fmt.Errorf("%w: inference request for sequence %s to model '%s' must specify the START flag on the first request of the sequence", ErrInvalid, p.id, b.m.name)
	}
	if err := b.checkShapes(s, shapes); err != nil {
		return err
	}
	if p.start {
		b.live[p.id] = s
		b.seat(s)
	}
	if p.end {
		delete(b.live, p.id)
		s.ended = true
	}
	st.start, st.end = p.start, p.end
	s.queue = append(s.queue, st)
	b.wake()
	return nil
}

// checkShapes checks a request's shapes, with the server's inputs for it, against the
// model's dims (b.mu held).
func (b *seqBatcher) checkShapes(s *sequence, shapes map[string][]int64) error {
	full := make(map[string][]int64, len(shapes)+len(b.spec.controls)+len(b.spec.states))
	for k, v := range shapes {
		full[k] = v
	}
	for _, c := range b.spec.controls {
		shape := make([]int64, c.rank)
		for i := range shape {
			shape[i] = 1
		}
		full[c.input] = shape
	}
	for k, ss := range b.spec.states {
		full[ss.input] = b.rowShape(s.state[k])
	}
	if _, err := engine.DimsFromShapes(b.m.sig, full); err != nil {
		return fmt.Errorf("%w: model %q, sequence %s: %v", ErrInvalid, b.m.name, s.id, err)
	}
	return nil
}

// rowShape is the model's shape for one row of a tensor given without the batch dim.
func (b *seqBatcher) rowShape(t *tensor.Tensor) []int64 {
	var shape []int64
	if b.spec.batch {
		shape = append(shape, 1)
	}
	for _, d := range t.Shape {
		shape = append(shape, int64(d))
	}
	return shape
}

func (b *seqBatcher) wake() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// seat gives a started sequence a free place, else puts it in the backlog (b.mu held).
func (b *seqBatcher) seat(s *sequence) {
	for i, h := range b.places {
		if h == nil {
			b.places[i], s.place = s, i
			return
		}
	}
	b.backlog = append(b.backlog, s)
}

// free releases a sequence's place to the backlog's first sequence (b.mu held).
func (b *seqBatcher) free(s *sequence) {
	if b.live[s.id] == s {
		delete(b.live, s.id)
	}
	if s.place < 0 {
		return
	}
	i := s.place
	b.places[i], s.place = nil, -1
	if len(b.backlog) > 0 {
		next := b.backlog[0]
		b.backlog = b.backlog[1:]
		b.places[i], next.place = next, i
	}
}

// expire releases the sequences idle for longer than the limit and returns when the
// next one would be (zero: none) (b.mu held).
func (b *seqBatcher) expire(now time.Time) time.Time {
	var next time.Time
	for _, s := range b.places {
		if s == nil || s.running || len(s.queue) > 0 {
			continue
		}
		at := s.idleSince.Add(b.spec.idle)
		if !now.Before(at) {
			b.m.svc.log.Debug("sequence released after idling", zap.String("model", b.m.name), zap.Stringer("sequence", s.id), zap.Duration("limit", b.spec.idle))
			b.free(s)
			continue
		}
		next = earliest(next, at)
	}
	return next
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// form finds the next batch: due says it runs now; else wake is when it will (zero:
// when a request comes). With take, a due batch's requests are taken from their
// sequences (b.mu held).
func (b *seqBatcher) form(now time.Time, take bool) (rows []seqRow, due bool, wake time.Time) {
	if b.spec.oldest {
		rows, due, wake = b.formOldest(now)
	} else {
		rows, due, wake = b.formDirect(now)
	}
	if due && take {
		for i, r := range rows {
			if r.s != nil {
				rows[i].st = r.s.queue[0]
				r.s.queue = r.s.queue[1:]
				r.s.running = true
			}
		}
	}
	return rows, due, wake
}

// formDirect: the lanes by their oldest ready request; the first lane that is due
// runs its ready slots whose requests have the key of its oldest.
func (b *seqBatcher) formDirect(now time.Time) ([]seqRow, bool, time.Time) {
	per := b.spec.maxBatch
	type lane struct {
		from   int
		oldest *sequence
		n      int
	}
	var lanes []lane
	for from := 0; from < len(b.places); from += per {
		l := lane{from: from}
		for _, s := range b.places[from:min(from+per, len(b.places))] {
			if s.ready() {
				l.n++
				if l.oldest == nil || s.queue[0].enq.Before(l.oldest.queue[0].enq) {
					l.oldest = s
				}
			}
		}
		if l.oldest != nil {
			lanes = append(lanes, l)
		}
	}
	sort.SliceStable(lanes, func(i, j int) bool { return lanes[i].oldest.queue[0].enq.Before(lanes[j].oldest.queue[0].enq) })
	var wake time.Time
	for _, l := range lanes {
		at := l.oldest.queue[0].enq.Add(b.spec.delay)
		if b.spec.minUtil > 0 && float64(l.n) < b.spec.minUtil*float64(per) && now.Before(at) {
			wake = earliest(wake, at)
			continue
		}
		key := b.rowKey(l.oldest)
		var rows []seqRow
		for i, s := range b.places[l.from:min(l.from+per, len(b.places))] {
			if s.ready() && b.rowKey(s) == key {
				for len(rows) < i { // the slots between: padding
					rows = append(rows, seqRow{})
				}
				rows = append(rows, seqRow{s: s})
			}
		}
		return rows, true, time.Time{}
	}
	return nil, false, wake
}

// formOldest: the candidates' ready requests, oldest first, with the oldest one's key,
// up to max_batch_size; due when full, at a preferred size at least as large as the
// largest, or when the oldest has waited max_queue_delay.
func (b *seqBatcher) formOldest(now time.Time) ([]seqRow, bool, time.Time) {
	var ready []*sequence
	for _, s := range b.places {
		if s.ready() {
			ready = append(ready, s)
		}
	}
	if len(ready) == 0 {
		return nil, false, time.Time{}
	}
	sort.SliceStable(ready, func(i, j int) bool { return ready[i].queue[0].enq.Before(ready[j].queue[0].enq) })
	key := b.rowKey(ready[0])
	var rows []seqRow
	for _, s := range ready {
		if len(rows) < b.spec.maxBatch && b.rowKey(s) == key {
			rows = append(rows, seqRow{s: s})
		}
	}
	n := len(rows)
	at := ready[0].queue[0].enq.Add(b.spec.delay)
	full := n >= b.spec.maxBatch || (len(b.spec.preferred) > 0 && n >= b.spec.preferred[len(b.spec.preferred)-1])
	if full || b.spec.delay == 0 || !now.Before(at) {
		return rows, true, time.Time{}
	}
	return nil, false, at
}

// rowKey is what a ready sequence's next request must share with the other rows of
// a batch: its client inputs' shapes and its states' (b.mu held).
func (b *seqBatcher) rowKey(s *sequence) string {
	k := s.queue[0].key
	for _, st := range s.state {
		k += fmt.Sprint(st.Shape) + ";"
	}
	return k
}

// loop runs batches as they become due and instances free, and releases idle
// sequences.
func (b *seqBatcher) loop(ctx context.Context) {
	for {
		b.mu.Lock()
		now := time.Now()
		wake := b.expire(now)
		_, due, at := b.form(now, false)
		b.mu.Unlock()
		wake = earliest(wake, at)
		var slots chan *placement // nil: nothing to run, do not take an instance
		if due {
			slots = b.m.slots
		}
		var timer <-chan time.Time
		var t *time.Timer
		if !wake.IsZero() {
			t = time.NewTimer(time.Until(wake))
			timer = t.C
		}
		select {
		case p := <-slots:
			b.mu.Lock()
			rows, due, _ := b.form(time.Now(), true)
			b.mu.Unlock()
			if due {
				go b.run(p, rows)
			} else {
				b.m.slots <- p
			}
		case <-b.kick:
		case <-timer:
		case <-ctx.Done():
			if t != nil {
				t.Stop()
			}
			return
		}
		if t != nil {
			t.Stop()
		}
	}
}
