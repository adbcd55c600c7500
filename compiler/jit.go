package compiler

import (
	"context"

	"github.com/kilnrt/kiln/compilecache"
	"github.com/kilnrt/kiln/devices"
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
	var cpu *devcpu.Device // the CPU backend's device (its Check refuses nil)
	var gpu devices.Device
	if job.Host != nil {
		cpu, _ = job.Host.(*devcpu.Device)
		gpu = job.Device
	} else {
		cpu, _ = job.Device.(*devcpu.Device)
	}
	res, err := Build(job.Module, job.Target, Options{Dims: job.Dims, CPU: cpu, GPU: gpu, Jobs: j.Jobs, Progress: job.Progress, Check: j.Check,
		DumpPass: j.DumpPass, Dump: j.Dump, Recipe: job.Recipe, Context: ctx, Graph: j.Graph, Name: job.Name, Cache: job.Journal, Limits: job.Limits, Tuning: job.Tuning})
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
		{Name: "toolchain", Value: toolchain(t, opts)},
		{Name: "schema", Value: engine.Schema()},
	}}
}

// targetFingerprint is the target's fingerprint and the backend's device's.
func targetFingerprint(t target.Target, opts Options) string {
	s := t.Fingerprint()
	if be, err := opts.backendFor(t.Kind); err == nil {
		if d := be.Fingerprint(opts); d != "" {
			s += " | device " + d
		}
	}
	return s
}

// toolchain names the compilers the backend runs.
func toolchain(t target.Target, opts Options) string {
	be, err := opts.backendFor(t.Kind)
	if err != nil {
		return "none"
	}
	return be.Toolchain(opts)
}

func digestString(s string) string {
	return compilecache.DigestOf([]byte(s)).String()
}
