package cuda

import (
	"errors"
	"os"
	"testing"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/internal/testdata"
)

// fixtureSource is the device-conformance fixture (see devicetest.FixtureKernel) in the
// GPU calling convention, and kiln_test_fail, which writes its code and details to the
// status block from every thread (only the first write may land).
const fixtureSource = `
extern "C" __global__ void kiln_test_axpy(const float *in, float *out, long long n, long long code, long long *status) {
	long long stride = (long long)gridDim.x * blockDim.x;
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
		out[i] = 2.0f * in[i] + 1.0f;
	if (code != 0 && blockIdx.x == 0 && threadIdx.x == 0 &&
	    atomicCAS((unsigned long long *)status, 0ull, (unsigned long long)code) == 0ull) {
		status[1] = n;
		status[2] = 0;
	}
}

extern "C" __global__ void kiln_test_fail(long long code, long long d0, long long d1, long long *status) {
	if (atomicCAS((unsigned long long *)status, 0ull, (unsigned long long)code) == 0ull) {
		status[1] = d0;
		status[2] = d1;
	}
}
`

// fixtureGeometry covers n elements with blocks of 256 threads.
func fixtureGeometry(n int) devices.Geometry {
	return devices.Geometry{Grid: [3]int{max(1, (n+255)/256), 1, 1}, Block: [3]int{256, 1, 1}}
}

// nvrtcOrSkip finds NVRTC, or skips the test (fails it under KILN_REQUIRE_DATA=1).
func nvrtcOrSkip(t *testing.T) *NVRTC {
	t.Helper()
	nv, err := FindNVRTC()
	if errors.Is(err, devices.ErrUnavailable) {
		const how = "install NVRTC (Debian: libnvrtc11.2; NVIDIA: the CUDA toolkit or the nvidia-cuda-nvrtc wheel), or set $KILN_NVRTC"
		if testdata.Require() {
			t.Fatalf("NVRTC is absent and KILN_REQUIRE_DATA=1 (%v): %s", err, how)
		}
		t.Skipf("NVRTC is absent (%v; %s); skipping", err, how)
	}
	if err != nil {
		t.Fatal(err)
	}
	return nv
}

// deviceOrSkip opens GPU 0, or skips the test when there is no driver or device (fails
// it under KILN_REQUIRE_GPU=1, for runs on a machine that has one).
func deviceOrSkip(t *testing.T) *Device {
	t.Helper()
	d, err := Open(Options{})
	if errors.Is(err, devices.ErrUnavailable) {
		if os.Getenv("KILN_REQUIRE_GPU") == "1" {
			t.Fatalf("no CUDA device and KILN_REQUIRE_GPU=1: %v", err)
		}
		t.Skipf("no CUDA device (%v); skipping", err)
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

// loadFixture compiles the fixture to PTX for d and loads it.
func loadFixture(t *testing.T, d *Device) (ptx []byte, mod devices.Module) {
	t.Helper()
	ptx, err := nvrtcOrSkip(t).Compile(fixtureSource, "fixture.cu", CompileOptions{Arch: d.Arch()})
	if err != nil {
		t.Fatal(err)
	}
	mod, err = d.Load(ptx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mod.Close() })
	return ptx, mod
}
