package target

import (
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
}

// Host describes the machine kiln runs on.
func Host() Target {
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

// String is the stable text form, e.g. "cpu amd64 cores=2 +avx2,+avx512f,+fma".
func (t Target) String() string {
	fs := make([]string, len(t.Features))
	for i, f := range t.Features {
		fs[i] = "+" + string(f)
	}
	return fmt.Sprintf("%v %s cores=%d %s", t.Kind, t.Arch, t.Cores, strings.Join(fs, ","))
}

// Fingerprint identifies the code-generation-relevant part of the target (cores excluded:
// the same binary runs with any thread count).
func (t Target) Fingerprint() string {
	fs := make([]string, len(t.Features))
	for i, f := range t.Features {
		fs[i] = string(f)
	}
	return fmt.Sprintf("%v/%s/%s", t.Kind, t.Arch, strings.Join(fs, ","))
}
