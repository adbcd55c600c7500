// Package devicetest is the conformance suite every device passes: allocation, copies
// in every direction, size and ownership errors, loading (and refusing garbage), kernel
// lookup, launch with buffers and runtime dims, and error codes from kernels.
//
// A device's own test supplies a Fixture: a binary for that device holding the kernel
// described below, built by the device's toolchain, and for a GPU the launch geometry
// that covers n elements.
//
// A kernel's nonzero status may surface at its Launch (the CPU runs kernels
// synchronously) or at the next Sync (a GPU queues launches and reads the status block
// when it waits); the suite accepts either and requires a *devices.KernelError with the
// code and the kernel's name, and a device that works again after the error is read.
package devicetest

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/devices"
)

// FixtureKernel is the name of the fixture kernel: for n = dims[0] float32 elements it
// computes out[i] = 2*in[i] + 1 (bufs[0] = in, bufs[1] = out), and returns dims[1] as its
// status code (so a non-zero dims[1] must surface as ErrLaunch).
const FixtureKernel = "kiln_test_axpy"

// Fixture is a device binary holding FixtureKernel.
type Fixture struct {
	Binary []byte
	// Geometry gives the launch grid covering n elements (one thread each, or fewer
	// threads looping); nil for devices that ignore geometry (the CPU).
	Geometry func(n int) devices.Geometry
}

// RunAll runs the whole suite on dev.
func RunAll(t *testing.T, dev devices.Device, fx Fixture) {
	t.Run("info", func(t *testing.T) {
		if i := dev.Info(); i.Kind == "" || i.Fingerprint == "" {
			t.Errorf("incomplete info %+v", i)
		}
	})
	t.Run("alloc-copy", func(t *testing.T) { allocCopy(t, dev) })
	t.Run("errors", func(t *testing.T) { bufferErrors(t, dev) })
	t.Run("load-launch", func(t *testing.T) { loadLaunch(t, dev, fx) })
}

func allocCopy(t *testing.T, dev devices.Device) {
	a, err := dev.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Free(a)
	b, err := dev.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Free(b)
	src := make([]byte, 64)
	for i := range src {
		src[i] = byte(i * 3)
	}
	if err := dev.CopyIn(a, src); err != nil {
		t.Fatal(err)
	}
	if err := dev.Copy(b, a); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 64)
	if err := dev.CopyOut(got, b); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if got[i] != src[i] {
			t.Fatalf("byte %d: got %d want %d", i, got[i], src[i])
		}
	}
	z, err := dev.Alloc(0)
	if err != nil {
		t.Fatalf("zero-size alloc: %v", err)
	}
	if err := dev.Free(z); err != nil {
		t.Errorf("free zero-size: %v", err)
	}
}

func bufferErrors(t *testing.T, dev devices.Device) {
	a, err := dev.Alloc(16)
	if err != nil {
		t.Fatal(err)
	}
	if err := dev.CopyIn(a, make([]byte, 17)); !errors.Is(err, devices.ErrBadBuffer) {
		t.Errorf("oversized CopyIn: %v", err)
	}
	if err := dev.CopyOut(make([]byte, 17), a); !errors.Is(err, devices.ErrBadBuffer) {
		t.Errorf("oversized CopyOut: %v", err)
	}
	if err := dev.Free(a); err != nil {
		t.Fatal(err)
	}
	if err := dev.CopyIn(a, make([]byte, 4)); !errors.Is(err, devices.ErrBadBuffer) {
		t.Errorf("use after free: %v", err)
	}
	if err := dev.Free(a); !errors.Is(err, devices.ErrBadBuffer) {
		t.Errorf("double free: %v", err)
	}
	if _, err := dev.Alloc(-1); !errors.Is(err, devices.ErrBadBuffer) {
		t.Errorf("negative alloc: %v", err)
	}
}

func loadLaunch(t *testing.T, dev devices.Device, fx Fixture) {
	if _, err := dev.Load([]byte("definitely not a binary")); !errors.Is(err, devices.ErrLoad) {
		t.Errorf("loading garbage: %v", err)
	}
	mod, err := dev.Load(fx.Binary)
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close()
	if _, err := mod.Kernel("no_such_kernel"); !errors.Is(err, devices.ErrLoad) {
		t.Errorf("missing kernel: %v", err)
	}
	k, err := mod.Kernel(FixtureKernel)
	if err != nil {
		t.Fatal(err)
	}
	const n = 1000
	in, _ := dev.Alloc(4 * n)
	out, _ := dev.Alloc(4 * n)
	defer dev.Free(in)
	defer dev.Free(out)
	raw := make([]byte, 4*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(float32(i)*0.5))
	}
	if err := dev.CopyIn(in, raw); err != nil {
		t.Fatal(err)
	}
	var geom devices.Geometry
	if fx.Geometry != nil {
		geom = fx.Geometry(n)
	}
	if err := dev.Launch(k, geom, []devices.Buffer{in, out}, []int64{n, 0}); err != nil {
		t.Fatal(err)
	}
	if err := dev.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := dev.CopyOut(raw, out); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if got, want := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])), float32(i)+1; got != want {
			t.Fatalf("out[%d] = %v, want %v", i, got, want)
		}
	}
	err = dev.Launch(k, geom, []devices.Buffer{in, out}, []int64{n, 7})
	if err == nil {
		err = dev.Sync()
	}
	var ke *devices.KernelError
	if !errors.Is(err, devices.ErrLaunch) || !errors.As(err, &ke) || ke.Code != 7 || !strings.Contains(ke.Kernel, FixtureKernel) {
		t.Errorf("kernel status 7: got %v, want a KernelError with code 7 naming %s", err, FixtureKernel)
	}
	// the error was reported once: the next launch and wait succeed
	if err := dev.Launch(k, geom, []devices.Buffer{in, out}, []int64{n, 0}); err != nil {
		t.Errorf("launch after a kernel error: %v", err)
	}
	if err := dev.Sync(); err != nil {
		t.Errorf("sync after a kernel error was read: %v", err)
	}
	if err := mod.Close(); err != nil {
		t.Fatal(err)
	}
	if err := dev.Launch(k, geom, []devices.Buffer{in, out}, []int64{n, 0}); !errors.Is(err, devices.ErrLaunch) {
		t.Errorf("launch after close: %v", err)
	}
}
