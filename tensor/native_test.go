package tensor

import (
	"testing"
	"unsafe"
)

// TestFromNative: raw bytes become a tensor sharing their memory when aligned; a
// misaligned, wrongly sized, bool or empty input is refused (the caller copies).
func TestFromNative(t *testing.T) {
	if !hostLittleEndian {
		t.Skip("big-endian host: FromNative never aliases")
	}
	src := MustFromSlice(Shape{2, 3}, []float32{1, 2, 3, 4, 5, 6})
	raw, _ := src.NativeBytes()
	buf := make([]byte, len(raw)+8) // 8-aligned by the allocator
	copy(buf, raw)
	v, ok := FromNative(Float32, Shape{2, 3}, buf[:len(raw)])
	if !ok || v.String() != src.String() || v.Check() != nil {
		t.Fatalf("aligned: got %v, %v", v, ok)
	}
	if unsafe.Pointer(&v.Data.([]float32)[0]) != unsafe.Pointer(&buf[0]) {
		t.Error("the tensor does not alias the bytes")
	}
	shifted := buf[1 : 1+len(raw)]
	refused := map[string]bool{}
	_, refused["misaligned"] = FromNative(Float32, Shape{2, 3}, shifted)
	_, refused["short"] = FromNative(Float32, Shape{2, 3}, buf[:len(raw)-4])
	_, refused["bool"] = FromNative(Bool, Shape{2}, []byte{1, 0})
	_, refused["empty"] = FromNative(Float32, Shape{0}, nil)
	_, refused["string"] = FromNative(String, Shape{1}, buf[:8])
	for name, ok := range refused {
		if ok {
			t.Errorf("%s: aliased", name)
		}
	}
	if b, ok := FromNative(Uint8, Shape{3}, shifted[:3]); !ok || b.Len() != 3 {
		t.Error("bytes have no alignment requirement")
	}
}
