package serve

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// BatchSpec configures dynamic batching of a model version (Triton's dynamic_batching
// with max_batch_size): requests whose inputs agree on every dim but the first are
// joined along the first dim, run as one execution, and split again.
type BatchSpec struct {
	MaxBatchSize int
	// Preferred batch sizes, ascending: a batch runs at the smallest one that holds it
	// (padded with zero rows), so only these sizes are ever compiled. Empty: powers of two
	// up to MaxBatchSize, and MaxBatchSize itself.
	Preferred []int
	// MaxDelay is how long the first request of a batch waits for others.
	MaxDelay time.Duration
	// PriorityLevels is the number of priority levels (0: one, no priorities); a
	// request's "priority" parameter picks one, 1 first, and a request naming none
	// (or a level past them) has DefaultPriority.
	PriorityLevels, DefaultPriority int
	// QueuePolicy is every level's queue policy but those in LevelPolicies.
	QueuePolicy   QueuePolicy
	LevelPolicies map[int]QueuePolicy
}

// buckets returns the batch sizes that executables are compiled for.
func (b BatchSpec) buckets() []int {
	if len(b.Preferred) > 0 {
		out := append([]int{}, b.Preferred...)
		sort.Ints(out)
		if out[len(out)-1] < b.MaxBatchSize {
			out = append(out, b.MaxBatchSize)
		}
		return out
	}
	var out []int
	for n := 1; n < b.MaxBatchSize; n *= 2 {
		out = append(out, n)
	}
	return append(out, b.MaxBatchSize)
}

// pending is one request waiting in a batcher.
type pending struct {
	args     []*tensor.Tensor
	rows     int    // the request's size along the batch dim
	key      string // its shapes without the batch dim: only equal keys batch together
	enq      time.Time
	deadline time.Time   // its queue timeout (zero: none)
	gone     atomic.Bool // its caller gave up: it leaves the queue unrun
	done     chan batchResult
}

type batchResult struct {
	outs            []*tensor.Tensor // in the executable's output order
	outIdx          map[string]int
	err             error
	queued, compute time.Duration
	input, output   time.Duration // joining the batch's inputs; splitting its outputs
	compileWait     time.Duration // waited for the executable to compile (InferResponse.CompileWait)
	batch           int
	device          string // where the batch ran
}

// batcher gathers a model's requests into executions.
type batcher struct {
	m      *model
	spec   BatchSpec
	queue  *requestQueue
	warmMu sync.Mutex
	warmed map[warmKey]bool   // shape keys whose other batch sizes are compiling or compiled, per device
	stop   context.CancelFunc // ends the loop: the model version is retired and idle
}

func newBatcher(m *model, spec BatchSpec) *batcher {
	ctx, stop := context.WithCancel(m.svc.ctx)
	b := &batcher{m: m, spec: spec, queue: newRequestQueue(spec), warmed: map[warmKey]bool{}, stop: stop}
	go b.loop(ctx)
	return b
}

// batchKey checks that every input has the batch dim with the same size and returns
// that size and the shapes without it.
func batchKey(args []*tensor.Tensor, max int) (int, string, error) {
	rows := -1
	var key strings.Builder
	for i, t := range args {
		if len(t.Shape) == 0 {
			return 0, "", fmt.Errorf("input %d is a scalar: it has no batch dimension", i)
		}
		if rows >= 0 && t.Shape[0] != rows {
			return 0, "", fmt.Errorf("inputs disagree on the batch size (%d and %d)", rows, t.Shape[0])
		}
		rows = t.Shape[0]
		fmt.Fprint(&key, t.Shape[1:], ";")
	}
	if rows < 1 || rows > max {
		return 0, "", fmt.Errorf("batch size %d is outside 1..%d (max_batch_size)", rows, max)
	}
	return rows, key.String(), nil
}

// submit queues a request at its priority level and waits for its share of an
// execution. A full level refuses it at once; a caller that gives up leaves the queue.
func (b *batcher) submit(ctx context.Context, p *pending, qr requestQueueing) batchResult {
	p.enq, p.done = time.Now(), make(chan batchResult, 1)
	if err := b.queue.push(p, levelOf(b.spec, qr.priority), qr.timeout); err != nil {
		return batchResult{err: fmt.Errorf("%w (model %q)", err, b.m.name)}
	}
	select {
	case r := <-p.done:
		return r
	case <-ctx.Done():
		p.gone.Store(true) // dropped from the queue, or its batch's result for it is
		select {
		case b.queue.ready <- struct{}{}:
		default:
		}
		return batchResult{err: fmt.Errorf("%w: waiting for model %q: %v", ErrDeadline, b.m.name, ctx.Err())}
	}
}

// loop forms batches. Once an instance is free, the first request in priority order
// takes what is queued with its shape key, and the batch runs when it holds
// MaxBatchSize rows or the first request has waited MaxDelay since its arrival;
// requests arriving meanwhile join it (a higher-priority one becomes its first).
// Queue timeouts are applied as they fall due: expired requests are answered
// (REJECT) or moved behind their level (DELAY).
func (b *batcher) loop(ctx context.Context) {
	var inst *placement // held while a batch forms
	defer func() {
		if inst != nil {
			b.m.slots <- inst
		}
		for _, p := range b.queue.drain() {
			p.done <- batchResult{err: fmt.Errorf("%w: model %q was unloaded", ErrUnavailable, b.m.name)}
		}
	}()
	for {
		now := time.Now()
		rejected, wake := b.queue.expire(now)
		for _, p := range rejected {
			p.done <- batchResult{err: fmt.Errorf("%w: %s (model %q)", ErrUnavailable, msgExpired, b.m.name)}
		}
		batch, rows := b.queue.peek(b.spec.MaxBatchSize)
		var slots chan *placement
		switch {
		case batch == nil && inst != nil: // nothing to run: the instance goes back
			b.m.slots <- inst
			inst = nil
		case batch != nil && inst == nil:
			slots = b.m.slots
		case batch != nil:
			due := batch[0].enq.Add(b.spec.MaxDelay)
			if rows >= b.spec.MaxBatchSize || !now.Before(due) {
				b.queue.remove(batch)
				go b.run(inst, batch, rows)
				inst = nil
				continue
			}
			if wake.IsZero() || due.Before(wake) {
				wake = due
			}
		}
		var timer *time.Timer
		var fired <-chan time.Time
		if !wake.IsZero() {
			timer = time.NewTimer(wake.Sub(now))
			fired = timer.C
		}
		select {
		case inst = <-slots: // given back by run
		case <-b.queue.ready:
		case <-fired:
		case <-ctx.Done():
			return
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// run executes one batch on an instance of p's device: inputs joined (padded to the
// compiled bucket size), one run, outputs split back to the requests.
func (b *batcher) run(p *placement, batch []*pending, rows int) {
	defer func() { b.m.slots <- p }()
	size := b.spec.MaxBatchSize
	for _, s := range b.spec.buckets() {
		if s >= rows {
			size = s
			break
		}
	}
	fail := func(err error) {
		for _, r := range batch {
			r.done <- batchResult{err: err}
		}
	}
	t0 := time.Now()
	joined := make([]*tensor.Tensor, len(batch[0].args))
	shapes := map[string][]int64{}
	for i := range joined {
		parts := make([]*tensor.Tensor, len(batch))
		for k, r := range batch {
			parts[k] = r.args[i]
		}
		t, err := concatRows(parts, size)
		if err != nil {
			fail(fmt.Errorf("%w: model %q: joining input %d: %v", ErrInternal, b.m.name, i, err))
			return
		}
		joined[i] = t
		shape := make([]int64, len(t.Shape))
		for k, d := range t.Shape {
			shape[k] = int64(d)
		}
		shapes[b.m.iface.Inputs[i].Name] = shape
	}
	input := time.Since(t0)
	v, wait, err := b.m.variantWaiting(b.m.svc.ctx, p, shapes)
	if err != nil {
		fail(err)
		return
	}
	b.warm(p, batch[0].key, shapes)
	start := time.Now()
	outs, v, rewait, err := b.m.runVariant(b.m.svc.ctx, p, v, shapes, joined)
	compute := time.Since(start) - rewait
	wait += rewait
	p.runs.Add(1)
	switch {
	case classified(err):
		fail(err)
		return
	case errors.Is(err, vm.ErrInput):
		fail(fmt.Errorf("%w: %v", ErrInvalid, err))
		return
	case err != nil:
		fail(fmt.Errorf("%w: model %q%s: %v", ErrInternal, b.m.name, p.dev.on, err))
		return
	}
	for i, o := range outs {
		if len(o.Shape) == 0 || o.Shape[0] != size {
			fail(fmt.Errorf("%w: model %q: output %q has shape %v, no batch dimension of %d: it cannot be batched (set max_batch_size: 0)",
				ErrInternal, b.m.name, v.outputs[i], o.Shape, size))
			return
		}
	}
	t1 := time.Now()
	shares := make([][]*tensor.Tensor, len(batch))
	row := 0
	for k, r := range batch {
		shares[k] = make([]*tensor.Tensor, len(outs))
		for i, o := range outs {
			shares[k][i] = sliceRows(o, row, r.rows)
		}
		row += r.rows
	}
	output := time.Since(t1)
	b.m.stats.execution(size, input, compute, output)
	for k, r := range batch {
		// the queue time ends where the batch's own work begins; the wait for a
		// compile is neither queue nor compute time
		r.done <- batchResult{outs: shares[k], outIdx: v.outIdx, queued: t0.Sub(r.enq), compute: compute, input: input, output: output,
			compileWait: wait, batch: size, device: p.dev.name}
	}
}

// warmKey is a shape key (the shapes without the batch dim) on a device.
type warmKey struct {
	p   *placement
	key string
}

// warm compiles on p's device, in the background and one after another, the other
// batch sizes of a shape key the first time it is seen there, so that later batches
// do not wait for them.
func (b *batcher) warm(p *placement, key string, shapes map[string][]int64) {
	b.warmMu.Lock()
	seen := b.warmed[warmKey{p, key}]
	b.warmed[warmKey{p, key}] = true
	b.warmMu.Unlock()
	if seen {
		return
	}
	go func() {
		for _, size := range b.spec.buckets() {
			other := map[string][]int64{}
			for name, s := range shapes {
				other[name] = append([]int64{int64(size)}, s[1:]...)
			}
			if _, err := b.m.variantFor(b.m.svc.ctx, p, other); err != nil {
				return // logged by build; requests of that size will report it
			}
		}
	}()
}

// concatRows joins tensors along the first dim and pads with zero rows to size.
func concatRows(parts []*tensor.Tensor, size int) (*tensor.Tensor, error) {
	shape := append(tensor.Shape{size}, parts[0].Shape[1:]...)
	out := tensor.New(parts[0].DType, shape)
	if out.DType == tensor.String {
		dst := out.Data.([]string)
		n := 0
		for _, p := range parts {
			n += copy(dst[n:], p.Data.([]string))
		}
		return out, nil
	}
	dst, ok := out.NativeBytes()
	if !ok {
		var err error
		if dst, err = out.Raw(); err != nil {
			return nil, err
		}
	}
	n := 0
	for _, p := range parts {
		b, ok := p.NativeBytes()
		if !ok {
			var err error
			if b, err = p.Raw(); err != nil {
				return nil, err
			}
		}
		n += copy(dst[n:], b)
	}
	if _, native := out.NativeBytes(); !native {
		return tensor.FromRaw(out.DType, shape, dst)
	}
	return out, nil
}

// sliceRows copies rows [from, from+n) of t.
func sliceRows(t *tensor.Tensor, from, n int) *tensor.Tensor {
	shape := append(tensor.Shape{n}, t.Shape[1:]...)
	out := tensor.New(t.DType, shape)
	per := shape.NumElements() / max(n, 1)
	if t.DType == tensor.String {
		copy(out.Data.([]string), t.Data.([]string)[from*per:(from+n)*per])
		return out
	}
	src, ok1 := t.NativeBytes()
	dst, ok2 := out.NativeBytes()
	if ok1 && ok2 {
		w := t.DType.Size() * per
		copy(dst, src[from*w:(from+n)*w])
		return out
	}
	raw, _ := t.Raw()
	w := t.DType.Size() * per
	o, _ := tensor.FromRaw(t.DType, shape, raw[from*w:(from+n)*w])
	return o
}
