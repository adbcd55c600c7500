package target

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"

	"golang.org/x/sys/cpu"
)

// Kind is the kind of device a target compiles for.
type Kind uint8

const (
	CPU Kind = iota
	CUDA
	OpenCL
)

func (k Kind) String() string {
	switch k {
	case CPU:
		return "cpu"
	case CUDA:
		return "cuda"
	case OpenCL:
		return "opencl"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Feature is an ISA extension name, e.g. "avx512f", "avx2", "fma", "neon".
type Feature string

// Target is a compilation target.
type Target struct {
	Kind     Kind
	Arch     string    // GOARCH-style: "amd64", "arm64"
	Features []Feature // sorted, unique
	Cores    int       // cores available for parallel kernels
	// VectorBits is the widest SIMD register the target's features allow (128/256/512).
	VectorBits int
	// GPU holds a GPU's limits (zero for a CPU).
	GPU GPUFacts
}

// GPUFacts are the limits of a GPU that kernels are scheduled and printed for, as a
// device probe reports them.
type GPUFacts struct {
	MaxWorkGroup  int   // threads in one work-group (OpenCL) or block (CUDA)
	LocalMemBytes int64 // local (OpenCL) or shared (CUDA) memory of one work-group
	ComputeUnits  int   // compute units (OpenCL) or streaming multiprocessors (CUDA)
	// ImageMaxWidth and ImageMaxHeight bound an image2d in texels (0: no images).
	ImageMaxWidth, ImageMaxHeight int
	FP16                          bool // half-precision arithmetic
}

// ErrInvalid: a target described with values it cannot have.
var ErrInvalid = errors.New("invalid target")

// GPU describes a GPU of kind (CUDA or OpenCL) and architecture arch (e.g. "sm_86",
// "gfx1030") with the limits a device probe read.
func GPU(kind Kind, arch string, facts GPUFacts) (Target, error) {
	if kind != CUDA && kind != OpenCL {
		return Target{}, fmt.Errorf("%w: %v is not a GPU kind", ErrInvalid, kind)
	}
	if err := facts.check(); err != nil {
		return Target{}, fmt.Errorf("%w: %v %s: %w", ErrInvalid, kind, arch, err)
	}
	if facts.zero() {
		return Target{}, fmt.Errorf("%w: %v %s: no limits given", ErrInvalid, kind, arch)
	}
	return Target{Kind: kind, Arch: arch, GPU: facts}, nil
}

func (f GPUFacts) check() error {
	switch {
	case f.MaxWorkGroup < 0 || f.LocalMemBytes < 0 || f.ComputeUnits < 0 || f.ImageMaxWidth < 0 || f.ImageMaxHeight < 0:
		return fmt.Errorf("negative limit in %s", f)
	case (f.ImageMaxWidth == 0) != (f.ImageMaxHeight == 0):
		return fmt.Errorf("image limits %dx%d: both or neither must be 0", f.ImageMaxWidth, f.ImageMaxHeight)
	}
	return nil
}

func (f GPUFacts) zero() bool { return f == GPUFacts{} }

// String is the facts' stable text form: "wg=1024 local=49152 cu=80 image=16384x16384
// +fp16" (image=none without images, -fp16 without half precision).
func (f GPUFacts) String() string { return strings.Join(f.fields(), " ") }

func (f GPUFacts) fields() []string {
	img := "none"
	if f.ImageMaxWidth != 0 || f.ImageMaxHeight != 0 {
		img = fmt.Sprintf("%dx%d", f.ImageMaxWidth, f.ImageMaxHeight)
	}
	fp16 := "-fp16"
	if f.FP16 {
		fp16 = "+fp16"
	}
	return []string{fmt.Sprintf("wg=%d", f.MaxWorkGroup), fmt.Sprintf("local=%d", f.LocalMemBytes),
		fmt.Sprintf("cu=%d", f.ComputeUnits), "image=" + img, fp16}
}

// Host describes the machine kiln runs on, capped at the level ISAEnv names. An unknown
// value of ISAEnv caps nothing here: HostChecked reports it, and the CPU device refuses
// to open with it, so no kernel is built or run under it.
func Host() Target {
	t, err := HostChecked()
	if err != nil {
		return detectHost()
	}
	return t
}

// detectHost describes the machine's CPU as it is, uncapped.
func detectHost() Target {
	t := Target{Kind: CPU, Arch: runtime.GOARCH, Cores: runtime.NumCPU()}
	add := func(ok bool, f Feature) {
		if ok {
			t.Features = append(t.Features, f)
		}
	}
	switch runtime.GOARCH {
	case "amd64", "386":
		x := cpu.X86
		add(x.HasSSE41, "sse4.1")
		add(x.HasSSE42, "sse4.2")
		add(x.HasAVX, "avx")
		add(x.HasAVX2, "avx2")
		add(x.HasFMA, "fma")
		add(x.HasAVX512F, "avx512f")
		add(x.HasAVX512BW, "avx512bw")
		add(x.HasAVX512DQ, "avx512dq")
		add(x.HasAVX512VL, "avx512vl")
		add(x.HasAVX512VNNI, "avx512vnni")
		add(x.HasAVX512BF16, "avx512bf16")
	case "arm64":
		a := cpu.ARM64
		add(true, "neon")
		add(a.HasASIMDHP, "asimdhp")
		add(a.HasASIMDDP, "asimddp")
		add(a.HasSVE, "sve")
	}
	t.normalize()
	return t
}

func (t *Target) normalize() {
	slices.Sort(t.Features)
	t.Features = slices.Compact(t.Features)
	t.VectorBits = 128
	if t.Has("avx2") {
		t.VectorBits = 256
	}
	if t.Has("avx512f") {
		t.VectorBits = 512
	}
}

// Has reports whether the target has an ISA feature.
func (t Target) Has(f Feature) bool { return slices.Contains(t.Features, f) }

// String is the stable text form, e.g. "cpu amd64 cores=2 +avx2,+avx512f,+fma"; a
// target with GPU facts ends with them: "opencl gfx1030 cores=0 wg=256 local=65536
// cu=40 image=16384x16384 +fp16".
func (t Target) String() string {
	fs := make([]string, len(t.Features))
	for i, f := range t.Features {
		fs[i] = "+" + string(f)
	}
	if t.GPU.zero() {
		return fmt.Sprintf("%v %s cores=%d %s", t.Kind, t.Arch, t.Cores, strings.Join(fs, ","))
	}
	parts := []string{t.Kind.String(), t.Arch, fmt.Sprintf("cores=%d", t.Cores)}
	if len(fs) > 0 {
		parts = append(parts, strings.Join(fs, ","))
	}
	return strings.Join(append(parts, t.GPU.fields()...), " ")
}

// Fingerprint identifies the code-generation-relevant part of the target (cores excluded:
// the same binary runs with any thread count), e.g. "cpu/amd64/avx2,fma"; GPU facts
// follow as a fourth part: "cuda/sm_86//wg=1024,local=49152,cu=80,image=none,+fp16".
func (t Target) Fingerprint() string {
	fs := make([]string, len(t.Features))
	for i, f := range t.Features {
		fs[i] = string(f)
	}
	s := fmt.Sprintf("%v/%s/%s", t.Kind, t.Arch, strings.Join(fs, ","))
	if !t.GPU.zero() {
		s += "/" + strings.Join(t.GPU.fields(), ",")
	}
	return s
}
