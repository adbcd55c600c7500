// Package devices is the runtime contract between the VM and hardware: memory, copies,
// loading device binaries, and launching kernels. Concrete devices (devices/cpu, later
// cuda and opencl) bind their native libraries at run time with purego; none is linked at
// build time, so one binary runs everywhere and an absent library is ErrUnavailable.
//
// Kernel calling convention, the same for every target: a kernel receives an array of
// buffer pointers (inputs, then preallocated outputs), an array of int64 runtime dims (the
// values of the symbols its shapes use, in the order recorded in the kernel table), and a
// context pointer. On the CPU: int32_t kernel(void *const *bufs, const int64_t *dims,
// void *ctx), returning 0 or an error code.
//
// Invariants: a Buffer belongs to the device that allocated it; using a freed buffer or one
// of another device is an error, never memory corruption; copies check sizes.
//
// This package is runtime half: it imports nothing from the compiler half.
package devices
