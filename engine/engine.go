package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kilnrt/kiln/compilecache"
	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

var (
	// ErrNotPrebuilt: the engine has no compiler (a serve-only build) and the journal
	// holds no executable for the request; the message names the missing entry.
	ErrNotPrebuilt = errors.New("no prebuilt executable")
	// ErrTimeout is wrapped (with context.DeadlineExceeded) when Config.Timeout passes
	// before an executable is ready.
	ErrTimeout = errors.New("compile timeout")
)

// Compiler builds one executable: the compiler half (package compiler implements it).
// An engine without one runs prebuilt executables only.
type Compiler interface {
	Compile(ctx context.Context, job *Job) (*Compiled, error)
}

// Job is one compile the engine asks of its Compiler.
type Job struct {
	Name   string        // the model, for errors
	Module *graph.Module // the model as loaded (never modified)
	// Inputs are the concrete input shapes the executable serves (empty: none, the
	// symbolic dims stay free and it serves every shape); Dims binds the symbols they
	// fix.
	Inputs map[string][]int64
	Dims   map[string]int64
	Recipe Recipe
	Target target.Target
	Device devices.Device // the device the kernels are built for and run on
	// Host is the CPU when Device is a GPU: it runs the nodes without a GPU kernel
	// (nil when Device is the CPU)
	Host     devices.Device
	Journal  *compilecache.Journal // keeps single kernels' object code (nil: none)
	Limits   vm.Limits
	Progress func(Progress) // nil: no reports
	// Tuning is the tuning records to apply (nil: the default schedules).
	Tuning *Tuning
}

// Compiled is a Compiler's result.
type Compiled struct {
	Exe   *vm.Executable
	Stats Stats
}

// Config configures an Engine.
type Config struct {
	// Target is what executables are compiled for (part of every key); Device is
	// where they run (its fingerprint is part of the key too).
	Target target.Target
	Device devices.Device
	// Host is the CPU device when Target is a GPU (required then): the executable's
	// device 0, which runs what the GPU does not (its fingerprint is part of the key).
	Host devices.Device
	// Journal keeps executables (nil: every executable is compiled, nothing kept).
	Journal *compilecache.Journal
	// Compiler builds executables the journal lacks (nil: serve-only, a miss is
	// ErrNotPrebuilt).
	Compiler Compiler
	// Recipe is every option that changes the code (the zero value: the default build).
	Recipe Recipe
	// Limits bound one inference's memory (zero fields: vm.DefaultLimits).
	Limits vm.Limits
	// Timeout bounds one executable: the wait for another process's compile, the
	// compile, the load (0: none).
	Timeout time.Duration
	// Builtins are the VM's builtin functions (nil: vm.StdBuiltins).
	Builtins map[string]vm.Builtin
	// NoTuning builds with the default schedules, ignoring the journal's tuning
	// records (the key's tuning component is then "none").
	NoTuning bool
	// Records, when not nil, are the tuning records to apply instead of the journal's
	// (those of other targets and devices are ignored all the same).
	Records []compilecache.TuningRecord
}

// Engine owns "model → executable through the journal → loaded VM" for one target and
// recipe. It is safe for concurrent use; the journal serializes compiles of one key
// across processes.
type Engine struct{ cfg Config }

// New returns an engine; Target and Device are required.
func New(cfg Config) (*Engine, error) {
	if cfg.Device == nil {
		return nil, errors.New("engine: no device to run executables on")
	}
	if (cfg.Target.Kind != target.CPU) != (cfg.Host != nil) {
		return nil, fmt.Errorf("engine: a %v target needs the CPU as host device exactly when it is a GPU", cfg.Target.Kind)
	}
	if cfg.Builtins == nil {
		cfg.Builtins = vm.StdBuiltins()
	}
	return &Engine{cfg: cfg}, nil
}

// Open reads a model version's file once (see the package function Open).
func (e *Engine) Open(name, path string) (*Model, error) { return Open(name, path) }

// JournalStats are the journal's counters (zero without a journal).
func (e *Engine) JournalStats() compilecache.Stats {
	if e.cfg.Journal == nil {
		return compilecache.Stats{}
	}
	return e.cfg.Journal.Stats()
}

// Target is the engine's target; Recipe its recipe; Compiles whether it can compile.
func (e *Engine) Target() target.Target { return e.cfg.Target }
func (e *Engine) Recipe() Recipe        { return e.cfg.Recipe }
func (e *Engine) Compiles() bool        { return e.cfg.Compiler != nil }

// Built is an executable the engine obtained.
type Built struct {
	Exe      *vm.Executable
	Stats    *Stats // the compile's statistics; nil when it came from the journal
	Outcome  compilecache.Outcome
	Key      compilecache.Key
	Miss     compilecache.MissCause // why the journal had no usable entry (MissNone on a hit)
	Material compilecache.Material
	Took     time.Duration
}

// Compiled reports whether the executable was compiled (not taken from the journal).
func (b *Built) Compiled() bool { return b.Stats != nil }

// Executable returns m's executable for the input shapes (nil or empty: the generic
// one, every shape), from the journal or compiled (once per key across the processes
// sharing the journal) and published. progress, when set, follows the compile.
func (e *Engine) Executable(ctx context.Context, m *Model, shapes map[string][]int64, progress func(Progress)) (*Built, error) {
	if shapes == nil {
		shapes = map[string][]int64{}
	}
	ctx, cancel := WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	start := time.Now()
	out := &Built{}
	recs, tuning := e.tuning()
	compileWith := func(ctx context.Context, tuning *Tuning) (*Compiled, error) {
		if e.cfg.Compiler == nil {
			return nil, fmt.Errorf("%w: model %q: this kiln runs prebuilt executables only", ErrNotPrebuilt, m.Name)
		}
		mod, err := m.load()
		if err != nil {
			return nil, err
		}
		dims, err := DimsFromShapes(mod, shapes)
		if err != nil {
			return nil, fmt.Errorf("model %q: %w", m.Name, err)
		}
		c, err := e.cfg.Compiler.Compile(ctx, &Job{Name: m.Name, Module: mod, Inputs: shapes, Dims: dims, Recipe: e.cfg.Recipe,
			Target: e.cfg.Target, Device: e.cfg.Device, Host: e.cfg.Host, Journal: e.cfg.Journal, Limits: e.cfg.Limits, Progress: progress, Tuning: tuning})
		if err != nil {
			return nil, err
		}
		out.Stats = &c.Stats
		return c, nil
	}
	compile := func(ctx context.Context) (*Compiled, error) { return compileWith(ctx, tuning) }
	if e.cfg.Journal == nil || !m.cacheable() {
		c, err := compile(ctx)
		if err != nil {
			return nil, err
		}
		out.Exe, out.Outcome = c.Exe, compilecache.Uncached
		out.Miss = compilecache.MissCause{Kind: compilecache.MissOff, Detail: "not cached (no journal, or an in-memory model)"}
		out.Took = time.Since(start)
		return out, nil
	}
	recs, pre, err := e.modelRecords(ctx, m, shapes, recs, compileWith)
	if err != nil {
		return nil, err
	}
	tuning = tuningOf(recs)
	if pre != nil { // compiled while listing the model's workloads
		compile = func(context.Context) (*Compiled, error) { return pre, nil }
		out.Exe = pre.Exe // the journal's copy need not be decoded
	}
	out.Material = e.material(m, shapes, recs)
	if e.cfg.Compiler == nil {
		err = e.prebuilt(m, shapes, out)
	} else {
		err = e.cached(ctx, m, out, compile)
	}
	if err != nil {
		return nil, err
	}
	if pre != nil {
		out.Outcome = compilecache.Built
		if out.Miss.Kind == compilecache.MissNone {
			out.Miss = compilecache.MissCause{Kind: compilecache.MissAbsent, Detail: "compiled to list the model's workloads for its tuning records"}
		}
	}
	out.Took = time.Since(start)
	return out, nil
}

// cached looks the executable up in the journal, compiling it on a miss. An entry that
// passes the journal's checksums but does not decode is invalidated and built again
// (once).
func (e *Engine) cached(ctx context.Context, m *Model, out *Built, compile func(context.Context) (*Compiled, error)) error {
	j := e.cfg.Journal
	build := func(ctx context.Context) ([]byte, int, error) {
		c, err := compile(ctx)
		if err != nil {
			return nil, 0, err
		}
		out.Exe = c.Exe
		blob, err := c.Exe.MarshalBinary()
		if err != nil {
			return nil, 0, err
		}
		e.keepPlan(m, out.Material, &c.Stats)
		e.keepWorkloads(out.Material, &c.Stats)
		return blob, dataOffset(blob), nil
	}
	var dropped compilecache.MissCause
	for attempt := 0; ; attempt++ {
		r, err := j.Do(ctx, out.Material, m.Name, build)
		if err != nil {
			return err
		}
		out.Outcome, out.Key, out.Miss = r.Outcome, r.Key, r.Miss
		if dropped.Kind != compilecache.MissNone {
			out.Miss = dropped
		}
		if out.Exe != nil {
			return nil
		}
		if out.Exe, err = decodeBlob(r.Blob); err == nil {
			return nil
		}
		cause := "the entry does not decode: " + err.Error()
		if attempt > 0 {
			return fmt.Errorf("model %q: %s", m.Name, cause)
		}
		j.Invalidate(out.Material, cause)
		dropped = compilecache.MissCause{Kind: compilecache.MissInvalidated, Detail: cause}
	}
}

// prebuilt takes the executable from the journal only: a miss is ErrNotPrebuilt naming
// the entry and why the journal has none.
func (e *Engine) prebuilt(m *Model, shapes map[string][]int64, out *Built) error {
	out.Key = out.Material.Key()
	b, err := e.cfg.Journal.Get(out.Material)
	if err != nil {
		what := "the generic executable"
		if len(shapes) > 0 {
			what = "inputs " + canonicalShapes(shapes)
		}
		why := err.Error()
		if miss, ok := errors.AsType[*compilecache.MissError](err); ok {
			out.Miss, why = miss.Cause, miss.Cause.String()
		}
		return fmt.Errorf("%w: model %q (%s): journal entry %s: %s; this kiln does not compile: fill the journal with `kiln prebuild`",
			ErrNotPrebuilt, m.Name, what, out.Key.Short(), why)
	}
	exe, err := decodeBlob(b)
	if err != nil {
		return fmt.Errorf("%w: model %q: journal entry %s does not decode: %v", ErrNotPrebuilt, m.Name, out.Key.Short(), err)
	}
	out.Exe, out.Outcome = exe, compilecache.Hit
	return nil
}

// Runner runs a loaded executable: a *vm.VM (a test engine may run models otherwise).
type Runner interface {
	Run(ctx context.Context, inputs []*tensor.Tensor) ([]*tensor.Tensor, error)
	MemoryStats() vm.MemoryStats
	Close() error
}

// ValueRunner is a Runner whose entry may take and return sequences and optionals
// (vm.SeqValue, vm.OptValue; the executable's signature says which): a *vm.VM.
type ValueRunner interface {
	Runner
	RunValues(ctx context.Context, inputs []any) ([]any, error)
}

// Loaded is an executable loaded on the engine's device, ready to run.
type Loaded struct {
	*Built
	Runner  Runner
	Outputs []string // the results' names, in order
}

// Load returns m's executable for the shapes (nil: generic) loaded into a VM.
func (e *Engine) Load(ctx context.Context, m *Model, shapes map[string][]int64, progress func(Progress)) (*Loaded, error) {
	b, err := e.Executable(ctx, m, shapes, progress)
	if err != nil {
		return nil, err
	}
	machine, err := e.LoadExecutable(e.finished(ctx, b.Exe))
	if err != nil {
		return nil, fmt.Errorf("model %q: loading its executable: %w", m.Name, err)
	}
	outs := make([]string, len(b.Exe.Outputs))
	for i, o := range b.Exe.Outputs {
		outs[i] = o.Name
	}
	return &Loaded{Built: b, Runner: machine, Outputs: outs}, nil
}

// LoadExecutable loads an executable (e.g. a .kiln file) on the engine's devices:
// the device, or the host CPU and the GPU.
func (e *Engine) LoadExecutable(exe *vm.Executable) (*vm.VM, error) {
	return vm.LoadWith(exe, e.Devices(), e.cfg.Builtins, vm.Options{Limits: e.cfg.Limits})
}

// Devices are the executable's devices in order: the device alone, or the host CPU
// (device 0) and the GPU (device 1).
func (e *Engine) Devices() []devices.Device {
	if e.cfg.Host != nil {
		return []devices.Device{e.cfg.Host, e.cfg.Device}
	}
	return []devices.Device{e.cfg.Device}
}

// WithTimeout bounds ctx by d (0: no bound) with a cause wrapping ErrTimeout and
// context.DeadlineExceeded.
func WithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeoutCause(ctx, d, fmt.Errorf("%w of %v passed (%w)", ErrTimeout, d, context.DeadlineExceeded))
}
