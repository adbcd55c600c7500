package cuda

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/devices"
)

func TestNVRTCCompilesFixtureToPTXForAmpereAndHopper(t *testing.T) {
	nv := nvrtcOrSkip(t)
	for _, arch := range []string{"sm_80", "sm_90"} {
		ptx, err := nv.Compile(fixtureSource, "fixture.cu", CompileOptions{Arch: arch})
		if err != nil {
			t.Fatalf("%s: %v", arch, err)
		}
		text := string(ptx)
		for _, want := range []string{".target " + arch, ".entry kiln_test_axpy(", ".entry kiln_test_fail(", "atom.global.cas.b64"} {
			if !strings.Contains(text, want) {
				t.Errorf("%s: the PTX lacks %q", arch, want)
			}
		}
		if bytes.IndexByte(ptx, 0) >= 0 {
			t.Errorf("%s: the PTX text holds a NUL byte", arch)
		}
	}
}

func TestNVRTCBuildsCubinAsAnELFImage(t *testing.T) {
	nv := nvrtcOrSkip(t)
	cubin, err := nv.Compile(fixtureSource, "fixture.cu", CompileOptions{Arch: "sm_80", Cubin: true})
	if errors.Is(err, devices.ErrUnavailable) {
		t.Skipf("%s builds no cubins: %v", nv.Version(), err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(cubin, elfMagic) || !bytes.Contains(cubin, []byte("kiln_test_axpy")) {
		t.Errorf("the cubin is not an ELF image holding the kernel (%d bytes, starts %q)", len(cubin), cubin[:min(8, len(cubin))])
	}
}

func TestNVRTCSyntaxErrorIsBuildErrorWithTheLogNamingTheLine(t *testing.T) {
	nv := nvrtcOrSkip(t)
	src := "extern \"C\" __global__ void k(float *x) {\n\tx[0] = 1.0f;\n\tx[1] = ;\n}\n"
	_, err := nv.Compile(src, "broken.cu", CompileOptions{Arch: "sm_90"})
	if !errors.Is(err, devices.ErrBuild) {
		t.Fatalf("got %v, want ErrBuild", err)
	}
	if !strings.Contains(err.Error(), "broken.cu(3)") || !strings.Contains(err.Error(), "error") {
		t.Errorf("the error does not carry the log naming line 3: %v", err)
	}
}

func TestNVRTCRefusesAnArchitectureItCannotName(t *testing.T) {
	nv := nvrtcOrSkip(t)
	for _, arch := range []string{"", "90", "compute_90", "sm_90 -o /tmp/x", "sm_x"} {
		if _, err := nv.Compile(fixtureSource, "fixture.cu", CompileOptions{Arch: arch}); !errors.Is(err, devices.ErrBuild) {
			t.Errorf("arch %q: got %v, want ErrBuild", arch, err)
		}
	}
}

func TestNVRTCVersionNamesTheCompiler(t *testing.T) {
	nv := nvrtcOrSkip(t)
	if v := nv.Version(); !strings.HasPrefix(v, "nvrtc 1") {
		t.Errorf("version %q", v)
	}
}
