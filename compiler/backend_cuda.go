package compiler

import (
	"context"
	"fmt"

	"github.com/kilnrt/kiln/codegen"
	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/intrin"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/kernels/gpu"
	"github.com/kilnrt/kiln/loopir"
	lpasses "github.com/kilnrt/kiln/loopir/passes"
)

// PTXBuilder is a CUDA device that compiles CUDA C++ to PTX for its architecture
// (devices/cuda's Device, and its Offline compile-only architecture).
type PTXBuilder interface {
	devices.Device
	BuildPTX(source string) ([]byte, error)
}

// CUDABackend is CUDA's table entry: the same GPU strategies, loop-IR pipeline and
// launch geometry as OpenCL's (kernels/gpu; tensors in their plain layout in global
// memory: CUDA has no texture path), printed in the CUDA C++ dialect, every kernel of a
// compile in one translation unit compiled by NVRTC to PTX for the device's
// architecture (through the journal's object cache). The executable carries the PTX,
// which the driver compiles for the GPU when the VM loads it, so a GPU node without
// NVRTC runs executables built elsewhere (kiln prebuild --cuda-arch). Nodes without a
// GPU strategy run on the CPU of Options.CPU.
func CUDABackend() *Backend {
	return &Backend{
		Name:        "cuda",
		Strategies:  gpu.Strategies,
		Lowering:    lpasses.GPUPipeline,
		Launches:    true,
		Dialect:     codegen.CUDADialect(),
		TensorCores: cudaTensorCores,
		Scopes:      []graph.MemScope{graph.ScopeGlobal},
		ScopesRule:  "the CUDA backend keeps every tensor in global memory",
		Check:       checkCUDA,
		Build:       buildCUDA,
		Device:      "cuda",
		Fingerprint: gpuFingerprint,
		Toolchain:   gpuToolchain,
	}
}

// cudaTensorCores is the CUDA backend's path for Recipe.Precision tf32: the tiled matrix
// product with its inner product on the tensor cores (gpu.MatMulMMAStrategy over
// intrin.MMATF32's mma.sync m16n8k8), on sm_80 and later.
func cudaTensorCores(reg *kernels.Registry) []kernels.Strategy {
	var out []kernels.Strategy
	for _, m := range intrin.MMAs() {
		out = append(out, gpu.MatMulMMAStrategy(reg, gpu.WarpMMA{Intrin: m.Intrin, RM: m.RM, RN: m.RN, BK: m.BK,
			RowGroups: intrin.MMARowGroups, ColGroups: intrin.MMAColGroups, Supports: m.Supports,
			Needs: fmt.Sprintf("CUDA sm_%d0 or later", m.MinMajor)}))
	}
	return out
}

func checkCUDA(opts Options) error {
	if err := checkCPU(opts); err != nil {
		return fmt.Errorf("%w (it runs the nodes the GPU does not)", err)
	}
	if opts.GPU == nil {
		return fmt.Errorf("no CUDA device to build kernels for")
	}
	if k := opts.GPU.Info().Kind; k != "cuda" {
		return fmt.Errorf("the GPU device is a %s device, the target is CUDA", k)
	}
	if _, ok := opts.GPU.(PTXBuilder); !ok {
		return fmt.Errorf("the CUDA device %s cannot build kernels", opts.GPU.Info().Name)
	}
	return nil
}

// buildCUDA prints every kernel into one CUDA C++ translation unit and compiles it to
// PTX (from the journal when Options.Cache has it).
func buildCUDA(job *BuildJob) ([]byte, error) {
	pb := job.Options.GPU.(PTXBuilder) // checkCUDA holds
	funcs := make([]*loopir.PrimFunc, len(job.Kernels))
	for i, k := range job.Kernels {
		funcs[i] = k.Func
	}
	src, err := codegen.Emit(codegen.CUDADialect(), job.Emit, funcs...)
	if err != nil {
		return nil, fmt.Errorf("printing %d kernels: %w", len(funcs), err)
	}
	ptx, err := job.Cached(job.Context, "CUDA module", src.Code, false, func(_ context.Context) ([]byte, error) {
		return pb.BuildPTX(src.Code)
	})
	if err != nil {
		return nil, fmt.Errorf("compiling the CUDA module of %d kernels: %w", len(funcs), err)
	}
	for _, k := range job.Kernels {
		job.Built(k.Name)
	}
	return ptx, nil
}
