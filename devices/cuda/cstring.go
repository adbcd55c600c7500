package cuda

import (
	"unsafe"
)

// gostring copies the NUL-terminated C string at p (nil: "").
func gostring(p unsafe.Pointer) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(p, n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(p), n))
}

// ptr is a foreign function's pointer result as an unsafe.Pointer (C memory the Go
// collector does not manage).
func ptr(r uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&r)) }
