package devices

import (
	"errors"
	"fmt"
	"time"
)

var (
	// ErrUnavailable: the device (or its native library, or its toolchain) is absent.
	ErrUnavailable = errors.New("device unavailable")
	// ErrBuild: a kernel source did not compile; the error carries the compiler's message.
	ErrBuild = errors.New("kernel build failed")
	// ErrBadBuffer: a buffer that is freed, foreign to the device, or too small.
	ErrBadBuffer = errors.New("invalid buffer")
	// ErrLoad: a device binary could not be loaded, or lacks a requested kernel.
	ErrLoad = errors.New("cannot load device binary")
	// ErrLaunch: a kernel returned an error code or could not be launched.
	ErrLaunch = errors.New("kernel launch failed")
)

// Codes a kernel returns besides 0.
const (
	// KernelOutOfMemory: a scratch allocation inside the kernel failed.
	KernelOutOfMemory = 2
	// KernelIndexOutOfRange: an index read from data was outside [-n, n); Detail holds
	// the first such index and n.
	KernelIndexOutOfRange = 3
	// KernelOutOfBounds: a bounds-checked kernel (a debug build) accessed an element
	// outside one of its buffers, a compiler bug; Detail holds the buffer's number (its
	// argument position, or past the arguments one of the kernel's own allocations) and
	// the element offset of the first such access.
	KernelOutOfBounds = 4
)

// KernelError is a kernel's nonzero return code with the detail it wrote to its
// context; it wraps ErrLaunch.
type KernelError struct {
	Kernel string
	Code   int32
	Detail [2]int64
}

func (e *KernelError) Error() string {
	return fmt.Sprintf("%v: kernel %q returned %d", ErrLaunch, e.Kernel, e.Code)
}

func (e *KernelError) Unwrap() error { return ErrLaunch }

// Info describes a device for logs, cache keys and `kiln inspect`.
type Info struct {
	Kind string // "cpu", "cuda", "opencl"
	Name string // e.g. the CPU model name
	// Fingerprint identifies what makes a device binary valid here (ISA features, GPU
	// architecture); a binary built under another fingerprint is refused and rebuilt.
	Fingerprint string
	// Toolchain names the compiler that builds binaries here (empty when none): part of
	// cache keys, not of validity, so a binary runs where no compiler is installed.
	Toolchain string
	// Threads is how many threads the device's parallel loops run on (0: not a CPU
	// thread pool); tuning records are measured and applied per thread count.
	Threads int
}

// Buffer is device memory.
type Buffer interface {
	Size() int64
}

// Module is a loaded device binary.
type Module interface {
	// Kernel looks up an entry point by name.
	Kernel(name string) (Kernel, error)
	// Close unloads the module; its kernels must not be launched afterwards.
	Close() error
}

// Kernel is an entry point of a loaded module.
type Kernel interface {
	Name() string
}

// Geometry is the launch grid for GPU kernels; CPU kernels ignore it (they parallelize
// inside, through the context's thread pool).
type Geometry struct {
	Grid, Block [3]int
}

// Device is one piece of hardware.
type Device interface {
	Info() Info
	Alloc(bytes int64) (Buffer, error)
	Free(b Buffer) error
	CopyIn(dst Buffer, src []byte) error
	CopyOut(dst []byte, src Buffer) error
	Copy(dst, src Buffer) error
	// Load loads a device binary (a shared object on the CPU, PTX/cubin on CUDA).
	Load(binary []byte) (Module, error)
	// Launch runs a kernel on buffers (inputs then outputs) and runtime dims.
	Launch(k Kernel, g Geometry, bufs []Buffer, dims []int64) error
	// Sync waits for all launched work.
	Sync() error
	Close() error
}

// Slicer is implemented by devices whose buffers can be viewed in part (the VM places
// tensors at offsets inside one arena). A view is valid while its buffer is.
type Slicer interface {
	Slice(b Buffer, offset, size int64) (Buffer, error)
}

// Timer is implemented by GPU devices that measure a kernel's run on the device
// (profiling events): Time launches like Launch, waits for the kernel and returns how
// long it ran, when Timing reports that the device was opened to measure (a kernel's
// failure still surfaces at Sync).
type Timer interface {
	Timing() bool
	Time(k Kernel, g Geometry, bufs []Buffer, dims []int64) (time.Duration, error)
}

// Finisher is implemented by GPUs whose driver finishes compiling a binary when it loads
// it (CUDA: PTX to the GPU's machine code in cuModuleLoadData). Finish does that step
// ahead and returns a binary Load takes as it is, so that a journal can keep it and a
// later start skips the step; a binary that needs none comes back unchanged. FinishKey
// names what Finish's output depends on besides its input (the driver's version and the
// architecture): part of the journal key.
type Finisher interface {
	Finish(binary []byte) ([]byte, error)
	FinishKey() string
}

// HostMapper is implemented by devices that can use host memory as a buffer without
// copying it (the CPU: constants mapped from an executable file). MapHost returns a
// buffer over mem, which the caller keeps valid and unchanged until the buffer is freed:
// kernels only read it, CopyIn into it (or Copy onto it) is refused with ErrBadBuffer,
// and Free releases only the device's bookkeeping, never mem itself (which may be a
// read-only file mapping the device does not own). Views (Slicer) work as on any buffer.
type HostMapper interface {
	MapHost(mem []byte) (Buffer, error)
}

// ImageFormat is the texel format of a 2-D image: four channels (RGBA) of one type.
type ImageFormat uint8

const (
	// ImageRGBAF32 texels are four float32 (16 bytes).
	ImageRGBAF32 ImageFormat = 1
	// ImageRGBAF16 texels are four IEEE half floats (8 bytes); only devices with fp16.
	ImageRGBAF16 ImageFormat = 2
)

// TexelBytes is the size of one texel of f; 0 for an unknown format.
func (f ImageFormat) TexelBytes() int64 {
	switch f {
	case ImageRGBAF32:
		return 16
	case ImageRGBAF16:
		return 8
	}
	return 0
}

func (f ImageFormat) String() string {
	switch f {
	case ImageRGBAF32:
		return "rgba-f32"
	case ImageRGBAF16:
		return "rgba-f16"
	}
	return fmt.Sprintf("image-format(%d)", uint8(f))
}

// Imager is implemented by devices with 2-D images (OpenCL image2d_t). AllocImage
// returns a zeroed image of width×height texels as a Buffer whose Size is
// width·height·TexelBytes: Free releases it; CopyIn and CopyOut move its bytes, texels in
// row-major order (texel (x, y) at byte (y·width+x)·TexelBytes), a prefix when shorter;
// Copy moves bytes between an image and a buffer (or another image) in that same
// order; Launch passes it to a kernel as an image argument. An image cannot be viewed
// (Slicer refuses it with ErrBadBuffer). A size beyond ImageLimits, or a format the
// device does not support, is ErrBadBuffer naming the limits or the format.
type Imager interface {
	AllocImage(width, height int, format ImageFormat) (Buffer, error)
	// ImageLimits are the largest width and height in texels (0, 0: no images).
	ImageLimits() (maxWidth, maxHeight int)
}

// Image is implemented by the Buffers an Imager allocates. A device's buffers may
// implement it too: one that is not an image reports zeros (format 0).
type Image interface {
	Buffer
	ImageShape() (width, height int, format ImageFormat)
}

// ImageOf reports b's image shape, ok false when b is not an image.
func ImageOf(b Buffer) (width, height int, format ImageFormat, ok bool) {
	im, isImage := b.(Image)
	if !isImage {
		return 0, 0, 0, false
	}
	width, height, format = im.ImageShape()
	return width, height, format, format != 0
}

// Unavailablef builds an ErrUnavailable error with its reason.
func Unavailablef(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnavailable, fmt.Sprintf(format, args...))
}
