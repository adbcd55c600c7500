// Package cpu is the CPU device. Memory is allocated outside the Go heap (anonymous mmap)
// so that kernels may keep pointers into it; MapHost (devices.HostMapper) lends host
// memory to kernels in place, read-only, without copying or ever unmapping it; kernels are C compiled by a C compiler found
// at run time ($CC, then gcc, then clang) into a shared object, loaded with purego
// (dlopen, no cgo), and called with one foreign call per launch. A launch yields the
// goroutine's processor every 2 ms (yieldNow), so that a long run of launches, which
// the Go runtime counts as system calls, never outlives its time slice and has its
// processor taken by the runtime's monitor in the middle of a kernel.
//
// The device's fingerprint is the host's instruction-set features (target.Host); the C
// compiler's Identity (its version and flags) is the device's Toolchain, part of the
// journal keys of kernel objects, so object code built by another toolchain is not
// reused. A missing compiler is ErrUnavailable with a hint on
// how to install one; a compile error is ErrBuild carrying the compiler's output.
//
// Kernels are built with -march=native, which names no instruction set by itself: the
// compiler's Identity (its version and flags, for cache keys) carries what -march=native
// resolves to, as the compiler reports it with -### (native.go), so object code built for
// one CPU is never reused on another that lacks an extension the compiler used. The
// resolution is preferred over explicit -m flags computed from target.Features: it keeps
// the generated code exactly what the compiler's own tuning for this CPU gives, needs no
// table of extensions per architecture in kiln, and works for gcc and clang alike. A
// compiler that refuses -march=native (a cross compiler, e.g. $CC=aarch64-linux-gnu-gcc
// for an arm64 kiln run under qemu-user) builds without it, for its own default target
// (the architecture's baseline), which its version line names.
//
// Under an ISA cap (KILN_CPU_ISA, target.ISAEnv), which drops the features above a level
// from target.Host and so from the device's fingerprint, the compiler flags follow
// -march=native with the -mno- flags that take away what the cap removes (isacap.go:
// -mno-avx512f for avx2; no AVX, AVX2, FMA, F16C for sse4; and no SSE3 to SSE4.2 for
// generic); they are part of the Identity, so kernel keys under one cap differ from those
// under another. An unknown cap is target.ErrUnknownLevel from Open and FindCompiler.
//
// Builds write their files in a directory of their own inside a work directory claimed
// through internal/workdir (workdir.go): the journal's tmp/ when SetWorkBase names it,
// else kiln-<uid> in $TMPDIR. Claims of processes that died are removed when a compiler
// claims, so a SIGKILL does not leave compiler inputs behind for good.
package cpu
