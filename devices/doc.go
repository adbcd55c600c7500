// Package devices is the runtime contract between the VM and hardware: memory, copies,
// loading device binaries, and launching kernels. Concrete devices (devices/cpu,
// devices/cuda, devices/opencl) bind their native libraries at run time with purego;
// none is linked at build time, so one binary runs everywhere and an absent library is
// ErrUnavailable.
//
// Kernel calling convention: a kernel receives its buffer pointers (inputs, then
// preallocated outputs), its int64 runtime dims (the values of the symbols its shapes
// use, in the order recorded in the kernel table), and a place to report failure. GPU
// kernels take them as separate parameters and report through the device's status block
// (see devices/cuda; devices/opencl follows it in OpenCL C); a GPU launch does not wait,
// so a kernel's code surfaces at the next Sync. CPU kernels take an array of buffer pointers, an array of dims and a context
// pointer, and their code surfaces at Launch: int32_t kernel(void *const *bufs,
// const int64_t *dims, void *ctx), returning 0 or an error code; the context is three
// int64 words: the threads parallel loops may use, then two words of detail a failing
// kernel may write (KernelIndexOutOfRange: the index and the extent; KernelOutOfBounds:
// the buffer and the element offset). A nonzero code is a *KernelError.
//
// Host memory: a device implementing HostMapper can use caller-owned host memory as a
// buffer without a copy (the VM binds constants mapped from an executable file this
// way). Such a buffer is read-only for the device: kernels only read it, copies into it
// are refused, and Free forgets it without releasing the memory, which the caller keeps
// valid and unchanged until then.
//
// Images: a device implementing Imager allocates 2-D images of RGBA texels (OpenCL's
// image2d_t) as Buffers whose bytes are the texels in row-major order; copies move them
// in that order, kernels receive them as image arguments, and they cannot be viewed
// (Slicer refuses them). ImageOf tells an image from a buffer.
//
// Invariants: a Buffer belongs to the device that allocated (or mapped) it; using a freed
// buffer or one of another device is an error, never memory corruption; copies check
// sizes.
//
// This package is runtime half: it imports nothing from the compiler half.
package devices
