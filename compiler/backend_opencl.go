package compiler

import (
	"context"
	"fmt"

	"github.com/kilnrt/kiln/codegen"
	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/graph/passes"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/kernels/gpu"
	"github.com/kilnrt/kiln/loopir"
	lpasses "github.com/kilnrt/kiln/loopir/passes"
	"github.com/kilnrt/kiln/target"
)

// ProgramBuilder is a GPU device that compiles its own language: Build turns a
// translation unit into the binary its Load takes (devices/opencl's Device).
type ProgramBuilder interface {
	devices.Device
	Build(source, options string) ([]byte, error)
}

// OpenCLBackend is OpenCL's table entry: the GPU strategies of kernels/gpu (tensors in
// their plain layout and in global memory), the texture path where the device has
// images (OpenCLTextures), the GPU loop-IR pipeline, launch geometry derived from
// the bound loops and verified against the device's limits, the OpenCL C dialect, and
// every kernel of a compile in one program built by the device of Options.GPU (through
// the journal's object cache), whose program binary the executable carries. Nodes
// without a GPU strategy run on the CPU of Options.CPU (the host backend).
func OpenCLBackend() *Backend {
	return &Backend{
		Name:        "opencl",
		Strategies:  gpu.Strategies,
		Lowering:    lpasses.GPUPipeline,
		Launches:    true,
		Dialect:     codegen.OpenCLDialect(),
		Textures:    OpenCLTextures(),
		Scopes:      []graph.MemScope{graph.ScopeGlobal, graph.ScopeTexture},
		ScopesRule:  "the OpenCL backend keeps tensors in global memory or image2d textures",
		Check:       checkOpenCL,
		Build:       buildOpenCL,
		Device:      "opencl",
		Fingerprint: gpuFingerprint,
		Toolchain:   gpuToolchain,
	}
}

// OpenCLTextures is OpenCL's texture path: activations blocked by four channels
// (NCHW4c) around the convolutions and elementwise ops the texture kernels take
// (gpu.TextureLayoutPolicy), in image2d textures where those kernels write and read
// them and the images fit the device (gpu.TextureWrites, gpu.TextureReads), weights in
// OIHW4o textures; the texture convolution, pooling, concatenation and injective rule
// before the GPU strategies.
func OpenCLTextures() *Textures {
	return &Textures{
		Layout: func(_ target.Target, reg *kernels.Registry) *passes.LayoutPolicy { return gpu.TextureLayoutPolicy(reg) },
		Scopes: func(t target.Target, reg *kernels.Registry) *passes.ScopePolicy {
			return TextureScopes(t, gpu.TextureWrites(reg), gpu.TextureReads(reg))
		},
		Strategies: func(reg *kernels.Registry) []kernels.Strategy {
			return []kernels.Strategy{gpu.TextureConvStrategy(), gpu.TexturePoolStrategy(), gpu.TextureConcatStrategy(), gpu.TextureInjectiveStrategy(reg)}
		},
	}
}

func gpuFingerprint(opts Options) string {
	if opts.GPU == nil {
		return ""
	}
	return opts.GPU.Info().Fingerprint
}

func gpuToolchain(opts Options) string {
	if opts.GPU == nil || opts.GPU.Info().Toolchain == "" {
		return "none"
	}
	return opts.GPU.Info().Toolchain
}

func checkOpenCL(opts Options) error {
	if err := checkCPU(opts); err != nil {
		return fmt.Errorf("%w (it runs the nodes the GPU does not)", err)
	}
	if opts.GPU == nil {
		return fmt.Errorf("no OpenCL device to build kernels with")
	}
	if k := opts.GPU.Info().Kind; k != "opencl" {
		return fmt.Errorf("the GPU device is a %s device, the target is OpenCL", k)
	}
	if _, ok := opts.GPU.(ProgramBuilder); !ok {
		return fmt.Errorf("the OpenCL device %s cannot build programs", opts.GPU.Info().Name)
	}
	return nil
}

// buildOpenCL prints every kernel into one OpenCL C program and builds it on the
// device (from the journal when Options.Cache has the program).
func buildOpenCL(job *BuildJob) ([]byte, error) {
	pb := job.Options.GPU.(ProgramBuilder) // checkOpenCL holds
	funcs := make([]*loopir.PrimFunc, len(job.Kernels))
	for i, k := range job.Kernels {
		funcs[i] = k.Func
	}
	src, err := codegen.Emit(codegen.OpenCLDialect(), job.Emit, funcs...)
	if err != nil {
		return nil, fmt.Errorf("printing %d kernels: %w", len(funcs), err)
	}
	bin, err := job.Cached(job.Context, "OpenCL program", src.Code, false, func(_ context.Context) ([]byte, error) {
		// -w: the program is generated; a driver's warnings about its style (a
		// constant operand of &&) would only be noise on the user's terminal
		return pb.Build(src.Code, "-w")
	})
	if err != nil {
		return nil, fmt.Errorf("building the OpenCL program of %d kernels: %w", len(funcs), err)
	}
	for _, k := range job.Kernels {
		job.Built(k.Name)
	}
	return bin, nil
}
