package opencl

import (
	"testing"
	"unsafe"
)

// The cost that decides how a view reaches a kernel (see doc.go): a sub-buffer made and
// released for each launch, against one kept with its buffer and looked up.

func BenchmarkSubBufferPerLaunch(b *testing.B) {
	d, v := benchView(b)
	a := d.api
	for b.Loop() {
		r := []uintptr{uintptr(v.offset), uintptr(v.size)}
		mem, s := a.create(a.createSubBuffer, v.mem, memReadWrite, bufferCreateTypeRegion, uintptr(unsafe.Pointer(&r[0])))
		if s != success {
			b.Fatal(check("clCreateSubBuffer", s))
		}
		a.call(a.releaseMemObject, mem)
	}
}

func BenchmarkSubBufferKept(b *testing.B) {
	d, v := benchView(b)
	for b.Loop() {
		if _, _, err := d.subBuffer(v); err != nil {
			b.Fatal(err)
		}
	}
}

// benchView opens the default device and makes a view at its base alignment.
func benchView(b *testing.B) (*Device, *buffer) {
	d, err := OpenDefault()
	if err != nil {
		b.Skipf("no OpenCL device: %v", err)
	}
	b.Cleanup(func() { d.Close() })
	buf, err := d.Alloc(4 * d.BaseAlign())
	if err != nil {
		b.Fatal(err)
	}
	v, err := d.Slice(buf, d.BaseAlign(), d.BaseAlign())
	if err != nil {
		b.Fatal(err)
	}
	return d, v.(*buffer)
}
