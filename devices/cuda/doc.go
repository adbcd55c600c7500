// Package cuda is the NVIDIA GPU device, driven through the CUDA driver API in
// libcuda.so.1, and NVRTC, which compiles CUDA C++ to PTX or cubin. Both libraries are
// bound at run time with purego (no cgo): a binary without them runs everywhere, and
// their absence is devices.ErrUnavailable naming every path tried.
//
// Finding the libraries: the driver is $KILN_LIBCUDA, then libcuda.so.1 on the loader's
// path, then /usr/lib/x86_64-linux-gnu, /usr/lib64, /usr/local/nvidia/lib64 (the NVIDIA
// container toolkit) and /usr/lib/wsl/lib. NVRTC is $KILN_NVRTC, then libnvrtc.so.13, .12
// and .11.2 on the loader's path, then those names and libnvrtc.so inside
// /usr/local/cuda/lib64, /usr/local/cuda/targets/x86_64-linux/lib and the NVIDIA wheels'
// folders (nvidia/cuda_nvrtc/lib, nvidia/cu13/lib) in Python's package folders. Each is
// bound once per process; cuInit's failure is final for the process.
//
// Model: a Device is one GPU's primary context (the one the CUDA runtime and other
// libraries share) and one non-blocking stream. Every copy, memset and launch is queued
// on that stream, so they run in the order they were issued. CopyIn returns once the
// driver has staged the host bytes; CopyOut, Free, Module.Close and Sync wait for the
// stream. Buffers are device pointers with a size; views (devices.Slicer) are offsets
// into their buffer and are valid while it is; a zero-size buffer holds one byte so
// every buffer has its own address. Info's Fingerprint is "cuda/" and the architecture
// ("cuda/sm_90"); Toolchain is NVRTC's version. Facts gives the probed GPU limits
// (threads and static shared memory per block, multiprocessor count, fp16), WarpSize the
// warp. Target, what the compiler schedules for, is the architecture's (ArchTarget: 1024
// threads and 48 KiB of shared memory per block, the architecture's data-center
// multiprocessor count; lowered only where the probed GPU has less), so an executable's
// journal key is the same on every GPU of an architecture. BuildPTX compiles a
// translation unit with NVRTC to PTX for the device's architecture.
//
// Offline is an architecture without a GPU (`kiln prebuild --cuda-arch sm_90` on a CPU
// node): the same Info, Target and BuildPTX as a GPU of the architecture with the same
// NVRTC, and every run-time call devices.ErrUnavailable.
//
// Finish (devices.Finisher) compiles PTX to a cubin for the GPU with the driver's linker
// (the step cuModuleLoadData takes on every load of PTX), keyed by the driver's version
// and the architecture (FinishKey), so that the engine can keep it in the journal.
//
// Profiling (Options.Profiling): Time (devices.Timer) records an event before and after
// the launch on the stream and returns the GPU's time between them (kiln bench --profile).
//
// Contexts are current per OS thread, and goroutines move between threads, so every
// call that needs the context locks its goroutine to its thread, pushes the context,
// calls, pops and unlocks. Measured on an H100 (driver 580): push and pop cost about
// 250-300 ns a call, against about 4.5 us to queue a launch and 20-23 us to launch and
// wait; cuCtxSetCurrent alone costs about 130-230 ns but leaves the context current on
// a thread shared with other Go code; handing each call to one goroutine locked to a
// thread where the context stays current costs 14-18 us a call in wake-ups, more than a
// launch. Push and pop also let calls from many goroutines run in parallel.
//
// Foreign calls pass Go pointers as uintptr through call wrappers marked
// go:uintptrescapes: what a converted pointer points to is moved to the heap, which does
// not move, so the driver never writes through a stale stack address.
//
// Kernel calling convention for GPUs (OpenCL follows it too): a kernel is
//
//	extern "C" __global__ void name(T0 *b0, ..., Tn *bn, long long d0, ..., long long dk, long long *status)
//
// with the buffers' device pointers (inputs, then outputs), each runtime dim by value (in
// the order the kernel table records), and a pointer to the device's status block: three
// int64 words {code, detail0, detail1}, zeroed when the device opens and after each read.
// A kernel that fails claims the block once with atomicCAS on code from 0 (so the first
// failure wins), then writes the details (devices' codes: KernelIndexOutOfRange gives the
// index and the extent, KernelOutOfBounds the buffer and the offset). Launch queues the
// kernel on devices.Geometry's grid and block (every extent positive: a zero geometry is
// an error here) and does not wait; the next Sync waits for the stream and reads the
// block, and a nonzero code is a *devices.KernelError wrapping devices.ErrLaunch, naming
// the kernels launched since the last Sync (at most 16 names). Where the driver reports
// parameter counts (cuFuncGetParamInfo, CUDA 12.4 and later), a launch whose buffers and
// dims do not match the kernel's parameters is refused instead of letting the driver
// read past them.
//
// Invariants: a Buffer belongs to the device that allocated it; a freed, foreign or
// view-of-freed buffer is devices.ErrBadBuffer, never a driver call on a stale pointer;
// the status block is zero whenever no failure is pending. A fault inside a kernel (an
// illegal address, as opposed to a status code) is reported by the driver at the next
// wait and leaves the primary context unusable for the rest of the process: every later
// call fails.
//
// References: the CUDA Driver API reference (cuda.h), the NVRTC user guide, the PTX ISA.
package cuda
