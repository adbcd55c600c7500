package compiler

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/kilnrt/kiln/compilecache"
	"github.com/kilnrt/kiln/devices"
	devcpu "github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/graph/passes"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/vm"
)

// ErrCompile is wrapped by every compile failure; the message names the stage and the
// node or kernel.
var ErrCompile = errors.New("compile failed")

// Progress, Stats, Group and StageTiming are the engine's types: the compiler reports
// through them.
type (
	Progress    = engine.Progress
	Stats       = engine.Stats
	Group       = engine.Group
	TensorPlace = engine.TensorPlace
	StageTiming = engine.StageTiming
)

// Options configure a compile.
type Options struct {
	// Dims binds symbolic dims to values (see engine.DimsFromInputs).
	Dims map[string]int64
	// CPU builds the kernels with its C compiler; its fingerprint is recorded in the
	// binary. Required by the CPU backend, and by a GPU backend for the nodes that run
	// on the CPU.
	CPU *devcpu.Device
	// GPU is a GPU backend's device: it builds the GPU kernels (the OpenCL backend's
	// ProgramBuilder) and its fingerprint keys them.
	GPU devices.Device
	// Jobs is how many C compiles run at once (0: one per core).
	Jobs int
	// Progress, when set, is called as the compile advances (from one goroutine at a
	// time).
	Progress func(Progress)
	// Check verifies the IR after every graph pass.
	Check bool
	// DumpPass names a graph pass whose before/after text goes to Dump.
	DumpPass string
	Dump     func(pass, before, after string)
	// Recipe is every option that changes the generated code (the zero value: the
	// default build): the graph pipeline (its Level, without fuse-ops when NoFusion),
	// the layout choice and bounds checks. engine keys the journal with the same value.
	Recipe engine.Recipe
	// Scoped, when set, is told annotate-scopes' decision on every value the backend's
	// scope policy could have put in a texture: its scope and packing, or why it stays
	// global (kiln inspect --plan).
	Scoped func(passes.ScopeDecision)
	// Passes replaces the recipe's graph pipeline (nil: the recipe's). Only for tests
	// of the passes: an executable built with it is never cached.
	Passes passes.Pipeline
	// Context cancels a long compile (nil: Background). Every stage honors it: between
	// graph passes and inside fold-constants, between the nodes lowered, and while C
	// compilers run (they are killed); the error names the stage and wraps the
	// context's cause.
	Context context.Context
	// Timeout bounds the whole compile (0: no bound); when it passes, the compile
	// stops as on a cancelled Context, with an error wrapping ErrTimeout and
	// context.DeadlineExceeded.
	Timeout time.Duration
	// Graph bounds the graph accepted, checked before any work (zero fields: the
	// defaults); an excess is an error wrapping ErrTooLarge.
	Graph GraphLimits
	// Name names the model in errors.
	Name string
	// Cache, when set, keeps single kernels' object code in the journal, so kernels
	// shared between models (or compiles) are built once.
	Cache *compilecache.Journal
	// Backends is the backend table the target's kind is looked up in (nil:
	// DefaultBackends).
	Backends Backends
	// Limits bound the memory of one inference (zero fields: vm.DefaultLimits): a
	// tensor of a static shape above TensorBytes, or a static plan above RequestBytes,
	// is a compile error naming it (wrapping vm.ErrMemoryLimit). They do not change
	// the executable, so they are no part of its cache key; the VM checks them again
	// when it loads one.
	Limits vm.Limits
	// Tuning applies tuning records to the kernels whose workload they name and, with
	// Space, reports each kernel's search space (nil: the default schedules).
	Tuning *engine.Tuning
	// Lowered, when set, is given each distinct kernel's workload and lowered function
	// (a tuner's features).
	Lowered func(workload string, f *loopir.PrimFunc)
}

// Result is a compiled executable with its statistics.
type Result struct {
	Exe   *vm.Executable
	Stats Stats
}

// Compile compiles m for t.
func Compile(m *graph.Module, t target.Target, opts Options) (*vm.Executable, error) {
	r, err := Build(m, t, opts)
	if err != nil {
		return nil, err
	}
	return r.Exe, nil
}

// Build compiles m for t and reports statistics.
func Build(m *graph.Module, t target.Target, opts Options) (*Result, error) {
	model := "model"
	if opts.Name != "" {
		model = fmt.Sprintf("model %q", opts.Name)
	}
	if err := checkLimits(m, opts.Graph); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCompile, model, err)
	}
	be, err := opts.backendFor(t.Kind)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCompile, model, err)
	}
	if _, err := engine.ParsePrecision(string(opts.Recipe.Precision)); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCompile, model, err)
	}
	if be.Check != nil {
		if err := be.Check(opts); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrCompile, model, err)
		}
	}
	if opts.Context == nil {
		opts.Context = context.Background()
	}
	ctx, cancel := engine.WithTimeout(opts.Context, opts.Timeout)
	defer cancel()
	opts.Context = ctx
	if opts.Jobs <= 0 {
		opts.Jobs = runtime.NumCPU()
	}
	reg := kernels.Default()
	c := &compile{t: t, be: be, opts: opts, model: model, registry: reg, res: &Result{Stats: Stats{Backend: be.Name, Strategies: map[string]int{}}}, limits: opts.Limits.Resolved()}
	if err := c.placeDevices(); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCompile, model, err)
	}
	mod := graph.Clone(m)
	c.mod = mod
	steps := []struct {
		name string
		run  func() error
	}{
		{"passes", func() error { return c.passes(mod) }},
		{"lower", func() error { return c.lower(mod) }},
		{"build", c.build},
		{"plan", c.plan},
	}
	for _, st := range steps {
		start := time.Now()
		c.report(Progress{Stage: st.name})
		if err := c.stage(st.name, st.run); err != nil {
			return nil, err
		}
		c.res.Stats.Stages = append(c.res.Stats.Stages, StageTiming{Stage: st.name, Seconds: time.Since(start).Seconds()})
	}
	return c.res, nil
}

// compile is the state of one compile.
type compile struct {
	t        target.Target
	be       *Backend // the target kind's entry in the backend table
	opts     Options
	model    string // `model "name"`, for errors
	registry *kernels.Registry
	// places are the executable's devices, by index (0: the CPU); order is the order
	// a node's kernel is tried on them (placement.go)
	places     []*place
	order      []*place
	res        *Result
	mod        *graph.Module // the clone being compiled
	em         *emitter
	kt         *kernelTable
	vars       map[string]*loopir.Var // the runtime dims of the kernel being built, by symbol
	at         string                 // the node or kernel being worked on, for panic reports
	kernelHits atomic.Int64           // objects found in the journal
	limits     vm.Limits              // Options.Limits, resolved
	// outer maps each fused body's parameters to the values its kiln.Fused node reads
	outer map[*graph.Value]*graph.Value
	// decisions are annotate-scopes' texture decisions, by value (Stats.Tensors)
	decisions map[*graph.Value]passes.ScopeDecision
	// rounded are the values rounding ops read (roundedValues), built on first use
	rounded map[*graph.Value]bool
}

// resolve returns the value a fused body's parameter stands for (v itself otherwise).
func (c *compile) resolve(v *graph.Value) *graph.Value {
	if o, ok := c.outer[v]; ok {
		return o
	}
	return v
}

func (c *compile) report(p Progress) {
	if c.opts.Progress != nil {
		c.opts.Progress(p)
	}
}

// stage runs one stage, turning a panic into an error naming the stage and the part.
// A stage that starts or fails after the context ended reports the context's cause
// (a killed C compiler's own error says less).
func (c *compile) stage(name string, run func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %s: stage %s, at %s: BUG: panic: %v", ErrCompile, c.model, name, c.at, r)
		}
	}()
	if err := c.stopped(); err != nil {
		return fmt.Errorf("%w: %s: stage %s not started: %w", ErrCompile, c.model, name, err)
	}
	c.at = ""
	if err := run(); err != nil {
		if errors.Is(err, ErrCompile) {
			return err
		}
		if cause := c.stopped(); cause != nil {
			at := ""
			if c.at != "" {
				at = ", at " + c.at
			}
			if !errors.Is(err, cause) {
				err = cause
			}
			return fmt.Errorf("%w: %s: stage %s%s: %w", ErrCompile, c.model, name, at, err)
		}
		return fmt.Errorf("%w: %s: stage %s: %w", ErrCompile, c.model, name, err)
	}
	return nil
}

func (c *compile) passes(m *graph.Module) error {
	ctx := &passes.Context{Dims: c.opts.Dims, Eval: ref.EvalNode, Check: c.opts.Check, DumpPass: c.opts.DumpPass, Dump: c.opts.Dump, Ctx: c.opts.Context}
	ctx.SplitsAsSlices = c.be.Launches // GPU kernels write one output each
	ctx.IntegerQDQ = c.be.IntegerQDQ
	if !c.opts.Recipe.PlainLayout && c.be.Layout != nil {
		ctx.Layout = c.be.Layout(c.t, c.registry)
	}
	if tx := c.textures(); tx != nil && !c.opts.Recipe.PlainLayout && tx.Layout != nil {
		ctx.Layout = tx.Layout(c.t, c.registry)
	}
	pol, err := c.scopePolicy()
	if err != nil {
		return err
	}
	c.decisions = map[*graph.Value]passes.ScopeDecision{}
	ctx.Scopes, ctx.Scoped = pol, func(d passes.ScopeDecision) {
		c.decisions[d.Value] = d
		if c.opts.Scoped != nil {
			c.opts.Scoped(d)
		}
	}
	p := c.opts.Passes
	if p == nil {
		p = Pipeline(c.opts.Recipe)
	}
	if err := p.Check(); err != nil {
		return err
	}
	if err := p.Run(ctx, m); err != nil {
		return err
	}
	var bad error
	m.Main.Funcs(func(f *graph.Func) {
		for _, n := range f.Nodes {
			for _, o := range n.Outputs {
				if !c.be.allows(o.Type.Scope) && bad == nil {
					bad = fmt.Errorf("%v: output %q is in %v memory; %s", n, o.Name, o.Type.Scope, c.be.ScopesRule)
				}
			}
		}
	})
	return bad
}
