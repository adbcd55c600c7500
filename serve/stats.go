package serve

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/kilnrt/kiln/engine"
)

// Counter is a count and the nanoseconds spent, as Triton's statistics extension
// reports them.
type Counter struct {
	Count int64
	Ns    int64
}

func (c *counter) add(d time.Duration) {
	c.n.Add(1)
	c.ns.Add(int64(d))
}

func (c *counter) get() Counter { return Counter{c.n.Load(), c.ns.Load()} }

type counter struct{ n, ns atomic.Int64 }

// ModelStats is one model version's statistics: Triton's InferStatistics. Success
// counts successful requests with their whole time in the service; Queue, ComputeInput,
// ComputeInfer and ComputeOutput split it as Triton does: waiting for an instance (or
// a batch), preparing the inputs in the model's order and shapes (a batch's joined
// inputs), running the model, and taking the outputs out (a batch's split, reshapes,
// classification). A request of a batch counts its batch's compute times whole.
// InferenceCount counts inferences (a request of n rows counts n for a model with
// max_batch_size > 0, else 1) and ExecutionCount runs of the model (a batch is one;
// without batching, one per request); Batches counts the executions per batch size.
type ModelStats struct {
	Name, Version                            string
	LastInference                            int64 // milliseconds since the epoch (0: never)
	InferenceCount                           int64
	ExecutionCount                           int64
	Success, Fail                            Counter
	Queue, ComputeInput, Compute, ComputeOut Counter
	Batches                                  map[int]BatchStats
	// Pending is the requests waiting now for an instance or in the batcher's queue.
	Pending int64
}

// BatchStats are the executions of one batch size with their compute times.
type BatchStats struct {
	ComputeInput, ComputeInfer, ComputeOutput Counter
}

// requestTiming is how one successful request spent its time (InferResponse.timing).
type requestTiming struct {
	queued, input, compute, output time.Duration
	inferences                     int64 // rows, or 1 for a model without a batch dim
}

type modelStats struct {
	last                                       atomic.Int64
	success, fail, queue, input, compute, outp counter
	inferences, executions                     atomic.Int64
	waiting                                    atomic.Int64 // requests waiting for an instance (batched ones: the batcher's queue)
	mu                                         sync.Mutex
	batches                                    map[int]BatchStats
}

// execution counts one run of the model on a batch of the given size.
func (s *modelStats) execution(size int, input, compute, output time.Duration) {
	s.executions.Add(1)
	s.mu.Lock()
	if s.batches == nil {
		s.batches = map[int]BatchStats{}
	}
	b := s.batches[size]
	b.ComputeInput.add(input)
	b.ComputeInfer.add(compute)
	b.ComputeOutput.add(output)
	s.batches[size] = b
	s.mu.Unlock()
}

func (c *Counter) add(d time.Duration) {
	c.Count++
	c.Ns += int64(d)
}

// ok counts a successful request that spent total in the service.
func (s *modelStats) ok(t requestTiming, total time.Duration) {
	s.last.Store(time.Now().UnixMilli())
	s.inferences.Add(t.inferences)
	s.success.add(total)
	s.queue.add(t.queued)
	s.input.add(t.input)
	s.compute.add(t.compute)
	s.outp.add(t.output)
}

func (s *modelStats) failed(total time.Duration) {
	s.last.Store(time.Now().UnixMilli())
	s.fail.add(total)
}

func (s *modelStats) snapshot(name, version string) ModelStats {
	st := ModelStats{Name: name, Version: version, LastInference: s.last.Load(), InferenceCount: s.inferences.Load(),
		ExecutionCount: s.executions.Load(), Success: s.success.get(), Fail: s.fail.get(), Queue: s.queue.get(),
		ComputeInput: s.input.get(), Compute: s.compute.get(), ComputeOut: s.outp.get(), Batches: map[int]BatchStats{},
		Pending: s.waiting.Load()}
	s.mu.Lock()
	for k, v := range s.batches {
		st.Batches[k] = v
	}
	s.mu.Unlock()
	return st
}

// CompileStats counts compiles and journal outcomes since start.
type CompileStats struct {
	Compiles    int64         // executables built here
	JournalHits int64         // executables loaded from the journal
	Seconds     time.Duration // total time to executables
}

type serviceStats struct {
	mu sync.Mutex
	CompileStats
}

func (s *serviceStats) compile(_ string, c *engine.Built, took time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.Compiled() {
		s.Compiles++
	} else {
		s.JournalHits++
	}
	s.Seconds += took
}
