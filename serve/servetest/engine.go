package servetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kilnrt/kiln/compilecache"
	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/loader/onnx"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// Engine runs models with the reference interpreter. The zero value is ready to use.
type Engine struct {
	// Delay is how long each Load takes (a compile's stand-in).
	Delay time.Duration
	// Hook, when set, runs at the start of each Load with the model (its Name is the
	// label the service opened it under, "model/version"): it may block, as a slow
	// compile does, until the test lets it go or ctx ends, and its error fails the
	// Load, as a failed compile does.
	Hook   func(ctx context.Context, m *engine.Model) error
	loads  atomic.Int64
	mu     sync.Mutex
	byName map[string]int64
}

// Loads is how many executables Load has produced.
func (e *Engine) Loads() int64 { return e.loads.Load() }

// LoadsOf is how many executables Load has produced for one model ("model/version").
func (e *Engine) LoadsOf(name string) int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.byName[name]
}

// Open reads a model version's file once, as the real engine does.
func (e *Engine) Open(name, path string) (*engine.Model, error) { return engine.Open(name, path) }

// JournalStats is zero: the test engine keeps no journal.
func (e *Engine) JournalStats() compilecache.Stats { return compilecache.Stats{} }

// Load waits Delay, reads the model's verified bytes and returns a runner for it.
func (e *Engine) Load(ctx context.Context, m *engine.Model, shapes map[string][]int64, progress func(engine.Progress)) (*engine.Loaded, error) {
	start := time.Now()
	if progress != nil {
		progress(engine.Progress{Stage: "reference"})
	}
	if e.Hook != nil {
		if err := e.Hook(ctx, m); err != nil {
			return nil, err
		}
	}
	if e.Delay > 0 {
		t := time.NewTimer(e.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, fmt.Errorf("model %q: load cancelled: %w", m.Name, context.Cause(ctx))
		}
	}
	mod := m.Module
	if mod == nil {
		var err error
		if mod, err = onnx.LoadVerified(m.Path, m.Digest, onnx.Options{}); err != nil {
			return nil, err
		}
	}
	var names []string
	if m.Interface != nil {
		for _, p := range m.Interface.Inputs {
			names = append(names, p.Name)
		}
	} else {
		for _, p := range mod.Main.Params {
			if p.Const == nil {
				names = append(names, p.Name)
			}
		}
	}
	outs := make([]string, len(mod.Main.Results))
	for i, r := range mod.Main.Results {
		outs[i] = r.Name
	}
	e.loads.Add(1)
	e.mu.Lock()
	if e.byName == nil {
		e.byName = map[string]int64{}
	}
	e.byName[m.Name]++
	e.mu.Unlock()
	built := &engine.Built{Stats: &engine.Stats{}, Outcome: compilecache.Uncached, Miss: compilecache.MissCause{Kind: compilecache.MissOff, Detail: "test engine"}, Took: time.Since(start)}
	return &engine.Loaded{Built: built, Runner: &runner{mod: mod, inputs: names}, Outputs: outs}, nil
}

// runner evaluates the module for each request.
type runner struct {
	mod    *graph.Module
	inputs []string // parameter names, in the order requests give them
}

func (r *runner) Run(ctx context.Context, args []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if len(args) != len(r.inputs) {
		return nil, fmt.Errorf("%w: %d inputs, the model takes %d", vm.ErrInput, len(args), len(r.inputs))
	}
	in := make(map[string]ref.Value, len(args))
	for i, a := range args {
		in[r.inputs[i]] = a
	}
	vals, err := ref.Eval(r.mod, in, ref.Options{Context: ctx})
	if err != nil {
		return nil, err
	}
	out := make([]*tensor.Tensor, len(vals))
	for i, v := range vals {
		t, ok := v.(*tensor.Tensor)
		if !ok {
			return nil, fmt.Errorf("result %d is %s, not a tensor", i, ref.Describe(v))
		}
		out[i] = t
	}
	return out, nil
}

func (r *runner) MemoryStats() vm.MemoryStats { return vm.MemoryStats{} }
func (r *runner) Close() error                { return nil }
