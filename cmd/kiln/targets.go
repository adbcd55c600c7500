package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kilnrt/kiln/devices"
	devcpu "github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/devices/cuda"
	"github.com/kilnrt/kiln/devices/opencl"
	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/vm"
)

// targetFlags are --target and --device (compile, run, bench, conformance, prebuild,
// inspect).
type targetFlags struct {
	target string // cpu, opencl or cuda ("": from --device, else cpu)
	device string // cpu, opencl:N, cuda:N ("": the target's default device)
	// cudaArch compiles for a CUDA architecture with no GPU (--cuda-arch: compile and
	// prebuild only; prebuild takes a comma-separated list)
	cudaArch string
	// profiling opens a GPU to time kernels on the device (bench --profile)
	profiling bool
	// textures (on, off) and textureLimit steer the OpenCL texture path
	textures     string
	textureLimit int64
	// precision (fp32, tf32) is the recipe's arithmetic for float32 matrix products
	precision string
}

func (tf *targetFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&tf.target, "target", "", "what to compile for: cpu, opencl or cuda (GPU kernels where the GPU strategies build them, the rest on this CPU) (default: the --device's kind, else cpu)")
	f.StringVar(&tf.device, "device", "", "the device to run on: cpu, opencl:N or cuda:N (N as kiln devices numbers them; default: OpenCL's first GPU, else its first device; CUDA's device 0)")
	f.StringVar(&tf.textures, "textures", "on", "with --target opencl: on keeps activations and weights of the convolutions and elementwise ops the texture kernels take in image2d textures (where the device has images), off keeps every tensor in buffers")
	f.StringVar(&tf.precision, "precision", "fp32", "float32 matrix products: fp32 (exact) or tf32 (with --target cuda on sm_80 and later: tensor cores, inputs rounded to TF32's 10-bit mantissa, float32 accumulation, relative error about 1e-3; other targets build fp32)")
	f.Int64Var(&tf.textureLimit, "texture-limit", 0, "with --target opencl: the largest image side in texels a tensor may take (0: the device's limits); larger tensors stay in buffers, for testing the fallback")
}

// deviceSet is where a command compiles for and runs: the CPU alone, or a GPU with
// the CPU as host (the executable's device 0).
type deviceSet struct {
	target target.Target
	cpu    *devcpu.Device
	gpu    devices.Device // nil for the CPU target
	// noTextures, textureLimit and precision go into the compile recipe (--textures,
	// --texture-limit, --precision)
	noTextures   bool
	textureLimit int64
	precision    engine.Precision
}

// Close closes the devices.
func (ds *deviceSet) Close() {
	if ds.gpu != nil {
		ds.gpu.Close()
	}
	ds.cpu.Close()
}

// config is the engine configuration of the set's target and devices.
func (ds *deviceSet) config() engine.Config {
	if ds.gpu == nil {
		return engine.Config{Target: ds.target, Device: ds.cpu}
	}
	return engine.Config{Target: ds.target, Device: ds.gpu, Host: ds.cpu}
}

// describe names the target and device for messages: "cpu", "opencl (pthread-haswell on
// Portable Computing Language)".
func (ds *deviceSet) describe() string {
	if ds.gpu == nil {
		return "cpu"
	}
	return fmt.Sprintf("%v (%s)", ds.target.Kind, ds.gpu.Info().Name)
}

// open opens the set the flags name, with the CPU's threads. With needCompiler false
// a missing C compiler is not an error (prebuilt executables run without one).
func (tf targetFlags) open(threads int, needCompiler bool) (*deviceSet, error) {
	kind, index, err := tf.parse()
	if err != nil {
		return nil, usageError{err}
	}
	if tf.textures != "" && tf.textures != "on" && tf.textures != "off" {
		return nil, usageError{fmt.Errorf("--textures %q: want on or off", tf.textures)}
	}
	if tf.textureLimit < 0 {
		return nil, usageError{fmt.Errorf("--texture-limit %d: want a number of texels, or 0 for the device's limits", tf.textureLimit)}
	}
	precision, err := engine.ParsePrecision(tf.precision)
	if err != nil {
		return nil, usageError{fmt.Errorf("--precision: %w", err)}
	}
	cpu, err := openCPU(threads, needCompiler)
	if err != nil {
		return nil, err
	}
	ds := &deviceSet{target: target.Host(), cpu: cpu, noTextures: tf.textures == "off", textureLimit: tf.textureLimit, precision: precision}
	if kind == target.CPU {
		if tf.cudaArch != "" {
			cpu.Close()
			return nil, usageError{fmt.Errorf("--cuda-arch %s: only with --target cuda", tf.cudaArch)}
		}
		return ds, nil
	}
	gpu, err := tf.openGPU(kind, index)
	if err != nil {
		cpu.Close()
		return nil, err
	}
	if ds.target, err = gpu.Target(); err != nil {
		gpu.Close()
		cpu.Close()
		return nil, err
	}
	ds.gpu = gpu
	return ds, nil
}

// gpuDevice is a GPU that describes itself as a compile target.
type gpuDevice interface {
	devices.Device
	Target() (target.Target, error)
}

// openGPU opens the GPU of kind (OpenCL or CUDA) numbered index (-1: the default), or
// the compile-only CUDA architecture of --cuda-arch.
func (tf targetFlags) openGPU(kind target.Kind, index int) (gpuDevice, error) {
	if tf.cudaArch != "" {
		if kind != target.CUDA {
			return nil, usageError{fmt.Errorf("--cuda-arch %s: only with --target cuda", tf.cudaArch)}
		}
		if tf.device != "" {
			return nil, usageError{fmt.Errorf("--cuda-arch %s compiles without a GPU: drop --device %s", tf.cudaArch, tf.device)}
		}
		if strings.Contains(tf.cudaArch, ",") {
			return nil, usageError{fmt.Errorf("--cuda-arch %s: one architecture here (kiln prebuild takes several)", tf.cudaArch)}
		}
		o, err := cuda.NewOffline(tf.cudaArch)
		if errors.Is(err, devices.ErrUnavailable) {
			return nil, fmt.Errorf("--cuda-arch %s: %w (install NVRTC, e.g. Debian's libnvrtc11.2 from non-free, or set KILN_NVRTC)", tf.cudaArch, err)
		}
		if err != nil {
			return nil, usageError{fmt.Errorf("--cuda-arch: %w", err)}
		}
		return o, nil
	}
	if kind == target.OpenCL {
		return openOpenCL(index, tf.profiling)
	}
	return openCUDA(index, tf.profiling)
}

// openCUDA opens CUDA device index (-1: device 0), with event timing when profiling.
func openCUDA(index int, profiling bool) (*cuda.Device, error) {
	d, err := cuda.Open(cuda.Options{Ordinal: max(index, 0), Profiling: profiling})
	if errors.Is(err, devices.ErrUnavailable) {
		return nil, fmt.Errorf("--target cuda: %w (kiln needs the NVIDIA driver's libcuda.so.1 and a GPU; --cuda-arch compiles without one)", err)
	}
	return d, err
}

// parse reads the flags: the target kind and the device index (-1: the default).
func (tf targetFlags) parse() (target.Kind, int, error) {
	devKind, index := "", -1
	if tf.device != "" {
		k, n, found := strings.Cut(tf.device, ":")
		devKind = k
		if found {
			i, err := strconv.Atoi(n)
			if err != nil || i < 0 {
				return 0, 0, fmt.Errorf("--device %q: want cpu, opencl:N or cuda:N with N a device number (kiln devices lists them)", tf.device)
			}
			index = i
		}
		if devKind != "cpu" && devKind != "opencl" && devKind != "cuda" {
			return 0, 0, fmt.Errorf("--device %q: want cpu, opencl:N or cuda:N (kiln devices lists them)", tf.device)
		}
		if devKind == "cpu" && found {
			return 0, 0, fmt.Errorf("--device %q: the CPU has no number", tf.device)
		}
	}
	name := tf.target
	if name == "" {
		name = devKind
	}
	if name == "" && tf.cudaArch != "" {
		name = "cuda" // --cuda-arch alone compiles for CUDA
	}
	if name == "" {
		name = "cpu"
	}
	kinds := map[string]target.Kind{"cpu": target.CPU, "opencl": target.OpenCL, "cuda": target.CUDA}
	kind, ok := kinds[name]
	if !ok {
		return 0, 0, fmt.Errorf("--target %q: want cpu, opencl or cuda", name)
	}
	if devKind != "" && devKind != name {
		return 0, 0, fmt.Errorf("--device %q is not a %s device (--target %s)", tf.device, name, name)
	}
	return kind, index, nil
}

// openCLDevice is one OpenCL device as kiln numbers them: every platform's devices in
// the loader's order.
type openCLDevice struct {
	platform opencl.Platform
	device   opencl.DeviceInfo
}

// openCLDevices lists the OpenCL devices in kiln's numbering.
func openCLDevices() ([]openCLDevice, error) {
	ps, err := opencl.List()
	if err != nil {
		return nil, err
	}
	var out []openCLDevice
	for _, p := range ps {
		for _, d := range p.Devices {
			out = append(out, openCLDevice{platform: p, device: d})
		}
	}
	return out, nil
}

// openOpenCL opens OpenCL device index (-1: the default: the first GPU, else the
// first device), with profiling events when profiling.
func openOpenCL(index int, profiling bool) (*opencl.Device, error) {
	if index < 0 {
		o, err := opencl.Default()
		if errors.Is(err, devices.ErrUnavailable) {
			return nil, fmt.Errorf("--target opencl: %w (install an OpenCL driver, e.g. Debian's pocl-opencl-icd, and the ICD loader ocl-icd-libopencl1)", err)
		}
		if err != nil {
			return nil, err
		}
		o.Profiling = profiling
		return opencl.Open(o)
	}
	all, err := openCLDevices()
	if err != nil {
		return nil, fmt.Errorf("--device opencl:%d: %w", index, err)
	}
	if index >= len(all) {
		return nil, usageError{fmt.Errorf("--device opencl:%d: there are %d OpenCL devices (kiln devices lists them)", index, len(all))}
	}
	d := all[index]
	return opencl.Open(opencl.Options{Platform: d.platform.Index, Device: d.device.Index, Profiling: profiling})
}

// forExecutable is tf with the target the executable was built for when tf names
// none: an executable with an OpenCL (CUDA) binary runs on OpenCL (CUDA).
func (tf targetFlags) forExecutable(exe *vm.Executable) targetFlags {
	if tf.target != "" || tf.device != "" {
		return tf
	}
	for _, b := range exe.Binaries {
		if b.Device == "opencl" || b.Device == "cuda" {
			tf.target = b.Device
		}
	}
	return tf
}

// registerCUDAArch adds --cuda-arch (compile and prebuild: commands that build without
// running); multi lets it take a comma-separated list.
func (tf *targetFlags) registerCUDAArch(cmd *cobra.Command, multi bool) {
	help := "with --target cuda: compile for this CUDA architecture (sm_80, sm_90, ...) with NVRTC on a machine without a GPU; the executable carries PTX, which every GPU of that architecture loads"
	if multi {
		help = "with --target cuda: compile for these CUDA architectures (sm_80,sm_90) with NVRTC on a machine without a GPU, filling the journal for GPU nodes of each"
	}
	cmd.Flags().StringVar(&tf.cudaArch, "cuda-arch", "", help)
}

// cudaPasses are the flag sets of one prebuild pass each: tf itself, or one per
// architecture of --cuda-arch's list.
func (tf targetFlags) cudaPasses() ([]targetFlags, error) {
	if tf.cudaArch == "" {
		return []targetFlags{tf}, nil
	}
	var out []targetFlags
	seen := map[string]bool{}
	for _, a := range strings.Split(tf.cudaArch, ",") {
		a = strings.TrimSpace(a)
		if _, _, err := cuda.ParseArch(a); err != nil {
			return nil, usageError{fmt.Errorf("--cuda-arch %s: %w", tf.cudaArch, err)}
		}
		if seen[a] {
			continue
		}
		seen[a] = true
		p := tf
		p.cudaArch = a
		if p.target == "" {
			p.target = "cuda"
		}
		out = append(out, p)
	}
	return out, nil
}
