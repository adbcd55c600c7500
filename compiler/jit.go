package compiler

import (
	"context"
	"fmt"

	"github.com/kilnrt/kiln/compilecache"
	devcpu "github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/graph/passes"
	"github.com/kilnrt/kiln/target"
)

// Pipeline is the graph pipeline a recipe compiles with: passes.Level of its level,
// without fuse-ops when NoFusion. The recipe's String names the same choice in keys.
func Pipeline(r engine.Recipe) passes.Pipeline {
	p := passes.Level(r.Level.Int())
	if r.NoFusion {
		p = p.Without("fuse-ops")
	}
	return p
}

// JIT is the compiler as the engine's Compiler: it compiles one job with the options
// that do not change the code.
type JIT struct {
	// Jobs is how many C compiles run at once (0: one per core).
	Jobs int
	// Check verifies the IR after every graph pass.
	Check bool
	// DumpPass names a graph pass whose before/after text goes to Dump.
	DumpPass string
	Dump     func(pass, before, after string)
	// Graph bounds the graph accepted (zero fields: the defaults).
	Graph GraphLimits
}

// Compile implements engine.Compiler.
func (j JIT) Compile(ctx context.Context, job *engine.Job) (*engine.Compiled, error) {
	cpu, err := cpuOf(job)
	if err != nil {
		return nil, err
	}
	res, err := Build(job.Module, job.Target, Options{Dims: job.Dims, CPU: cpu, Jobs: j.Jobs, Progress: job.Progress, Check: j.Check,
		DumpPass: j.DumpPass, Dump: j.Dump, Recipe: job.Recipe, Context: ctx, Graph: j.Graph, Name: job.Name, Cache: job.Journal, Limits: job.Limits})
	if err != nil {
		return nil, err
	}
	return &engine.Compiled{Exe: res.Exe, Stats: res.Stats}, nil
}

// kernelMaterial keys one kernel's object code: its source (which the lowered function
// and the C emitter fully determine), the target and the toolchain.
func kernelMaterial(code string, t target.Target, opts Options) compilecache.Material {
	return compilecache.Material{Kind: compilecache.KindKernel, Parts: []compilecache.Component{
		{Name: "source", Value: digestString(code)},
		{Name: "target", Value: targetFingerprint(t, opts)},
		{Name: "toolchain", Value: toolchain(opts)},
		{Name: "schema", Value: engine.Schema()},
	}}
}

func targetFingerprint(t target.Target, opts Options) string {
	s := t.Fingerprint()
	if opts.CPU != nil {
		s += " | device " + opts.CPU.Info().Fingerprint
	}
	return s
}

func toolchain(opts Options) string {
	if opts.CPU == nil || opts.CPU.Compiler() == nil {
		return "none"
	}
	return opts.CPU.Compiler().Identity()
}

func digestString(s string) string {
	return compilecache.DigestOf([]byte(s)).String()
}

// cpuOf is the job's device as the CPU device the C kernels are built with.
func cpuOf(job *engine.Job) (*devcpu.Device, error) {
	cpu, ok := job.Device.(*devcpu.Device)
	if !ok || cpu == nil {
		return nil, fmt.Errorf("%w: model %q: target %v needs a CPU device, got %T", ErrCompile, job.Name, job.Target.Kind, job.Device)
	}
	return cpu, nil
}
