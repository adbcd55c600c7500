// Package cpu is the CPU device. Memory is allocated outside the Go heap (anonymous mmap)
// so that kernels may keep pointers into it; MapHost (devices.HostMapper) lends host
// memory to kernels in place, read-only, without copying or ever unmapping it; kernels are C compiled by a C compiler found
// at run time ($CC, then gcc, then clang) into a shared object, loaded with purego
// (dlopen, no cgo), and called with one foreign call per launch.
//
// The compiler's path and version are part of the device fingerprint, so binaries built by
// another toolchain are not reused. A missing compiler is ErrUnavailable with a hint on
// how to install one; a compile error is ErrBuild carrying the compiler's output.
package cpu
