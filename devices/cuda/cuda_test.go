package cuda

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/devices/devicetest"
)

func TestConformance(t *testing.T) {
	d := deviceOrSkip(t)
	ptx, _ := loadFixture(t, d)
	devicetest.RunAll(t, d, devicetest.Fixture{Binary: ptx, Geometry: fixtureGeometry})
}

func TestCubinLoadsAndRuns(t *testing.T) {
	d := deviceOrSkip(t)
	cubin, err := nvrtcOrSkip(t).Compile(fixtureSource, "fixture.cu", CompileOptions{Arch: d.Arch(), Cubin: true})
	if errors.Is(err, devices.ErrUnavailable) {
		t.Skipf("no cubin: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	devicetest.RunAll(t, d, devicetest.Fixture{Binary: cubin, Geometry: fixtureGeometry})
}

// TestKernelStatusSurfacesAtSyncNamingTheKernels: launches do not wait; the first code a
// kernel writes (atomicCAS from 0) and its details surface at Sync, naming every kernel
// launched since the last Sync, and the block is clear again afterwards.
func TestKernelStatusSurfacesAtSyncNamingTheKernels(t *testing.T) {
	d := deviceOrSkip(t)
	_, mod := loadFixture(t, d)
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
	many := devices.Geometry{Grid: [3]int{4, 1, 1}, Block: [3]int{128, 1, 1}}
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
	_, mod := loadFixture(t, d)
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
	if k.(*kernel).params < 0 {
		t.Skipf("this driver (%s) cannot report parameter counts", d.drv.path)
	}
	if err := d.Launch(k, fixtureGeometry(4), bufs, []int64{4}); !errors.Is(err, devices.ErrLaunch) || !strings.Contains(err.Error(), "takes 5 parameters") {
		t.Errorf("a missing dim: got %v, want ErrLaunch naming the parameter count", err)
	}
	if err := d.Sync(); err != nil {
		t.Errorf("refused launches left an error: %v", err)
	}
}

func TestSliceViews(t *testing.T) {
	d := deviceOrSkip(t)
	b, err := d.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	v, err := d.Slice(b, 16, 8)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.CopyIn(v, []byte("kilnkiln")); err != nil {
		t.Fatal(err)
	}
	if err := d.CopyIn(v, make([]byte, 9)); !errors.Is(err, devices.ErrBadBuffer) {
		t.Errorf("overflowing a view: %v", err)
	}
	w, err := d.Slice(v, 4, 4) // a view of a view is a view of the buffer
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if err := d.CopyOut(got, w); err != nil || string(got) != "kiln" {
		t.Errorf("view of a view read %q, %v", got, err)
	}
	all := make([]byte, 64)
	if err := d.CopyOut(all, b); err != nil {
		t.Fatal(err)
	}
	if string(all[16:24]) != "kilnkiln" || all[15] != 0 || all[24] != 0 {
		t.Errorf("the view wrote %q", all)
	}
	for _, r := range [][2]int64{{60, 8}, {-1, 2}, {65, 0}, {8, -1}} {
		if _, err := d.Slice(b, r[0], r[1]); !errors.Is(err, devices.ErrBadBuffer) {
			t.Errorf("view at %d of %d bytes: %v", r[0], r[1], err)
		}
	}
	if _, err := d.Slice(b, 64, 0); err != nil {
		t.Errorf("empty view at the end: %v", err)
	}
	if err := d.Free(v); !errors.Is(err, devices.ErrBadBuffer) {
		t.Errorf("freeing a view: %v", err)
	}
	if err := d.Free(b); err != nil {
		t.Fatal(err)
	}
	if err := d.CopyIn(v, []byte("x")); !errors.Is(err, devices.ErrBadBuffer) {
		t.Errorf("a view of a freed buffer: %v", err)
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
	other := &buffer{ptr: 1 << 40, size: 8} // never allocated here
	if err := d.CopyOut(make([]byte, 8), other); !errors.Is(err, devices.ErrBadBuffer) {
		t.Errorf("copy out of an unknown buffer: %v", err)
	}
}

func TestFactsDescribeTheDevice(t *testing.T) {
	d := deviceOrSkip(t)
	f := d.Facts()
	t.Logf("%s %s: %v, warp %d, %d MiB; %+v", d.Info().Name, d.Arch(), f, d.WarpSize(), d.MemoryBytes()>>20, d.Info())
	if !regexp.MustCompile(`^sm_[1-9][0-9]+$`).MatchString(d.Arch()) {
		t.Errorf("arch %q", d.Arch())
	}
	if f.MaxWorkGroup < 256 || f.MaxWorkGroup > 4096 || f.LocalMemBytes < 16<<10 || f.ComputeUnits < 1 || d.WarpSize() != 32 {
		t.Errorf("implausible facts %v, warp %d", f, d.WarpSize())
	}
	if d.MemoryBytes() < 1<<30 {
		t.Errorf("memory %d bytes", d.MemoryBytes())
	}
	if i := d.Info(); i.Kind != "cuda" || i.Fingerprint != "cuda/"+d.Arch() || i.Name == "" {
		t.Errorf("info %+v", i)
	}
	// the compile target is the architecture's, whatever this GPU's multiprocessor
	// count: executables prebuilt for the architecture elsewhere are this GPU's too
	tg, err := d.Target()
	want, _ := ArchTarget(d.Arch())
	if err != nil || tg.Arch != d.Arch() || tg.Fingerprint() != want.Fingerprint() {
		t.Errorf("target %v, %v; want %v", tg, err, want)
	}
}

func TestAbsentDriverIsUnavailableNamingEveryPathTried(t *testing.T) {
	t.Setenv("KILN_LIBCUDA", "/nonexistent/libcuda.so.1")
	_, err := bindDriver()
	if err == nil {
		t.Skip("a CUDA driver is installed here")
	}
	for _, want := range append([]string{"/nonexistent/libcuda.so.1", "; libcuda.so.1: "}, driverDirs...) {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the reason does not name %q: %v", want, err)
		}
	}
	if _, err := Open(Options{}); !errors.Is(err, devices.ErrUnavailable) {
		t.Errorf("open: got %v, want ErrUnavailable", err)
	}
}

// TestGoroutinesShareTheDevice: calls from many goroutines (so from many OS threads)
// each find the device's context current, and each goroutine's results are its own.
func TestGoroutinesShareTheDevice(t *testing.T) {
	d := deviceOrSkip(t)
	_, mod := loadFixture(t, d)
	k, err := mod.Kernel(devicetest.FixtureKernel)
	if err != nil {
		t.Fatal(err)
	}
	const workers, n = 8, 4096
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func() { errs <- axpyRoundTrip(d, k, n, float32(w)) }()
	}
	for w := 0; w < workers; w++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Launch(k, fixtureGeometry(n), nil, []int64{n, 0}); !errors.Is(err, devices.ErrLaunch) && !errors.Is(err, devices.ErrUnavailable) {
		t.Errorf("launch on a closed device: %v", err)
	}
	if _, err := d.Alloc(8); !errors.Is(err, devices.ErrUnavailable) {
		t.Errorf("alloc on a closed device: %v", err)
	}
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
