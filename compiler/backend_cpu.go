package compiler

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"

	"github.com/kilnrt/kiln/codegen"
	"github.com/kilnrt/kiln/graph"
	kcpu "github.com/kilnrt/kiln/kernels/cpu"
	lpasses "github.com/kilnrt/kiln/loopir/passes"
)

// CPUBackend is the CPU's table entry: the kernels/cpu strategies and channel-blocked
// layout policy, the CPU loop-IR pipeline, the C dialect with the thread pool linked
// from the C runtime, each kernel compiled to an object by the C compiler of
// Options.CPU (through the journal's per-kernel cache) and linked into one shared
// object, and every tensor in global memory.
func CPUBackend() *Backend {
	return &Backend{
		Name:        "cpu",
		Strategies:  kcpu.Strategies,
		Layout:      kcpu.LayoutPolicy,
		IntegerQDQ:  kcpu.IntegerQDQ,
		Lowering:    lpasses.CPUPipeline,
		Dialect:     codegen.CDialect(),
		Emit:        codegen.COptions{ExternRuntime: true}, // the pool comes from the C runtime's object
		Scopes:      []graph.MemScope{graph.ScopeGlobal},
		ScopesRule:  "the CPU keeps every tensor in global memory",
		Check:       checkCPU,
		Build:       buildCPU,
		Device:      "cpu",
		Fingerprint: cpuFingerprint,
		Toolchain:   cpuToolchain,
	}
}

func cpuFingerprint(opts Options) string {
	if opts.CPU == nil {
		return ""
	}
	return opts.CPU.Info().Fingerprint
}

func cpuToolchain(opts Options) string {
	if opts.CPU == nil || opts.CPU.Compiler() == nil {
		return "none"
	}
	return opts.CPU.Compiler().Identity()
}

func checkCPU(opts Options) error {
	if opts.CPU == nil {
		return fmt.Errorf("no CPU device to build kernels with")
	}
	return nil
}

// buildCPU compiles every unique kernel to an object, Jobs at a time (from the journal
// when Options.Cache has it), and links them with the C runtime into one shared object.
func buildCPU(job *BuildJob) ([]byte, error) {
	cc := job.Options.CPU.Compiler()
	if cc == nil {
		return nil, fmt.Errorf("the CPU device was opened without a C compiler")
	}
	objs := make([][]byte, len(job.Kernels)+1)
	g, ctx := errgroup.WithContext(job.Context)
	g.SetLimit(job.Options.Jobs)
	g.Go(func() error {
		rt := codegen.CRuntime()
		o, err := job.Cached(ctx, "C runtime", rt, false, func(ctx context.Context) ([]byte, error) {
			return cc.CompileObject(ctx, rt)
		})
		objs[0] = o
		if err != nil {
			return fmt.Errorf("C runtime: %w", err)
		}
		return nil
	})
	for i, k := range job.Kernels {
		g.Go(func() error {
			o, err := job.Cached(ctx, k.Name, k.Code, true, func(ctx context.Context) ([]byte, error) {
				return cc.CompileObject(ctx, k.Code)
			})
			if err != nil {
				return fmt.Errorf("kernel %s (for %s): %w", k.Name, k.Node, err)
			}
			objs[i+1] = o
			job.Built(k.Name)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	so, err := cc.Link(job.Context, objs)
	if err != nil {
		return nil, fmt.Errorf("linking %d kernels: %w", len(job.Kernels), err)
	}
	return so, nil
}
