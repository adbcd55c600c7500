package cpu

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"syscall"
	"testing"

	"github.com/kilnrt/kiln/devices"
)

// TestMapHost: a kernel reads host memory mapped read-only without a copy; CopyOut and
// views work; CopyIn and Copy into it are refused; Free and Close leave it mapped.
func TestMapHost(t *testing.T) {
	d := openOrSkip(t)
	defer d.Close()
	const n = 16
	mem, err := syscall.Mmap(-1, 0, 4096, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(mem)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(mem[4*i:], math.Float32bits(float32(i)))
	}
	if err := syscall.Mprotect(mem, syscall.PROT_READ); err != nil { // like a file mapped PROT_READ
		t.Fatal(err)
	}
	in, err := d.MapHost(mem[:4*n])
	if err != nil {
		t.Fatal(err)
	}
	if in.Size() != 4*n {
		t.Errorf("size %d", in.Size())
	}
	out, err := d.Alloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	bin, err := d.Compiler().Build(context.Background(), fixtureSource)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := d.Load(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close()
	k, err := mod.Kernel("kiln_test_axpy")
	if err != nil {
		t.Fatal(err)
	}
	half, err := d.Slice(in, 4*n/2, 4*n/2)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Launch(k, devices.Geometry{}, []devices.Buffer{half, out}, []int64{n / 2, 0}); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4*n/2)
	if err := d.CopyOut(got, out); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n/2; i++ {
		if v := math.Float32frombits(binary.LittleEndian.Uint32(got[4*i:])); v != 2*float32(n/2+i)+1 {
			t.Errorf("element %d: %v", i, v)
		}
	}
	if err := d.CopyOut(got, in); err != nil || got[4] != mem[4] || got[7] != mem[7] {
		t.Errorf("CopyOut of mapped memory: %v", err)
	}
	for name, err := range map[string]error{
		"CopyIn":         d.CopyIn(in, []byte{1}),
		"CopyIn (view)":  d.CopyIn(half, []byte{1}),
		"Copy onto it":   d.Copy(in, out),
		"free of a view": d.Free(half),
	} {
		if !errors.Is(err, devices.ErrBadBuffer) {
			t.Errorf("%s: got %v, want ErrBadBuffer", name, err)
		}
	}
	if err := d.Free(in); err != nil {
		t.Fatal(err)
	}
	if err := d.CopyOut(got, in); !errors.Is(err, devices.ErrBadBuffer) {
		t.Errorf("a freed mapping: %v", err)
	}
	if math.Float32frombits(binary.LittleEndian.Uint32(mem[12:])) != 3 { // faults if unmapped
		t.Error("Free changed the memory")
	}
	empty, err := d.MapHost(nil)
	if err != nil || empty.Size() != 0 {
		t.Errorf("empty mapping: %v", err)
	}
	if _, err := d.MapHost(mem[:8]); err != nil {
		t.Fatal(err)
	}
	d.Close() // frees every buffer, mapped ones without unmapping
	if math.Float32frombits(binary.LittleEndian.Uint32(mem[4:])) != 1 {
		t.Error("Close changed the memory")
	}
}
