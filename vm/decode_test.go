package vm

import (
	"bytes"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/kilnrt/kiln/tensor"
)

// alignedCopy copies b into fresh memory starting at an address that is a multiple of
// DataAlign plus skew.
func alignedCopy(b []byte, skew int) []byte {
	buf := make([]byte, len(b)+2*DataAlign)
	start := (DataAlign - int(uintptr(unsafe.Pointer(&buf[0]))%DataAlign)) % DataAlign
	out := buf[start+skew : start+skew+len(b)]
	copy(out, b)
	return out
}

// splitFile encodes x and returns its metadata and data section in separate memory.
func splitFile(t *testing.T, x *Executable, skew int) (whole, meta, data []byte) {
	t.Helper()
	whole, err := x.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	off, err := DataOffset(whole[:HeaderSize])
	if err != nil {
		t.Fatal(err)
	}
	if off%DataAlign != 0 {
		t.Fatalf("data section at %d", off)
	}
	return whole, bytes.Clone(whole[:off]), alignedCopy(whole[off:], skew)
}

// TestDecodeAliases: from aligned data, every numeric constant is a view at its 64-byte
// aligned offset in data (bool and empty constants are copies); from misaligned data,
// only byte-sized constants are views; both re-encode to the original bytes, and meta
// is not retained.
func TestDecodeAliases(t *testing.T) {
	src := sampleConsts()
	_, offs, _, err := src.layoutConstants()
	if err != nil {
		t.Fatal(err)
	}
	for _, skew := range []int{0, 1} {
		whole, meta, data := splitFile(t, src, skew)
		x, err := Decode(meta, data, nil)
		if err != nil {
			t.Fatal(err)
		}
		clear(meta)
		if again, _ := x.MarshalBinary(); !bytes.Equal(again, whole) {
			t.Errorf("skew %d: re-encoding differs", skew)
		}
		if !x.Mapped() {
			t.Errorf("skew %d: Mapped is false", skew)
		}
		for i, c := range x.Constants {
			if offs[i]%DataAlign != 0 {
				t.Errorf("constant %d at offset %d", i, offs[i])
			}
			raw, ok := c.NativeBytes()
			aliased := ok && len(raw) > 0 && unsafe.Pointer(&raw[0]) == unsafe.Pointer(&data[offs[i]])
			want := c.DType != tensor.Bool && c.Len() > 0 && (skew == 0 || c.DType.Size() == 1)
			if aliased != want {
				t.Errorf("skew %d: constant %d (%v%v) aliases: %v, want %v", skew, i, c.DType, c.Shape, aliased, want)
			}
		}
	}
	_, meta, data := splitFile(t, sample(), 1)
	x, err := Decode(meta, data, nil)
	if err != nil || x.Mapped() {
		t.Errorf("one misaligned f32 constant: %v, mapped %v", err, x != nil && x.Mapped())
	}
}

type backingObj struct{ pad [64]byte }

// TestDecodeKeepsBacking: the backing object lives as long as the executable.
func TestDecodeKeepsBacking(t *testing.T) {
	_, meta, data := splitFile(t, sampleConsts(), 0)
	freed := make(chan struct{})
	b := &backingObj{}
	runtime.AddCleanup(b, func(ch chan struct{}) { close(ch) }, freed)
	x, err := Decode(meta, data, b)
	if err != nil {
		t.Fatal(err)
	}
	b = nil
	runtime.GC()
	runtime.GC()
	select {
	case <-freed:
		t.Fatal("backing released while the executable is reachable")
	case <-time.After(20 * time.Millisecond):
	}
	runtime.KeepAlive(x)
	x = nil
	for range 50 {
		runtime.GC()
		select {
		case <-freed:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Error("backing never released after the executable became unreachable")
}
