package httpapi

import (
	"testing"
	"unsafe"
)

// TestBodyPoolRecyclesLargeBuffersByClass: a large body's buffer has room for the
// body and the alignment pad, starts 8-byte aligned, and comes back from its class
// once given back; small bodies are not pooled, and a buffer of another class is not
// handed out for a larger body.
func TestBodyPoolRecyclesLargeBuffersByClass(t *testing.T) {
	var p bodyPool
	if _, ok := p.get(1000); ok {
		t.Errorf("a 1000-byte body is pooled")
	}
	n := 602_200 // squeezenet's binary request
	b, ok := p.get(n + 7)
	if !ok || cap(b) < n+7 || len(b) != 0 || uintptr(unsafe.Pointer(unsafe.SliceData(b)))%8 != 0 {
		t.Fatalf("get(%d): len %d cap %d pooled %v", n+7, len(b), cap(b), ok)
	}
	b = append(b, 1, 2, 3)
	p.put(b)
	again, _ := p.get(n)
	if unsafe.SliceData(again) != unsafe.SliceData(b) || len(again) != 0 {
		t.Errorf("the buffer given back is not reused for a body of its class")
	}
	p.put(again)
	if big, _ := p.get(2 * cap(b)); unsafe.SliceData(big) == unsafe.SliceData(b) || cap(big) < 2*cap(b) {
		t.Errorf("a buffer of cap %d was handed out for a body of %d bytes", cap(big), 2*cap(b))
	}
}
