package gputest

import (
	"errors"
	"os"
	"testing"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/devices/cuda"
	"github.com/kilnrt/kiln/devices/opencl"
	"github.com/kilnrt/kiln/internal/testdata"
)

// OpenCLHow says how to get an OpenCL device.
const OpenCLHow = "install an OpenCL driver (Debian: pocl-opencl-icd) and the ICD loader (ocl-icd-libopencl1), or set $KILN_LIBOPENCL"

// OpenCL opens the default OpenCL device (the first GPU, else the first device), or
// skips the test when there is none (fails it under KILN_REQUIRE_DATA=1).
func OpenCL(t testing.TB) *opencl.Device {
	t.Helper()
	o, err := opencl.Default()
	var d *opencl.Device
	if err == nil {
		d, err = opencl.Open(o)
	}
	if errors.Is(err, devices.ErrUnavailable) {
		if testdata.Require() {
			t.Fatalf("no OpenCL device and KILN_REQUIRE_DATA=1 (%v): %s", err, OpenCLHow)
		}
		t.Skipf("no OpenCL device (%v; %s); skipping", err, OpenCLHow)
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

// CUDA opens CUDA GPU 0, or skips the test when there is no driver or device (fails
// it under KILN_REQUIRE_GPU=1).
func CUDA(t testing.TB) *cuda.Device {
	t.Helper()
	d, err := cuda.Open(cuda.Options{})
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

// NVRTCHow says how to get NVRTC.
const NVRTCHow = "install NVRTC (Debian: libnvrtc11.2 and libnvrtc-builtins11.8 from non-free; NVIDIA: the CUDA toolkit or the nvidia-cuda-nvrtc wheel), or set $KILN_NVRTC"

// CUDAArch is the compile-only CUDA device of arch ("sm_90"), or skips the test when
// there is no NVRTC (fails it under KILN_REQUIRE_DATA=1).
func CUDAArch(t testing.TB, arch string) *cuda.Offline {
	t.Helper()
	o, err := cuda.NewOffline(arch)
	if errors.Is(err, devices.ErrUnavailable) {
		if testdata.Require() {
			t.Fatalf("NVRTC is absent and KILN_REQUIRE_DATA=1 (%v): %s", err, NVRTCHow)
		}
		t.Skipf("NVRTC is absent (%v; %s); skipping", err, NVRTCHow)
	}
	if err != nil {
		t.Fatal(err)
	}
	return o
}
