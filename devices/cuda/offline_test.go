package cuda

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/target"
)

func TestArchitecturesAreCheckedAndTheirFactsFixed(t *testing.T) {
	for _, bad := range []string{"", "sm90", "sm_9", "compute_90", "sm_35", "sm_90 ", "gfx1030"} {
		if _, _, err := ParseArch(bad); err == nil {
			t.Errorf("ParseArch(%q) accepted", bad)
		}
		if _, err := ArchTarget(bad); !errors.Is(err, target.ErrInvalid) {
			t.Errorf("ArchTarget(%q): %v, want ErrInvalid", bad, err)
		}
	}
	for arch, want := range map[string]target.GPUFacts{
		"sm_80":  {MaxWorkGroup: 1024, LocalMemBytes: 48 << 10, ComputeUnits: 108, FP16: true},
		"sm_90a": {MaxWorkGroup: 1024, LocalMemBytes: 48 << 10, ComputeUnits: 132, FP16: true},
		"sm_52":  {MaxWorkGroup: 1024, LocalMemBytes: 48 << 10, ComputeUnits: defaultSMCount},
		"sm_53":  {MaxWorkGroup: 1024, LocalMemBytes: 48 << 10, ComputeUnits: defaultSMCount, FP16: true},
	} {
		tg, err := ArchTarget(arch)
		if err != nil || tg.GPU != want || tg.Kind != target.CUDA || tg.Arch != arch {
			t.Errorf("ArchTarget(%q) = %v, %v; want facts %v", arch, tg, err, want)
		}
	}
}

// TestOfflineCompilesPTXAndRunsNothing: the compile-only architecture describes itself
// as every GPU of the architecture does, builds PTX for it, and refuses to run.
func TestOfflineCompilesPTXAndRunsNothing(t *testing.T) {
	nvrtcOrSkip(t)
	o, err := NewOffline("sm_80")
	if err != nil {
		t.Fatal(err)
	}
	if i := o.Info(); i.Kind != "cuda" || i.Fingerprint != "cuda/sm_80" || !strings.HasPrefix(i.Toolchain, "nvrtc ") {
		t.Errorf("info %+v", i)
	}
	ptx, err := o.BuildPTX(fixtureSource)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(ptx, []byte(".target sm_80")) || !bytes.Contains(ptx, []byte(".entry kiln_test_axpy(")) {
		t.Errorf("not PTX for sm_80 with the fixture's kernel: %.300s", ptx)
	}
	if _, err := o.BuildPTX("extern \"C\" __global__ void broken( {"); !errors.Is(err, devices.ErrBuild) {
		t.Errorf("a broken source: %v, want ErrBuild", err)
	}
	if _, err := o.Alloc(16); !errors.Is(err, devices.ErrUnavailable) {
		t.Errorf("Alloc: %v, want ErrUnavailable", err)
	}
	if _, err := o.Load(ptx); !errors.Is(err, devices.ErrUnavailable) {
		t.Errorf("Load: %v, want ErrUnavailable", err)
	}
	if _, err := NewOffline("sm_8"); err == nil || errors.Is(err, devices.ErrUnavailable) {
		t.Errorf("NewOffline(sm_8): %v, want an invalid architecture", err)
	}
}
