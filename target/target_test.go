package target

import (
	"errors"
	"runtime"
	"strings"
	"testing"
)

func TestHost(t *testing.T) {
	h := Host()
	if h.Kind != CPU || h.Arch != runtime.GOARCH || h.Cores != runtime.NumCPU() {
		t.Fatalf("Host() = %+v", h)
	}
	for i := 1; i < len(h.Features); i++ {
		if h.Features[i-1] >= h.Features[i] {
			t.Fatalf("features not sorted/unique: %v", h.Features)
		}
	}
	if h.Has("avx512f") && h.VectorBits != 512 {
		t.Errorf("avx512f host has VectorBits %d", h.VectorBits)
	}
	if !strings.HasPrefix(h.String(), "cpu "+runtime.GOARCH) {
		t.Errorf("String() = %q", h.String())
	}
}

func TestFingerprintIgnoresCores(t *testing.T) {
	a := Target{Kind: CPU, Arch: "amd64", Features: []Feature{"fma", "avx2"}, Cores: 2}
	b := a
	b.Cores = 64
	a.normalize()
	b.normalize()
	if a.Fingerprint() != b.Fingerprint() {
		t.Errorf("fingerprints differ: %q vs %q", a.Fingerprint(), b.Fingerprint())
	}
	if a.Fingerprint() != "cpu/amd64/avx2,fma" {
		t.Errorf("fingerprint = %q", a.Fingerprint())
	}
	if a.VectorBits != 256 {
		t.Errorf("VectorBits = %d, want 256", a.VectorBits)
	}
}

// TestCPUTextFormsDoNotDependOnGPUFields: a CPU target prints as it always has (its
// fingerprint is part of every journal key).
func TestCPUTextFormsDoNotDependOnGPUFields(t *testing.T) {
	a := Target{Kind: CPU, Arch: "amd64", Features: []Feature{"avx2", "fma"}, Cores: 2}
	if got, want := a.String(), "cpu amd64 cores=2 +avx2,+fma"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got, want := a.Fingerprint(), "cpu/amd64/avx2,fma"; got != want {
		t.Errorf("Fingerprint() = %q, want %q", got, want)
	}
	bare := Target{Kind: CPU, Arch: "arm64"}
	if got, want := bare.String(), "cpu arm64 cores=0 "; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got, want := bare.Fingerprint(), "cpu/arm64/"; got != want {
		t.Errorf("Fingerprint() = %q, want %q", got, want)
	}
}

func TestGPUTextForms(t *testing.T) {
	cuda, err := GPU(CUDA, "sm_86", GPUFacts{MaxWorkGroup: 1024, LocalMemBytes: 49152, ComputeUnits: 80, FP16: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cuda.String(), "cuda sm_86 cores=0 wg=1024 local=49152 cu=80 image=none +fp16"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got, want := cuda.Fingerprint(), "cuda/sm_86//wg=1024,local=49152,cu=80,image=none,+fp16"; got != want {
		t.Errorf("Fingerprint() = %q, want %q", got, want)
	}
	cl, err := GPU(OpenCL, "gfx1030", GPUFacts{MaxWorkGroup: 256, LocalMemBytes: 65536, ComputeUnits: 40, ImageMaxWidth: 16384, ImageMaxHeight: 8192})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cl.String(), "opencl gfx1030 cores=0 wg=256 local=65536 cu=40 image=16384x8192 -fp16"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got, want := cl.Fingerprint(), "opencl/gfx1030//wg=256,local=65536,cu=40,image=16384x8192,-fp16"; got != want {
		t.Errorf("Fingerprint() = %q, want %q", got, want)
	}
}

// TestEveryGPUFactIsInTheFingerprint: two GPUs that differ in one fact get different
// journal keys.
func TestEveryGPUFactIsInTheFingerprint(t *testing.T) {
	base := GPUFacts{MaxWorkGroup: 256, LocalMemBytes: 32768, ComputeUnits: 8, ImageMaxWidth: 4096, ImageMaxHeight: 4096}
	edits := map[string]func(*GPUFacts){
		"work-group":    func(f *GPUFacts) { f.MaxWorkGroup = 512 },
		"local memory":  func(f *GPUFacts) { f.LocalMemBytes = 65536 },
		"compute units": func(f *GPUFacts) { f.ComputeUnits = 16 },
		"image width":   func(f *GPUFacts) { f.ImageMaxWidth = 8192 },
		"image height":  func(f *GPUFacts) { f.ImageMaxHeight = 8192 },
		"fp16":          func(f *GPUFacts) { f.FP16 = true },
	}
	a, err := GPU(OpenCL, "mali", base)
	if err != nil {
		t.Fatal(err)
	}
	for name, edit := range edits {
		f := base
		edit(&f)
		b, err := GPU(OpenCL, "mali", f)
		if err != nil {
			t.Fatal(err)
		}
		if a.Fingerprint() == b.Fingerprint() || a.String() == b.String() {
			t.Errorf("%s: text forms do not change: %q", name, b.Fingerprint())
		}
	}
}

func TestGPURefusesImpossibleFacts(t *testing.T) {
	ok := GPUFacts{MaxWorkGroup: 256, LocalMemBytes: 32768, ComputeUnits: 8}
	cases := map[string]struct {
		kind  Kind
		facts GPUFacts
	}{
		"cpu kind":          {CPU, ok},
		"no limits":         {CUDA, GPUFacts{}},
		"negative":          {CUDA, GPUFacts{MaxWorkGroup: -1}},
		"image width alone": {OpenCL, GPUFacts{MaxWorkGroup: 256, ImageMaxWidth: 4096}},
	}
	for name, c := range cases {
		if _, err := GPU(c.kind, "x", c.facts); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
}

func TestCapDropsFeaturesAboveTheLevel(t *testing.T) {
	full := Target{Kind: CPU, Arch: "amd64", Features: []Feature{"avx", "avx2", "avx512bw", "avx512f", "avx512vnni", "fma", "sse4.1", "sse4.2"}}
	full.normalize()
	cases := []struct {
		l    Level
		want string
		bits int
	}{
		{"", "cpu/amd64/avx,avx2,avx512bw,avx512f,avx512vnni,fma,sse4.1,sse4.2", 512},
		{LevelAVX512, "cpu/amd64/avx,avx2,avx512bw,avx512f,avx512vnni,fma,sse4.1,sse4.2", 512},
		{LevelAVX2, "cpu/amd64/avx,avx2,fma,sse4.1,sse4.2", 256},
		{LevelSSE4, "cpu/amd64/sse4.1,sse4.2", 128},
		{LevelGeneric, "cpu/amd64/", 128},
	}
	for _, c := range cases {
		got := full.Capped(c.l)
		if got.Fingerprint() != c.want || got.VectorBits != c.bits {
			t.Errorf("cap %q: %s (%d bits), want %s (%d bits)", c.l, got.Fingerprint(), got.VectorBits, c.want, c.bits)
		}
	}
	if len(full.Features) != 8 {
		t.Errorf("Capped changed its receiver: %v", full.Features)
	}
}

func TestHostHonoursTheISACap(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skipf("%s caps x86 hosts; this host is %s", ISAEnv, runtime.GOARCH)
	}
	t.Setenv(ISAEnv, "generic")
	h, err := HostChecked()
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Features) != 0 || h.VectorBits != 128 || Host().Fingerprint() != "cpu/amd64/" {
		t.Errorf("generic cap: %s (%d bits)", h.Fingerprint(), h.VectorBits)
	}
	t.Setenv(ISAEnv, "avx2")
	if h := Host(); h.Has("avx512f") {
		t.Errorf("avx2 cap: host still has avx512f: %s", h.Fingerprint())
	}
}

func TestUnknownISACapIsAnError(t *testing.T) {
	t.Setenv(ISAEnv, "avx1024")
	_, err := HostChecked()
	if !errors.Is(err, ErrUnknownLevel) || !strings.Contains(err.Error(), "avx1024") || !strings.Contains(err.Error(), ISAEnv) {
		t.Fatalf("HostChecked with %s=avx1024: %v, want ErrUnknownLevel naming the value", ISAEnv, err)
	}
}
