package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	devcpu "github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/devices/cuda"
	"github.com/kilnrt/kiln/target"
)

// How to get a missing driver, for kiln devices.
const (
	openCLHow = "install an OpenCL driver (the GPU vendor's, or Debian's pocl-opencl-icd to run OpenCL on this CPU) and the ICD loader (ocl-icd-libopencl1), or point $KILN_LIBOPENCL at libOpenCL.so.1"
	cudaHow   = "install the NVIDIA driver (libcuda.so.1; $KILN_LIBCUDA names another path) and, to compile kernels, NVRTC (libnvrtc from the CUDA toolkit)"
	ccHow     = "install gcc or clang (or set $CC) to compile models; prebuilt executables run without one"
)

// devicesReport is what kiln devices prints (--json: this, as JSON).
type devicesReport struct {
	CPU           cpuReport      `json:"cpu"`
	OpenCL        []openCLReport `json:"opencl"`
	OpenCLMissing string         `json:"opencl_missing,omitempty"` // why there are none
	OpenCLHow     string         `json:"opencl_install,omitempty"` // and how to get one
	CUDA          []cudaReport   `json:"cuda"`
	CUDAMissing   string         `json:"cuda_missing,omitempty"`
	CUDAHow       string         `json:"cuda_install,omitempty"`
}

type cpuReport struct {
	Model      string   `json:"model"`
	Arch       string   `json:"arch"`
	Features   []string `json:"features"` // as target.Host reports them (capped by $KILN_ISA)
	VectorBits int      `json:"vector_bits"`
	Threads    int      `json:"threads"`
	CCompiler  string   `json:"c_compiler"` // empty: none found
	Problem    string   `json:"problem,omitempty"`
}

type openCLReport struct {
	ID             string `json:"id"` // "opencl:N": --device and instance_group gpus: [N]
	Platform       string `json:"platform"`
	Name           string `json:"name"`
	Type           string `json:"type"` // gpu, cpu, accelerator, other
	OpenCLC        string `json:"opencl_c"`
	ComputeUnits   int    `json:"compute_units"`
	MaxWorkGroup   int    `json:"max_work_group"`
	LocalMemBytes  int64  `json:"local_mem_bytes"`
	ImageMaxWidth  int    `json:"image2d_max_width"` // 0: no images
	ImageMaxHeight int    `json:"image2d_max_height"`
	FP16           bool   `json:"fp16"`
	GlobalMemBytes int64  `json:"global_mem_bytes"`
	BaseAlignBytes int64  `json:"base_align_bytes"`
}

type cudaReport struct {
	ID          string `json:"id"` // "cuda:N"
	Name        string `json:"name"`
	Arch        string `json:"arch"`
	MemoryBytes int64  `json:"memory_bytes"`
	NVRTC       string `json:"nvrtc"` // empty: not found
}

func devicesCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "devices [--json]",
		Short: "List the devices kiln can run on: the CPU, OpenCL devices (opencl:N) and CUDA GPUs",
		Long: `List the CPU (model, ISA features as kiln compiles for them, threads, C compiler), every
OpenCL device in kiln's numbering (opencl:N, as --device opencl:N and a KIND_GPU
instance_group's gpus: [N] name them: every platform's devices in the ICD loader's
order) with the limits kernels are scheduled for, and CUDA GPUs. A missing driver is a
line saying what is missing and how to install it, not an error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r := listDevices()
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(r)
			}
			r.print(cmd.OutOrStdout())
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// listDevices probes every kind of device; what is absent is said in the report.
func listDevices() devicesReport {
	var r devicesReport
	host, err := target.HostChecked()
	if err != nil {
		r.CPU.Problem = err.Error()
		host = target.Host()
	}
	r.CPU.Arch, r.CPU.VectorBits, r.CPU.Threads = host.Arch, host.VectorBits, host.Cores
	r.CPU.Features = []string{}
	for _, f := range host.Features {
		r.CPU.Features = append(r.CPU.Features, string(f))
	}
	r.CPU.Model = "unknown"
	if dev, err := devcpu.Open(devcpu.Options{NoCompiler: true}); err == nil {
		r.CPU.Model = dev.Info().Name
		dev.Close()
	}
	if cc, err := devcpu.FindCompiler(); err == nil {
		r.CPU.CCompiler = cc.Version
	}

	r.OpenCL = []openCLReport{}
	all, err := openCLDevices()
	if err != nil {
		r.OpenCLMissing, r.OpenCLHow = err.Error(), openCLHow
	}
	for i, d := range all {
		f := d.device.Facts
		r.OpenCL = append(r.OpenCL, openCLReport{ID: fmt.Sprintf("opencl:%d", i), Platform: d.platform.Name, Name: d.device.Name,
			Type: d.device.Type, OpenCLC: d.device.OpenCLC, ComputeUnits: f.ComputeUnits, MaxWorkGroup: f.MaxWorkGroup,
			LocalMemBytes: f.LocalMemBytes, ImageMaxWidth: f.ImageMaxWidth, ImageMaxHeight: f.ImageMaxHeight, FP16: f.FP16,
			GlobalMemBytes: d.device.MemoryBytes, BaseAlignBytes: d.device.BaseAlign})
	}
	if err == nil && len(all) == 0 {
		r.OpenCLMissing, r.OpenCLHow = "the OpenCL platforms have no device", openCLHow
	}

	r.CUDA = []cudaReport{}
	for i := 0; ; i++ { // the driver numbers its GPUs 0..count-1; opening past them fails
		d, err := cuda.Open(cuda.Options{Ordinal: i})
		if err != nil {
			if i == 0 {
				r.CUDAMissing, r.CUDAHow = err.Error(), cudaHow
			}
			break
		}
		info := d.Info()
		r.CUDA = append(r.CUDA, cudaReport{ID: fmt.Sprintf("cuda:%d", i), Name: info.Name, Arch: d.Arch(), MemoryBytes: d.MemoryBytes(), NVRTC: info.Toolchain})
		d.Close()
	}
	return r
}

// print writes the report as text: one block per device.
func (r devicesReport) print(w io.Writer) {
	c := r.CPU
	fmt.Fprintf(w, "cpu        %s (%s), %d threads\n", c.Model, c.Arch, c.Threads)
	features := strings.Join(c.Features, " ")
	if features == "" {
		features = "none beyond the base ISA"
	}
	fmt.Fprintf(w, "           ISA features: %s (%d-bit vectors)\n", features, c.VectorBits)
	if c.CCompiler != "" {
		fmt.Fprintf(w, "           C compiler: %s\n", c.CCompiler)
	} else {
		fmt.Fprintf(w, "           C compiler: none (%s)\n", ccHow)
	}
	if c.Problem != "" {
		fmt.Fprintf(w, "           problem: %s\n", c.Problem)
	}
	if r.OpenCLMissing != "" {
		fmt.Fprintf(w, "opencl     none: %s\n           %s\n", r.OpenCLMissing, r.OpenCLHow)
	}
	for _, d := range r.OpenCL {
		fmt.Fprintf(w, "%-10s %s (%s) on %s\n", d.ID, d.Name, d.Type, d.Platform)
		images := "no images"
		if d.ImageMaxWidth > 0 {
			images = fmt.Sprintf("image2d up to %dx%d", d.ImageMaxWidth, d.ImageMaxHeight)
		}
		fp16 := "no fp16"
		if d.FP16 {
			fp16 = "fp16"
		}
		fmt.Fprintf(w, "           %s, %d compute units, max work-group size %d, local memory %s\n",
			d.OpenCLC, d.ComputeUnits, d.MaxWorkGroup, memSize(d.LocalMemBytes))
		fmt.Fprintf(w, "           %s, %s, global memory %s, base alignment %d B\n", images, fp16, memSize(d.GlobalMemBytes), d.BaseAlignBytes)
	}
	if r.CUDAMissing != "" {
		fmt.Fprintf(w, "cuda       none: %s\n           %s\n", r.CUDAMissing, r.CUDAHow)
	}
	for _, d := range r.CUDA {
		nvrtc := d.NVRTC
		if nvrtc == "" {
			nvrtc = "no NVRTC (prebuilt kernels only)"
		}
		fmt.Fprintf(w, "%-10s %s (%s), memory %s, %s\n", d.ID, d.Name, d.Arch, memSize(d.MemoryBytes), nvrtc)
	}
}

// memSize prints a device's memory: GiB from 1 GiB up, else as byteSize does.
func memSize(n int64) string {
	if n >= 1<<30 {
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	}
	return byteSize(n)
}
