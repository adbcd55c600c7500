package cuda

import (
	"errors"
	"testing"
	"time"

	"github.com/kilnrt/kiln/devices"
)

// TestTimeMeasuresTheKernelOnTheGPU: a device opened for profiling times a launch with
// events: a positive duration, longer for 64 Mi elements than for 1 Ki, under the
// host's wall time of the call; a kernel's status still surfaces at Sync; a device
// opened without profiling refuses to time.
func TestTimeMeasuresTheKernelOnTheGPU(t *testing.T) {
	plain := deviceOrSkip(t)
	if _, err := plain.Time(nil, fixtureGeometry(1), nil, nil); err == nil {
		t.Error("a device opened without profiling timed a kernel")
	}
	d, err := Open(Options{Profiling: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	_, mod := loadFixture(t, d)
	k, err := mod.Kernel("kiln_test_axpy")
	if err != nil {
		t.Fatal(err)
	}
	measure := func(n int, code int64) time.Duration {
		in, err := d.Alloc(int64(4 * n))
		if err != nil {
			t.Fatal(err)
		}
		defer d.Free(in)
		out, err := d.Alloc(int64(4 * n))
		if err != nil {
			t.Fatal(err)
		}
		defer d.Free(out)
		start := time.Now()
		took, err := d.Time(k, fixtureGeometry(n), []devices.Buffer{in, out}, []int64{int64(n), code})
		wall := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		if took <= 0 || took > wall {
			t.Errorf("%d elements: measured %v, wall %v", n, took, wall)
		}
		return took
	}
	small, large := measure(1<<10, 0), measure(64<<20, 0)
	t.Logf("1 Ki elements %v, 64 Mi elements %v", small, large)
	if large <= small {
		t.Errorf("64 Mi elements took %v, 1 Ki %v", large, small)
	}
	measure(1<<10, 7)
	var ke *devices.KernelError
	if err := d.Sync(); !errors.As(err, &ke) || ke.Code != 7 {
		t.Errorf("Sync after a timed kernel that failed: %v, want its code 7", err)
	}
}
