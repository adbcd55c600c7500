package compiler

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/kilnrt/kiln/codegen"
	"github.com/kilnrt/kiln/compilecache"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/graph/passes"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir"
	lpasses "github.com/kilnrt/kiln/loopir/passes"
	"github.com/kilnrt/kiln/target"
)

// ErrNoBackend: the backend table has no entry for the target's kind.
var ErrNoBackend = errors.New("no backend")

// Backend is everything the compiler does differently for one kind of target. Build
// looks it up once from the target's kind (Backends); every target-specific step of a
// compile reads it, and nothing else in the compiler tests the kind. A new kind of
// target is one new Backend value with its strategies.
type Backend struct {
	// Name names the backend in errors and reports ("cpu").
	Name string
	// Strategies builds the kernel strategy table from the op registry: the schedule
	// rules the lower stage picks from, per op.
	Strategies func(reg *kernels.Registry) *kernels.Strategies
	// Layout is alter-layout's policy for t, consistent with Strategies (nil: every
	// tensor keeps its plain layout). Options.Recipe.PlainLayout turns it off.
	Layout func(t target.Target, reg *kernels.Registry) *passes.LayoutPolicy
	// IntegerQDQ picks the convolutions in the QDQ form that run as QLinearConv
	// (passes.Context.IntegerQDQ); nil: none (they run as the float operators).
	IntegerQDQ func(conv *graph.Node) bool
	// Lowering is the loop-IR pipeline run on every scheduled kernel before emission.
	Lowering func() lpasses.Pipeline
	// Launches: kernels run on a grid of thread blocks, whose geometry is derived from
	// their bound loops and verified against the target's GPU limits
	// (loopir/passes.DeriveLaunch, VerifyLaunch) and carried in the kernel table.
	Launches bool
	// Dialect prints the lowered kernels (codegen.Emit) with the options Emit
	// (BoundsCheck is Options.Recipe.BoundsCheck).
	Dialect *codegen.Dialect
	Emit    codegen.COptions
	// Textures is the backend's texture path (nil: none): used when the target's
	// device has images and Options.Recipe.NoTextures is off.
	Textures *Textures
	// TensorCores are the backend's strategies for Options.Recipe.Precision tf32 (nil:
	// the backend has none and builds exact float32), tried before its own for every
	// op; each refuses (kernels.ErrNotApplicable) what it cannot take, so that the
	// float32 rules build it.
	TensorCores func(reg *kernels.Registry) []kernels.Strategy
	// Scopes are the memory scopes a tensor may be in after the graph passes, with the
	// rule's reason for the error; a tensor in another scope fails the compile.
	Scopes     []graph.MemScope
	ScopesRule string
	// Check reports what opts lack for this backend, before any work (nil: nothing).
	Check func(opts Options) error
	// Build turns the unique kernels' sources into the binary the executable carries.
	Build func(job *BuildJob) ([]byte, error)
	// Device names the binary's device in the executable (vm.Binary.Device).
	Device string
	// Fingerprint identifies the device the binary is built for (vm.Binary.Fingerprint,
	// and the device part of the journal keys; "" when opts name no device).
	Fingerprint func(opts Options) string
	// Toolchain identifies the compilers Build runs, for the journal keys ("none" when
	// opts name none).
	Toolchain func(opts Options) string
}

// Textures is a backend's path through image2d textures (docs/ARCHITECTURE.md,
// "Memory scopes and layouts"): alter-layout's policy that blocks channels by four,
// annotate-scopes' policy (TextureScopes: the texture kernels' applicability and the
// device's image limits, lowered by Options.Recipe.TextureLimit), and the texture
// strategies, tried before the backend's own for every op. The three must agree: a
// value annotate-scopes puts in a texture is written and read by texture kernels, or
// the emitter copies it between its image and a buffer (never a wrong kernel).
type Textures struct {
	Layout     func(t target.Target, reg *kernels.Registry) *passes.LayoutPolicy
	Scopes     func(t target.Target, reg *kernels.Registry) *passes.ScopePolicy
	Strategies func(reg *kernels.Registry) []kernels.Strategy
}

// Backends is the backend table, by target kind.
type Backends map[target.Kind]*Backend

// DefaultBackends is the table a compile uses unless Options.Backends replaces it: the
// CPU, OpenCL and CUDA.
func DefaultBackends() Backends {
	return Backends{target.CPU: CPUBackend(), target.OpenCL: OpenCLBackend(), target.CUDA: CUDABackend()}
}

// backendFor looks the target kind k up in opts.Backends (nil: DefaultBackends).
func (opts Options) backendFor(k target.Kind) (*Backend, error) {
	table := opts.Backends
	if table == nil {
		table = DefaultBackends()
	}
	return table.For(k)
}

// For returns the backend of kind k; a kind without one is an error wrapping
// ErrNoBackend.
func (bs Backends) For(k target.Kind) (*Backend, error) {
	b, ok := bs[k]
	if !ok || b == nil {
		return nil, fmt.Errorf("%w for target %v", ErrNoBackend, k)
	}
	return b, nil
}

// allows reports whether a tensor may be in memory scope s.
func (b *Backend) allows(s graph.MemScope) bool {
	for _, x := range b.Scopes {
		if x == s {
			return true
		}
	}
	return false
}

// KernelSource is one unique kernel's translation unit.
type KernelSource struct {
	Name string // its entry point
	Code string
	Node string           // the first node that uses it, for errors
	Func *loopir.PrimFunc // the lowered function Code prints, named Name
}

// BuildJob is a compile's build stage as a backend's Build sees it: the unique kernels,
// the options, and the journal's per-unit object cache.
type BuildJob struct {
	Context context.Context
	Target  target.Target
	Options Options
	Kernels []KernelSource
	Emit    codegen.COptions // the printer's options the sources were emitted with

	c    *compile
	mu   sync.Mutex
	done int
}

// Cached returns the object code of one translation unit: from the journal
// (Options.Cache) when it holds one for the unit's source, the target and the
// toolchain, else from compile, published for the next time. A hit on a kernel (not on
// a runtime unit) counts in Stats.KernelsCached.
func (j *BuildJob) Cached(ctx context.Context, name, code string, kernel bool, compile func(context.Context) ([]byte, error)) ([]byte, error) {
	cache := j.Options.Cache
	if cache == nil || cache.Policy() == compilecache.PolicyOff {
		return compile(ctx)
	}
	r, err := cache.Do(ctx, kernelMaterial(code, j.Target, j.Options), name, func(ctx context.Context) ([]byte, int, error) {
		o, err := compile(ctx)
		return o, 0, err
	})
	if err != nil {
		return nil, err
	}
	if kernel && (r.Outcome == compilecache.Hit || r.Outcome == compilecache.Waited) {
		j.c.kernelHits.Add(1)
	}
	return r.Blob.Bytes(), nil
}

// Built reports one kernel built (Progress); safe from concurrent goroutines.
func (j *BuildJob) Built(name string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.done++
	j.c.report(Progress{Stage: "build", Done: j.done, Total: len(j.Kernels), Detail: name})
}
