package opencl

import (
	"errors"
	"testing"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/devices/devicetest"
)

// TestGoroutinesShareOneKernel: goroutines launching the same kernel object on their
// own buffers each get their own results (the kernel's arguments are set and queued
// under its lock), and the device refuses work after Close.
func TestGoroutinesShareOneKernel(t *testing.T) {
	d := deviceOrSkip(t)
	_, mod := buildFixture(t, d)
	k, err := mod.Kernel(devicetest.FixtureKernel)
	if err != nil {
		t.Fatal(err)
	}
	const workers, n = 8, 1024
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func() { errs <- axpyRoundTrip(d, k, n, float32(w)) }()
	}
	for w := 0; w < workers; w++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Launch(k, fixtureGeometry(n), nil, []int64{n, 0}); !errors.Is(err, devices.ErrUnavailable) {
		t.Errorf("launch on a closed device: %v", err)
	}
	if _, err := d.Alloc(8); !errors.Is(err, devices.ErrUnavailable) {
		t.Errorf("alloc on a closed device: %v", err)
	}
	if _, err := d.Build(fixtureSource, ""); !errors.Is(err, devices.ErrUnavailable) {
		t.Errorf("build on a closed device: %v", err)
	}
	if err := mod.Close(); err != nil {
		t.Errorf("closing a module after its device: %v", err)
	}
}

func TestTimeReportsTheKernelsDuration(t *testing.T) {
	d := deviceOrSkip(t, Options{Profiling: true})
	_, mod := buildFixture(t, d)
	k, err := mod.Kernel(devicetest.FixtureKernel)
	if err != nil {
		t.Fatal(err)
	}
	const n = 1 << 16
	in, _ := d.Alloc(4 * n)
	out, _ := d.Alloc(4 * n)
	defer d.Free(in)
	defer d.Free(out)
	dur, err := d.Time(k, fixtureGeometry(n), []devices.Buffer{in, out}, []int64{n, 0})
	if err != nil {
		t.Fatal(err)
	}
	if dur <= 0 {
		t.Errorf("duration %v", dur)
	}
	plain := deviceOrSkip(t)
	_, pmod := buildFixture(t, plain)
	pk, _ := pmod.Kernel(devicetest.FixtureKernel)
	pin, _ := plain.Alloc(4 * n)
	pout, _ := plain.Alloc(4 * n)
	if _, err := plain.Time(pk, fixtureGeometry(n), []devices.Buffer{pin, pout}, []int64{n, 0}); err == nil {
		t.Error("timing on a device opened without profiling succeeded")
	}
}
