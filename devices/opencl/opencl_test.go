package opencl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/devices/devicetest"
	"github.com/kilnrt/kiln/internal/dynlib"
)

func TestConformance(t *testing.T) {
	d := deviceOrSkip(t)
	bin, _ := buildFixture(t, d)
	devicetest.RunAll(t, d, devicetest.Fixture{Binary: bin, Geometry: fixtureGeometry})
}

func TestSourceAfterTheMarkerLoadsAndRuns(t *testing.T) {
	d := deviceOrSkip(t)
	devicetest.RunAll(t, d, devicetest.Fixture{Binary: []byte(SourceMarker + fixtureSource), Geometry: fixtureGeometry})
	if s := d.Stats(); s.SourceBuilds != 1 || s.BinaryLoads != 0 {
		t.Errorf("stats %+v, want one source build and no binary load", s)
	}
}

// TestProgramBinaryLoadsInAFreshDeviceWithoutABuild: the binary Build returns loads on a
// device opened afresh (as a journal's would after a restart), runs, and counts no build
// from source there.
func TestProgramBinaryLoadsInAFreshDeviceWithoutABuild(t *testing.T) {
	first := deviceOrSkip(t)
	bin, err := first.Build(fixtureSource, "-cl-mad-enable")
	if err != nil {
		t.Fatal(err)
	}
	if s := first.Stats(); s.SourceBuilds != 1 {
		t.Errorf("Build counted %d source builds, want 1", s.SourceBuilds)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	d := deviceOrSkip(t)
	if d.Info().Fingerprint != first.Info().Fingerprint {
		t.Fatalf("fingerprints differ: %q, %q", d.Info().Fingerprint, first.Info().Fingerprint)
	}
	mod, err := d.Load(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close()
	k, err := mod.Kernel(devicetest.FixtureKernel)
	if err != nil {
		t.Fatal(err)
	}
	if err := axpyRoundTrip(d, k, 300, 1.5); err != nil {
		t.Fatal(err)
	}
	if s := d.Stats(); s.SourceBuilds != 0 || s.BinaryLoads != 1 {
		t.Errorf("stats %+v after loading a binary, want no source build and one binary load", s)
	}
	if _, err := d.Load(append([]byte("not a program binary"), bin...)); !errors.Is(err, devices.ErrLoad) {
		t.Errorf("a corrupted binary: got %v, want ErrLoad", err)
	}
}

func TestBuildErrorCarriesTheLogNamingTheLine(t *testing.T) {
	d := deviceOrSkip(t)
	src := "__kernel void k(__global float *x) {\n\tx[0] = 1.0f;\n\tx[1] = undeclared_name;\n}\n"
	_, err := d.Build(src, "")
	if !errors.Is(err, devices.ErrBuild) {
		t.Fatalf("got %v, want ErrBuild", err)
	}
	for _, want := range []string{"CL_BUILD_PROGRAM_FAILURE", "undeclared_name", ":3:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not name %q: %v", want, err)
		}
	}
	if _, err := d.Build("__kernel void k() {}", "-no-such-option"); !errors.Is(err, devices.ErrBuild) {
		t.Errorf("an unknown build option: got %v, want ErrBuild", err)
	}
	if _, err := d.Load([]byte(SourceMarker + src)); !errors.Is(err, devices.ErrBuild) {
		t.Errorf("source after the marker that does not compile: got %v, want ErrBuild", err)
	}
}

// TestKernelStatusSurfacesAtSyncNamingTheKernels: launches do not wait; the first code a
// kernel claims and its details surface at Sync, naming every kernel launched since the
// last Sync, and the block is clear again afterwards.
func TestKernelStatusSurfacesAtSyncNamingTheKernels(t *testing.T) {
	d := deviceOrSkip(t)
	_, mod := buildFixture(t, d)
	axpy, err := mod.Kernel("kiln_test_axpy")
	if err != nil {
		t.Fatal(err)
	}
	fail, err := mod.Kernel("kiln_test_fail")
	if err != nil {
		t.Fatal(err)
	}
	in, _ := d.Alloc(4 * 64)
	out, _ := d.Alloc(4 * 64)
	defer d.Free(in)
	defer d.Free(out)
	if err := d.Launch(axpy, fixtureGeometry(64), []devices.Buffer{in, out}, []int64{64, 0}); err != nil {
		t.Fatal(err)
	}
	many := devices.Geometry{Grid: [3]int{4, 1, 1}, Block: [3]int{32, 1, 1}}
	if err := d.Launch(fail, many, nil, []int64{devices.KernelIndexOutOfRange, -9, 5}); err != nil {
		t.Fatalf("a failing kernel's launch reported at once: %v", err)
	}
	if err := d.Launch(fail, many, nil, []int64{devices.KernelOutOfMemory, 1, 2}); err != nil {
		t.Fatal(err)
	}
	err = d.Sync()
	var ke *devices.KernelError
	if !errors.As(err, &ke) || !errors.Is(err, devices.ErrLaunch) {
		t.Fatalf("sync: got %v, want a KernelError", err)
	}
	if ke.Code != devices.KernelIndexOutOfRange || ke.Detail != [2]int64{-9, 5} {
		t.Errorf("got code %d detail %v, want the first failure: %d [-9 5]", ke.Code, ke.Detail, devices.KernelIndexOutOfRange)
	}
	if !strings.Contains(ke.Kernel, "kiln_test_axpy") || !strings.Contains(ke.Kernel, "kiln_test_fail") {
		t.Errorf("the error names %q, want both kernels launched since the last sync", ke.Kernel)
	}
	if err := d.Sync(); err != nil {
		t.Errorf("the status block was not cleared: %v", err)
	}
	if err := d.Launch(axpy, fixtureGeometry(64), []devices.Buffer{in, out}, []int64{64, 0}); err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Errorf("a clean launch after a failure: %v", err)
	}
}

func TestLaunchRefusesZeroGeometryAndWrongArity(t *testing.T) {
	d := deviceOrSkip(t)
	_, mod := buildFixture(t, d)
	k, err := mod.Kernel("kiln_test_axpy")
	if err != nil {
		t.Fatal(err)
	}
	in, _ := d.Alloc(16)
	out, _ := d.Alloc(16)
	defer d.Free(in)
	defer d.Free(out)
	bufs := []devices.Buffer{in, out}
	for _, g := range []devices.Geometry{{}, {Grid: [3]int{1, 1, 1}}, {Grid: [3]int{1, 0, 1}, Block: [3]int{32, 1, 1}}} {
		if err := d.Launch(k, g, bufs, []int64{4, 0}); !errors.Is(err, devices.ErrLaunch) || !strings.Contains(err.Error(), "geometry") {
			t.Errorf("geometry %+v: got %v, want ErrLaunch", g, err)
		}
	}
	if err := d.Launch(k, fixtureGeometry(4), bufs, []int64{4}); !errors.Is(err, devices.ErrLaunch) || !strings.Contains(err.Error(), "takes 7 parameters") {
		t.Errorf("a missing dim: got %v, want ErrLaunch naming the parameter count", err)
	}
	if err := d.Sync(); err != nil {
		t.Errorf("refused launches left an error: %v", err)
	}
}

type foreignBuffer struct{}

func (foreignBuffer) Size() int64 { return 8 }

func TestForeignBuffersAreRefused(t *testing.T) {
	d := deviceOrSkip(t)
	if err := d.Free(foreignBuffer{}); !errors.Is(err, devices.ErrBadBuffer) {
		t.Errorf("free: %v", err)
	}
	if err := d.CopyIn(foreignBuffer{}, []byte("x")); !errors.Is(err, devices.ErrBadBuffer) {
		t.Errorf("copy in: %v", err)
	}
	other := deviceOrSkip(t)
	b, err := other.Alloc(8)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.CopyOut(make([]byte, 8), b); !errors.Is(err, devices.ErrBadBuffer) {
		t.Errorf("copy out of another device's buffer: %v", err)
	}
	if err := d.Free(b); !errors.Is(err, devices.ErrBadBuffer) {
		t.Errorf("free of another device's buffer: %v", err)
	}
}

func TestFactsDescribeTheDevice(t *testing.T) {
	d := deviceOrSkip(t)
	f, di := d.Facts(), d.Describe()
	t.Logf("%+v; %v; %+v", d.Info(), f, di)
	if f.MaxWorkGroup < 1 || f.MaxWorkGroup > 1<<16 || f.LocalMemBytes < 16<<10 || f.ComputeUnits < 1 {
		t.Errorf("implausible facts %v", f)
	}
	if (f.ImageMaxWidth == 0) != (f.ImageMaxHeight == 0) || f.ImageMaxWidth != 0 && f.ImageMaxWidth < 2048 {
		t.Errorf("implausible image limits %v", f)
	}
	if di.BaseAlign < 4 || di.BaseAlign&(di.BaseAlign-1) != 0 || di.MemoryBytes < 1<<20 {
		t.Errorf("base alignment %d, memory %d", di.BaseAlign, di.MemoryBytes)
	}
	hasFP16 := strings.Contains(" "+strings.Join(di.Extensions, " ")+" ", " cl_khr_fp16 ")
	if f.FP16 != hasFP16 {
		t.Errorf("fp16 %v, extensions %v", f.FP16, di.Extensions)
	}
	i := d.Info()
	if i.Kind != "opencl" || i.Name != di.Name || !strings.HasPrefix(i.Toolchain, "OpenCL ") {
		t.Errorf("info %+v", i)
	}
	for _, part := range []string{di.Name, di.DriverVersion, di.OpenCLC} {
		if part == "" || !strings.Contains(i.Fingerprint, part) {
			t.Errorf("fingerprint %q lacks %q", i.Fingerprint, part)
		}
	}
	tg, err := d.Target()
	if err != nil || tg.Arch != di.Name || tg.GPU != f || tg.Kind.String() != "opencl" {
		t.Errorf("target %v, %v", tg, err)
	}
	ps, err := List()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range ps {
		for _, ld := range p.Devices {
			found = found || ld.Name == di.Name && ld.Facts == f
		}
	}
	if !found {
		t.Errorf("List %+v does not hold the open device", ps)
	}
}

// TestAbsentLibraryIsUnavailableNamingEveryPathTried runs itself again in a process where
// no candidate library exists, so that the process-wide binding fails there.
func TestAbsentLibraryIsUnavailableNamingEveryPathTried(t *testing.T) {
	const missing = "/nonexistent/libOpenCL.so.1"
	if os.Getenv("KILN_OPENCL_TEST_CHILD") == "absent" {
		libraryName = "libkiln-absent-OpenCL.so.1"
		childOpenIsUnavailable(t)
		return
	}
	out := runChild(t, "absent", "KILN_LIBOPENCL="+missing)
	for _, want := range append([]string{missing, "; libkiln-absent-OpenCL.so.1: "}, dynlib.InDirs(libraryDirs, "libkiln-absent-OpenCL.so.1")...) {
		if !strings.Contains(out, want) {
			t.Errorf("the reason does not name %q: %s", want, out)
		}
	}
}

// TestNoPlatformIsUnavailableNamingTheLoader runs itself again with the ICD loader
// pointed at an empty vendor folder (OCL_ICD_VENDORS), where it finds no driver.
func TestNoPlatformIsUnavailableNamingTheLoader(t *testing.T) {
	if os.Getenv("KILN_OPENCL_TEST_CHILD") == "noplatform" {
		childOpenIsUnavailable(t)
		return
	}
	if _, err := loadAPI(); err != nil {
		t.Skipf("no OpenCL ICD loader (%v); skipping", err)
	}
	out := runChild(t, "noplatform", "OCL_ICD_VENDORS="+t.TempDir())
	if !strings.Contains(out, "no OpenCL platform") || !strings.Contains(out, "libOpenCL.so.1") {
		t.Errorf("the reason does not say there is no platform and name the loader: %s", out)
	}
}

// runChild runs the calling test again in a child process with KILN_OPENCL_TEST_CHILD
// set to mode and the extra environment, and returns its output.
func runChild(t *testing.T, mode string, env ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(append(os.Environ(), "KILN_OPENCL_TEST_CHILD="+mode), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the child failed: %v\n%s", err, out)
	}
	return string(out)
}

// childOpenIsUnavailable checks, in a child, that Open, List and Default are
// ErrUnavailable, and prints the reason for the parent.
func childOpenIsUnavailable(t *testing.T) {
	_, err := Open(Options{})
	if !errors.Is(err, devices.ErrUnavailable) {
		t.Fatalf("open: got %v, want ErrUnavailable", err)
	}
	if _, lerr := List(); !errors.Is(lerr, devices.ErrUnavailable) {
		t.Fatalf("list: got %v, want ErrUnavailable", lerr)
	}
	if _, derr := Default(); !errors.Is(derr, devices.ErrUnavailable) {
		t.Fatalf("default: got %v, want ErrUnavailable", derr)
	}
	fmt.Println("REASON:", err)
}

// axpyRoundTrip runs the fixture on n copies of x and checks every result.
func axpyRoundTrip(d *Device, k devices.Kernel, n int, x float32) error {
	in, err := d.Alloc(int64(4 * n))
	if err != nil {
		return err
	}
	defer d.Free(in)
	out, err := d.Alloc(int64(4 * n))
	if err != nil {
		return err
	}
	defer d.Free(out)
	raw := make([]byte, 4*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(x))
	}
	for round := 0; round < 20; round++ {
		if err := d.CopyIn(in, raw); err != nil {
			return err
		}
		if err := d.Launch(k, fixtureGeometry(n), []devices.Buffer{in, out}, []int64{int64(n), 0}); err != nil {
			return err
		}
		got := make([]byte, 4*n)
		if err := d.CopyOut(got, out); err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			if v := math.Float32frombits(binary.LittleEndian.Uint32(got[4*i:])); v != 2*x+1 {
				return fmt.Errorf("worker %v round %d: out[%d] = %v, want %v", x, round, i, v, 2*x+1)
			}
		}
	}
	return nil
}
