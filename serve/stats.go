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

// ModelStats is one model version's statistics: Triton's InferStatistics, as far as
// kiln measures them (success and fail counts with total time, time queued for an
// instance, time computing; one execution per request until dynamic batching).
type ModelStats struct {
	Name, Version  string
	LastInference  int64 // milliseconds since the epoch (0: never)
	InferenceCount int64
	ExecutionCount int64
	Success, Fail  Counter
	Queue, Compute Counter
	Batches        map[int]Counter // batched executions per batch size, with compute time
}

type modelStats struct {
	last                            atomic.Int64
	success, fail, queue, computeNs counter
	executions                      atomic.Int64 // runs of the model (a batch is one)
	mu                              sync.Mutex
	batches                         map[int]Counter // executions per batch size, with compute time
}

// execution counts one batched run of the given size.
func (s *modelStats) execution(size int, compute time.Duration) {
	s.executions.Add(1)
	s.mu.Lock()
	if s.batches == nil {
		s.batches = map[int]Counter{}
	}
	c := s.batches[size]
	c.Count++
	c.Ns += int64(compute)
	s.batches[size] = c
	s.mu.Unlock()
}

// ok counts a successful request; alone says it was an execution of its own (not a
// share of a batch, which execution counts).
func (s *modelStats) ok(queued, compute time.Duration, alone bool) {
	if alone {
		s.executions.Add(1)
	}
	s.last.Store(time.Now().UnixMilli())
	s.success.add(queued + compute)
	s.queue.add(queued)
	s.computeNs.add(compute)
}

func (s *modelStats) failed(total time.Duration) {
	s.last.Store(time.Now().UnixMilli())
	s.fail.add(total)
}

func (s *modelStats) snapshot(name, version string) ModelStats {
	ok := s.success.get()
	execs := s.executions.Load()
	st := ModelStats{Name: name, Version: version, LastInference: s.last.Load(), InferenceCount: ok.Count, ExecutionCount: execs,
		Success: ok, Fail: s.fail.get(), Queue: s.queue.get(), Compute: s.computeNs.get(), Batches: map[int]Counter{}}
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
