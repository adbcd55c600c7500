package cuda

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/target"
)

// Device is one NVIDIA GPU, driven through its primary context and one stream.
type Device struct {
	drv     *driver
	ordinal int
	dev     uintptr // CUdevice
	ctx     uintptr // CUcontext: the device's primary context
	stream  uintptr // CUstream: every copy and launch goes here, in order
	status  uint64  // CUdeviceptr of the status block: {code, detail0, detail1}
	info    devices.Info
	facts   target.GPUFacts
	arch    string
	warp    int
	memory  int64
	nvrtc   *NVRTC // nil when no NVRTC was found
	timing  bool   // Options.Profiling
	closed  atomic.Bool

	mu    sync.Mutex
	alive map[*buffer]bool

	statusMu sync.Mutex
	launched devices.Launched // kernels launched since the status block was last read
}

// Options configure the device.
type Options struct {
	// Ordinal is the device's number among the driver's devices (cuDeviceGet).
	Ordinal int
	// Profiling lets Time measure kernels with events (kiln bench --profile).
	Profiling bool
}

// streamNonBlocking is CU_STREAM_NON_BLOCKING: the stream does not wait for the legacy
// default stream, which kiln never uses.
const streamNonBlocking = 1

// statusBytes is the size of the status block: three int64 words.
const statusBytes = 24

// Open opens the GPU numbered opts.Ordinal. An absent driver library, a failed cuInit or
// no such device is devices.ErrUnavailable with the reason. NVRTC is looked for too; its
// absence leaves Compiler nil and Info's Toolchain empty (prebuilt binaries still run).
func Open(opts Options) (*Device, error) {
	drv, err := loadDriver()
	if err != nil {
		return nil, devices.Unavailablef("%v", err)
	}
	var count int32
	if err := drv.check("cuDeviceGetCount", drv.call(drv.deviceGetCount, uintptr(unsafe.Pointer(&count)))); err != nil {
		return nil, devices.Unavailablef("%s: %v", drv.path, err)
	}
	if opts.Ordinal < 0 || opts.Ordinal >= int(count) {
		return nil, devices.Unavailablef("no CUDA device %d: the driver (%s) reports %d", opts.Ordinal, drv.path, count)
	}
	d := &Device{drv: drv, ordinal: opts.Ordinal, alive: map[*buffer]bool{}, timing: opts.Profiling}
	if err := d.probe(); err != nil {
		return nil, devices.Unavailablef("CUDA device %d: %v", opts.Ordinal, err)
	}
	if err := drv.check("cuDevicePrimaryCtxRetain", drv.call(drv.primaryCtxRetain, uintptr(unsafe.Pointer(&d.ctx)), d.dev)); err != nil {
		return nil, devices.Unavailablef("CUDA device %d: %v", opts.Ordinal, err)
	}
	if err := d.start(); err != nil {
		drv.call(drv.primaryCtxRelease, d.dev)
		return nil, devices.Unavailablef("CUDA device %d: %v", opts.Ordinal, err)
	}
	d.info = devices.Info{Kind: "cuda", Name: d.info.Name, Fingerprint: "cuda/" + d.arch}
	if nv, err := FindNVRTC(); err == nil {
		d.nvrtc = nv
		d.info.Toolchain = nv.Version()
	}
	return d, nil
}

// probe reads the device's name, limits and architecture.
func (d *Device) probe() error {
	drv := d.drv
	var dev int32
	if err := drv.check("cuDeviceGet", drv.call(drv.deviceGet, uintptr(unsafe.Pointer(&dev)), uintptr(d.ordinal))); err != nil {
		return err
	}
	d.dev = uintptr(dev)
	name := make([]byte, 256)
	if err := drv.check("cuDeviceGetName", drv.call(drv.deviceGetName, uintptr(unsafe.Pointer(&name[0])), uintptr(len(name)), d.dev)); err != nil {
		return err
	}
	d.info.Name = gostring(unsafe.Pointer(&name[0]))
	attrs := map[int]int{attrMaxThreadsPerBlock: 0, attrMaxSharedMemPerBlock: 0, attrWarpSize: 0,
		attrMultiprocessorCount: 0, attrComputeCapabilityMajor: 0, attrComputeCapabilityMinor: 0}
	for a := range attrs {
		var v int32
		if err := drv.check("cuDeviceGetAttribute", drv.call(drv.deviceGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(a), d.dev)); err != nil {
			return fmt.Errorf("attribute %d: %w", a, err)
		}
		attrs[a] = int(v)
	}
	var mem uint64
	if err := drv.check("cuDeviceTotalMem", drv.call(drv.deviceTotalMem, uintptr(unsafe.Pointer(&mem)), d.dev)); err != nil {
		return err
	}
	d.memory = int64(mem)
	major, minor := attrs[attrComputeCapabilityMajor], attrs[attrComputeCapabilityMinor]
	d.arch = fmt.Sprintf("sm_%d%d", major, minor)
	d.warp = attrs[attrWarpSize]
	d.facts = target.GPUFacts{
		MaxWorkGroup:  attrs[attrMaxThreadsPerBlock],
		LocalMemBytes: int64(attrs[attrMaxSharedMemPerBlock]),
		ComputeUnits:  attrs[attrMultiprocessorCount],
		// half-precision arithmetic is native from compute capability 5.3
		FP16: major > 5 || major == 5 && minor >= 3,
	}
	return nil
}

// start creates the stream and the zeroed status block in the primary context.
func (d *Device) start() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	drv := d.drv
	if err := drv.check("cuCtxPushCurrent", drv.call(drv.ctxPushCurrent, d.ctx)); err != nil {
		return err
	}
	defer d.pop()
	if err := drv.check("cuStreamCreate", drv.call(drv.streamCreate, uintptr(unsafe.Pointer(&d.stream)), streamNonBlocking)); err != nil {
		return err
	}
	err := drv.check("cuMemAlloc", drv.call(drv.memAlloc, uintptr(unsafe.Pointer(&d.status)), statusBytes))
	if err == nil {
		err = d.zeroStatus()
	}
	if err == nil {
		err = drv.check("cuStreamSynchronize", drv.call(drv.streamSynchronize, d.stream))
	}
	if err != nil {
		if d.status != 0 {
			drv.call(drv.memFree, uintptr(d.status))
		}
		drv.call(drv.streamDestroy, d.stream)
	}
	return err
}

// enter makes the device's context current on this goroutine's OS thread, which it locks,
// until leave; see the package documentation for why every call pushes and pops.
func (d *Device) enter() error {
	if d.closed.Load() {
		return devices.Unavailablef("CUDA device %d is closed", d.ordinal)
	}
	runtime.LockOSThread()
	if err := d.drv.check("cuCtxPushCurrent", d.drv.call(d.drv.ctxPushCurrent, d.ctx)); err != nil {
		runtime.UnlockOSThread()
		return devices.Unavailablef("CUDA device %d: %v", d.ordinal, err)
	}
	return nil
}

// leave undoes enter.
func (d *Device) leave() {
	d.pop()
	runtime.UnlockOSThread()
}

func (d *Device) pop() {
	var popped uintptr
	d.drv.call(d.drv.ctxPopCurrent, uintptr(unsafe.Pointer(&popped)))
}

// Info implements devices.Device.
func (d *Device) Info() devices.Info { return d.info }

// Facts are the limits kernels are scheduled for: threads per block, static shared memory
// per block, streaming multiprocessors, half precision.
func (d *Device) Facts() target.GPUFacts { return d.facts }

// Arch is the device's architecture as NVRTC names it: "sm_" and the compute capability.
func (d *Device) Arch() string { return d.arch }

// WarpSize is the number of threads that execute together (32 on every NVIDIA GPU so far).
func (d *Device) WarpSize() int { return d.warp }

// MemoryBytes is the device's total memory.
func (d *Device) MemoryBytes() int64 { return d.memory }

// Target describes the device for the compiler: its architecture's target (ArchTarget,
// the same on every GPU of the architecture), with the probed limits where a GPU has
// less than the architecture's.
func (d *Device) Target() (target.Target, error) {
	t, err := ArchTarget(d.arch)
	if err != nil {
		return target.Target{}, err
	}
	t.GPU.MaxWorkGroup = min(t.GPU.MaxWorkGroup, d.facts.MaxWorkGroup)
	t.GPU.LocalMemBytes = min(t.GPU.LocalMemBytes, d.facts.LocalMemBytes)
	return t, nil
}

// Compiler returns the NVRTC found at Open, or nil.
func (d *Device) Compiler() *NVRTC { return d.nvrtc }

// Close waits for launched work, frees every live buffer, the status block and the
// stream, and releases the primary context. It must not run concurrently with other
// calls on the device; calls after it are errors.
func (d *Device) Close() error {
	if err := d.enter(); err != nil {
		return nil // already closed
	}
	drv := d.drv
	err := drv.check("cuStreamSynchronize", drv.call(drv.streamSynchronize, d.stream))
	d.mu.Lock()
	for b := range d.alive {
		drv.call(drv.memFree, uintptr(b.ptr))
		delete(d.alive, b)
	}
	d.mu.Unlock()
	drv.call(drv.memFree, uintptr(d.status))
	drv.call(drv.streamDestroy, d.stream)
	d.closed.Store(true)
	d.leave()
	drv.call(drv.primaryCtxRelease, d.dev)
	if err != nil {
		return fmt.Errorf("CUDA device %d: %w", d.ordinal, err)
	}
	return nil
}

var (
	_ devices.Device = (*Device)(nil)
	_ devices.Slicer = (*Device)(nil)
)

// Count is the number of GPUs the driver reports; no driver (or a failed cuInit) is
// devices.ErrUnavailable.
func Count() (int, error) {
	drv, err := loadDriver()
	if err != nil {
		return 0, devices.Unavailablef("%v", err)
	}
	var count int32
	if err := drv.check("cuDeviceGetCount", drv.call(drv.deviceGetCount, uintptr(unsafe.Pointer(&count)))); err != nil {
		return 0, devices.Unavailablef("%s: %v", drv.path, err)
	}
	return int(count), nil
}
