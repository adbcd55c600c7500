// Package opencl is the OpenCL device, driven through the OpenCL ICD loader
// (libOpenCL.so.1), which dispatches to whichever drivers are installed (PoCL, ROCm,
// NVIDIA, Intel). The loader is bound at run time with purego (no cgo): a binary without
// it runs everywhere, and its absence is devices.ErrUnavailable naming every path tried.
//
// Finding the loader: $KILN_LIBOPENCL, then libOpenCL.so.1 on the loader's path, then
// that name inside /usr/lib/x86_64-linux-gnu, /usr/lib/aarch64-linux-gnu, /usr/lib64,
// /usr/lib, /opt/rocm/lib and /usr/local/cuda/lib64. It is bound once per process. No
// platform (the loader found no driver: CL_PLATFORM_NOT_FOUND_KHR) or no such device is
// ErrUnavailable too.
//
// Choosing a device: List reports every platform and its devices with their facts;
// Options name one by the platform's and the device's index in that list; Default
// chooses the first GPU, else the first device.
//
// Model: a Device is one OpenCL device with its own context and one in-order command
// queue, created with CL_QUEUE_PROFILING_ENABLE when Options.Profiling (Time then
// reports a kernel's duration as the device measured it). Every copy, fill and launch is
// queued there, so they run in the order they were issued. CopyIn and CopyOut are
// blocking transfers (CopyIn's source may be reused on return); Copy, Launch and the
// zeroing of new buffers are queued and do not wait; Sync waits (clFinish). Free and
// Module.Close release their objects without waiting: OpenCL keeps an object until the
// commands queued on it have finished. Info's Fingerprint is "opencl/" followed by the
// platform name, the device name, the driver version and the OpenCL C version, joined
// by "/": what makes a program binary valid; Toolchain is the platform version (its
// compiler is the driver's). Facts gives the target's limits (work-items per
// work-group, local memory, compute units, image2d limits or none, fp16 from
// cl_khr_fp16); Arch, the device name, names the target's architecture.
//
// Memory: buffers are cl_mems with a size; OpenCL refuses empty buffers, so a zero-size
// one holds a byte. A view (devices.Slicer) is its buffer at an offset and is valid while
// the buffer is. Copies reach a view at any offset through the transfer's own offset.
// A kernel receives every buffer as two arguments, its root cl_mem and the view's byte
// offset in it (codegen's ByteOffsets: the kernel adds the offset to the root's address),
// and an image alone. There are no sub-buffers (clCreateSubBuffer): their lifetimes are
// kept differently by different drivers, and NVIDIA's (580, an H200) crashed inside
// clReleaseMemObject of one as a VM closed. BaseAlign (CL_DEVICE_MEM_BASE_ADDR_ALIGN, 128
// bytes on PoCL) is where the VM places views, so each tensor is as aligned as a buffer.
//
// Images (devices.Imager): AllocImage makes a zeroed read-write image2d of width×height
// texels, RGBA float32 (CL_FLOAT), or RGBA half (CL_HALF_FLOAT) where the device has
// cl_khr_fp16; the size is checked against CL_DEVICE_IMAGE2D_MAX_WIDTH and _HEIGHT (an
// error names both) and the format against clGetSupportedImageFormats. An image is a
// Buffer of width·height·texel bytes whose bytes are its texels in row-major order
// (texel (x, y) at (y·width+x)·texel bytes): CopyIn and CopyOut are blocking
// clEnqueueWriteImage/ReadImage of a prefix of whole texels (its whole rows, then the
// texels of one partial row); Copy is clEnqueueCopyBufferToImage, CopyImageToBuffer (a
// view of a buffer at any offset), or CopyImage between images of one shape and format.
// A kernel receives an image as its cl_mem argument, where the kernel declares an
// image2d_t; a view of an image is refused (images cannot be sliced). Free, ownership
// and ErrBadBuffer are as for buffers.
//
// Programs: Build compiles OpenCL C with clBuildProgram and returns the program binary
// (CL_PROGRAM_BINARIES) for a journal to keep; a compile error is devices.ErrBuild with
// the driver's build log, which names the line. Load takes such a binary
// (clCreateProgramWithBinary, then clBuildProgram, which finishes a binary without
// compiling source), or OpenCL C source after SourceMarker, a prefix no binary has, for
// tests and tools. A binary the driver refuses is devices.ErrLoad. Stats counts builds from source apart
// from loads of binaries, so a warm start can be checked to build nothing.
//
// Concurrency: OpenCL's calls are thread-safe, except that a kernel's arguments live on
// the cl_kernel object between clSetKernelArg and the enqueue that copies them; each
// kernel holds a lock over that span, so goroutines may launch one kernel concurrently.
//
// Kernel calling convention (the GPU one, see devices/cuda): a kernel is
//
//	__kernel void name(__global char *b0, long o0, ..., __global char *bn, long on, long d0, ..., long dk, __global long *status)
//
// with the buffers (inputs, then outputs) each as its cl_mem and a byte offset (an image
// as itself alone), each runtime dim by value, and the device's
// status block: three longs {code, detail0, detail1}, zeroed when the device opens and
// after each read. A kernel that fails claims the block once with a 32-bit
// atomic_cmpxchg from 0 on the code's first half (the base atomics of OpenCL C 1.1; the
// devices are little-endian, and the code is an int32), then writes the details. Launch
// queues the kernel on Geometry.Grid work-groups of Geometry.Block work-items (global
// size Grid×Block; every extent positive) and does not wait; the next Sync waits for the
// queue and reads the block, and a nonzero code is a *devices.KernelError wrapping
// devices.ErrLaunch, naming the kernels launched since the last Sync (at most 16 names).
// A launch whose buffers and dims do not match the kernel's parameter count
// (CL_KERNEL_NUM_ARGS) is refused.
//
// Invariants: a Buffer belongs to the device that allocated it; a freed, foreign or
// view-of-freed buffer is devices.ErrBadBuffer, never a call on a released cl_mem; the
// status block is zero whenever no failure is pending; errors name the failing call and
// its code by cl.h's name (CL_BUILD_PROGRAM_FAILURE). Foreign calls pass Go pointers as
// uintptr through call wrappers marked go:uintptrescapes, so what they point to is on
// the heap, which does not move.
//
// References: the OpenCL 3.0 API and OpenCL C specifications (Khronos), the OpenCL ICD
// loader's documentation, PoCL's documentation.
package opencl
