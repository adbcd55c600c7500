package opencl

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/devices"
)

func TestAllocBeyondTheDevicesLimitIsRefused(t *testing.T) {
	d := deviceOrSkip(t)
	limit := d.Describe().MaxAllocBytes
	if limit <= 0 || limit > d.Describe().MemoryBytes {
		t.Fatalf("max allocation %d of %d bytes", limit, d.Describe().MemoryBytes)
	}
	if _, err := d.Alloc(limit + 1); !errors.Is(err, devices.ErrBadBuffer) || !strings.Contains(err.Error(), "CL_DEVICE_MAX_MEM_ALLOC_SIZE") {
		t.Errorf("allocating past the limit: got %v, want ErrBadBuffer naming it", err)
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
	c, err := d.Slice(b, 40, 8)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Copy(c, v); err != nil {
		t.Fatal(err)
	}
	all := make([]byte, 64)
	if err := d.CopyOut(all, b); err != nil {
		t.Fatal(err)
	}
	if string(all[16:24]) != "kilnkiln" || string(all[40:48]) != "kilnkiln" || all[15] != 0 || all[24] != 0 || all[39] != 0 || all[48] != 0 {
		t.Errorf("the views wrote %q", all)
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

// TestKernelsWriteThroughViewsAtAnyOffset: a kernel writes through a view at the base
// alignment and through one at an odd 4-byte offset (each passed as its buffer and the
// offset), overlapping views too, and reads of views see what was written; an empty view
// launches; the buffer frees afterwards.
func TestKernelsWriteThroughViewsAtAnyOffset(t *testing.T) {
	d := deviceOrSkip(t)
	_, mod := buildFixture(t, d)
	fill, err := mod.Kernel("kiln_test_fill")
	if err != nil {
		t.Fatal(err)
	}
	align := d.BaseAlign()
	size := 4 * align
	b, err := d.Alloc(size)
	if err != nil {
		t.Fatal(err)
	}
	v, err := d.Slice(b, align, align) // align/4 int32 elements
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Launch(fill, fixtureGeometry(int(align/4)), []devices.Buffer{v}, []int64{align / 4, 7}); err != nil {
		t.Fatal(err)
	}
	odd, err := d.Slice(b, align+4, 8) // overlaps v
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Launch(fill, fixtureGeometry(2), []devices.Buffer{odd}, []int64{2, 9}); err != nil {
		t.Fatalf("a view at an odd offset passed to a kernel: %v", err)
	}
	empty, _ := d.Slice(b, 3, 0)
	if err := d.Launch(fill, fixtureGeometry(1), []devices.Buffer{empty}, []int64{0, 9}); err != nil {
		t.Errorf("an empty view passed to a kernel: %v", err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, size)
	if err := d.CopyOut(raw, b); err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < size/4; i++ {
		want := uint32(0)
		switch {
		case i == align/4+1 || i == align/4+2:
			want = 9
		case i >= align/4 && i < align/2:
			want = 7
		}
		if got := binary.LittleEndian.Uint32(raw[4*i:]); got != want {
			t.Fatalf("element %d = %d, want %d", i, got, want)
		}
	}
	if err := d.CopyOut(raw[:8], odd); err != nil || binary.LittleEndian.Uint32(raw) != 9 {
		t.Errorf("reading a view at an odd offset: %v, %v", raw[:8], err)
	}
	if err := d.Free(b); err != nil {
		t.Fatal(err)
	}
}
