package cpu

import (
	"context"
	"errors"
	"github.com/kilnrt/kiln/internal/testdata"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/devices/devicetest"
)

// fixtureSource is the device-conformance fixture (see devicetest.FixtureKernel), not an
// operator kernel: operator kernels only ever come from the code generator.
const fixtureSource = `
#include <stdint.h>
int32_t kiln_test_axpy(void *const *bufs, const int64_t *dims, void *ctx) {
	const float *in = (const float *)bufs[0];
	float *out = (float *)bufs[1];
	for (int64_t i = 0; i < dims[0]; i++) out[i] = 2.0f * in[i] + 1.0f;
	return (int32_t)dims[1];
}
`

func openOrSkip(t *testing.T) *Device {
	t.Helper()
	d, err := Open(Options{})
	if errors.Is(err, devices.ErrUnavailable) {
		testdata.NoCompiler(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestConformance(t *testing.T) {
	d := openOrSkip(t)
	defer d.Close()
	bin, err := d.Compiler().Build(context.Background(), fixtureSource)
	if err != nil {
		t.Fatal(err)
	}
	devicetest.RunAll(t, d, devicetest.Fixture{Binary: bin})
}

func TestBuildErrorCarriesCompilerMessage(t *testing.T) {
	d := openOrSkip(t)
	_, err := d.Compiler().Build(context.Background(), "int broken( {")
	if !errors.Is(err, devices.ErrBuild) || !strings.Contains(err.Error(), "error") {
		t.Errorf("got %v, want ErrBuild with the compiler's message", err)
	}
}

// TestObjectsAndLink: one object per unit, linked into a loadable shared object; bad
// source and a missing symbol at link time are build errors with the tool's message.
func TestObjectsAndLink(t *testing.T) {
	d := openOrSkip(t)
	ctx := context.Background()
	fix, err := d.Compiler().CompileObject(ctx, fixtureSource)
	if err != nil {
		t.Fatal(err)
	}
	so, err := d.Compiler().Link(ctx, [][]byte{fix})
	if err != nil {
		t.Fatal(err)
	}
	devicetest.RunAll(t, d, devicetest.Fixture{Binary: so})
	if _, err := d.Compiler().CompileObject(ctx, "int broken( {"); !errors.Is(err, devices.ErrBuild) || !strings.Contains(err.Error(), "error") {
		t.Errorf("bad source: got %v, want ErrBuild with the compiler's message", err)
	}
	dup, err := d.Compiler().CompileObject(ctx, fixtureSource)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Compiler().Link(ctx, [][]byte{fix, dup}); !errors.Is(err, devices.ErrBuild) || !strings.Contains(err.Error(), "kiln_test_axpy") {
		t.Errorf("duplicate kernels: got %v, want ErrBuild naming the clash", err)
	}
}

func TestSliceViews(t *testing.T) {
	d := openOrSkip(t)
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
	all := make([]byte, 64)
	if err := d.CopyOut(all, b); err != nil {
		t.Fatal(err)
	}
	if string(all[16:24]) != "kilnkiln" || all[15] != 0 || all[24] != 0 {
		t.Errorf("the view wrote %q", all)
	}
	if _, err := d.Slice(b, 60, 8); !errors.Is(err, devices.ErrBadBuffer) {
		t.Errorf("view past the end: %v", err)
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

func TestMissingCompiler(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("CC", "")
	if _, err := Open(Options{}); !errors.Is(err, devices.ErrUnavailable) || !strings.Contains(err.Error(), "apt-get install gcc") {
		t.Errorf("got %v, want ErrUnavailable with an install hint", err)
	}
	d, err := Open(Options{NoCompiler: true})
	if err != nil || d.Compiler() != nil {
		t.Errorf("NoCompiler open: %v", err)
	}
}
