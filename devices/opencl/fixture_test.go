package opencl

import (
	"errors"
	"testing"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/internal/testdata"
)

// fixtureSource is the device-conformance fixture (see devicetest.FixtureKernel) in the
// GPU calling convention (each buffer a cl_mem and a byte offset), kiln_test_fail, which writes its code and details to the
// status block from every work-item (only the first claim may land), and
// kiln_test_fill, which writes its value into every element of a view.
const fixtureSource = `
__kernel void kiln_test_axpy(__global char *in_b, long in_o, __global char *out_b, long out_o, long n, long code, __global long *status) {
	__global const float *in = (__global const float *)(in_b + in_o);
	__global float *out = (__global float *)(out_b + out_o);
	long stride = (long)get_global_size(0);
	for (long i = (long)get_global_id(0); i < n; i += stride)
		out[i] = 2.0f * in[i] + 1.0f;
	if (code != 0 && get_global_id(0) == 0 &&
	    atomic_cmpxchg((volatile __global int *)status, 0, (int)code) == 0) {
		status[1] = n;
		status[2] = 0;
	}
}

__kernel void kiln_test_fail(long code, long d0, long d1, __global long *status) {
	if (atomic_cmpxchg((volatile __global int *)status, 0, (int)code) == 0) {
		status[1] = d0;
		status[2] = d1;
	}
}

__kernel void kiln_test_fill(__global char *out_b, long out_o, long n, long value, __global long *status) {
	__global int *out = (__global int *)(out_b + out_o);
	for (long i = (long)get_global_id(0); i < n; i += (long)get_global_size(0))
		out[i] = (int)value;
}
`

// fixtureGeometry covers n elements with work-groups of 64 work-items.
func fixtureGeometry(n int) devices.Geometry {
	return devices.Geometry{Grid: [3]int{max(1, (n+63)/64), 1, 1}, Block: [3]int{64, 1, 1}}
}

// deviceOrSkip opens the default OpenCL device, or skips the test when there is no ICD
// loader, platform or device (fails it under KILN_REQUIRE_DATA=1, where CI installs
// PoCL).
func deviceOrSkip(t *testing.T, opts ...Options) *Device {
	t.Helper()
	o, err := Default()
	if err == nil && len(opts) > 0 {
		opts[0].Platform, opts[0].Device = o.Platform, o.Device
		o = opts[0]
	}
	var d *Device
	if err == nil {
		d, err = Open(o)
	}
	if errors.Is(err, devices.ErrUnavailable) {
		const how = "install an OpenCL driver (Debian: pocl-opencl-icd) and the ICD loader (ocl-icd-libopencl1), or set $KILN_LIBOPENCL"
		if testdata.Require() {
			t.Fatalf("no OpenCL device and KILN_REQUIRE_DATA=1 (%v): %s", err, how)
		}
		t.Skipf("no OpenCL device (%v; %s); skipping", err, how)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return d
}

// buildFixture builds the fixture for d and loads the binary.
func buildFixture(t *testing.T, d *Device) (binary []byte, mod devices.Module) {
	t.Helper()
	binary, err := d.Build(fixtureSource, "")
	if err != nil {
		t.Fatal(err)
	}
	mod, err = d.Load(binary)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mod.Close() })
	return binary, mod
}
