package target

import (
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
