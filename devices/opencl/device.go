package opencl

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/target"
)

// Device is one OpenCL device with its own context and one in-order command queue.
type Device struct {
	api      *api
	platform uintptr // cl_platform_id
	dev      uintptr // cl_device_id
	ctx      uintptr // cl_context
	queue    uintptr // cl_command_queue: every copy and launch goes here, in order
	status   uintptr // cl_mem of the status block: {code, detail0, detail1}
	where    string  // "OpenCL platform P device D", for errors
	info     devices.Info
	dinfo    DeviceInfo
	closed   atomic.Bool
	timing   bool         // the queue records profiling events (Options.Profiling)
	builds   atomic.Int64 // programs built from source
	loads    atomic.Int64 // programs loaded from a binary

	mu      sync.Mutex
	alive   map[*buffer]bool
	modules map[*module]bool // loaded and not closed

	statusMu sync.Mutex
	launched devices.Launched // kernels launched since the status block was last read
}

// Options choose the device: the platform's and the device's index as List reports them.
type Options struct {
	Platform, Device int
	// Profiling creates the queue with CL_QUEUE_PROFILING_ENABLE, which Time needs.
	Profiling bool
}

// statusBytes is the size of the status block: three int64 words.
const statusBytes = 24

// OpenDefault opens the device Default chooses.
func OpenDefault() (*Device, error) {
	opts, err := Default()
	if err != nil {
		return nil, err
	}
	return Open(opts)
}

// Open opens device opts.Device of platform opts.Platform. An absent ICD loader, no
// platform, or no such platform or device is devices.ErrUnavailable with the reason.
func Open(opts Options) (*Device, error) {
	a, err := loadAPI()
	if err != nil {
		return nil, devices.Unavailablef("%v", err)
	}
	ps, err := a.platforms()
	if err != nil {
		return nil, err
	}
	if opts.Platform < 0 || opts.Platform >= len(ps) {
		return nil, devices.Unavailablef("no OpenCL platform %d: the ICD loader (%s) reports %d", opts.Platform, a.path, len(ps))
	}
	where := fmt.Sprintf("OpenCL platform %d device %d", opts.Platform, opts.Device)
	ds, err := a.devices(ps[opts.Platform])
	if err != nil {
		return nil, devices.Unavailablef("%s: %v", where, err)
	}
	if opts.Device < 0 || opts.Device >= len(ds) {
		return nil, devices.Unavailablef("no OpenCL device %d on platform %d (%s): it has %d", opts.Device, opts.Platform, a.platformString(ps[opts.Platform], platformName), len(ds))
	}
	d := &Device{api: a, platform: ps[opts.Platform], dev: ds[opts.Device], where: where, alive: map[*buffer]bool{}, modules: map[*module]bool{}}
	if d.dinfo, err = a.deviceInfo(d.dev); err != nil {
		return nil, devices.Unavailablef("%s: %v", where, err)
	}
	d.dinfo.Index = opts.Device
	d.timing = opts.Profiling
	if err := d.start(opts.Profiling); err != nil {
		return nil, devices.Unavailablef("%s: %v", where, err)
	}
	pname := a.platformString(d.platform, platformName)
	d.info = devices.Info{
		Kind:        "opencl",
		Name:        d.dinfo.Name,
		Fingerprint: fmt.Sprintf("opencl/%s/%s/%s/%s", pname, d.dinfo.Name, d.dinfo.DriverVersion, d.dinfo.OpenCLC),
		Toolchain:   a.platformString(d.platform, platformVersion),
	}
	return d, nil
}

// start creates the context, the queue and the zeroed status block.
func (d *Device) start(profiling bool) error {
	a := d.api
	props := []uintptr{contextPlatform, d.platform, 0}
	dev := []uintptr{d.dev}
	var s status
	if d.ctx, s = a.create(a.createContext, uintptr(unsafe.Pointer(&props[0])), 1, uintptr(unsafe.Pointer(&dev[0])), 0, 0); s != success {
		return check("clCreateContext", s)
	}
	var qprops uintptr
	if profiling {
		qprops = queueProfilingEnable
	}
	if d.queue, s = a.create(a.createCommandQueue, d.ctx, d.dev, qprops); s != success {
		a.call(a.releaseContext, d.ctx)
		return check("clCreateCommandQueue", s)
	}
	if d.status, s = a.create(a.createBuffer, d.ctx, memReadWrite, statusBytes, 0); s != success {
		d.release()
		return check("clCreateBuffer", s)
	}
	if err := d.zeroStatus(); err != nil {
		d.release()
		return err
	}
	return check("clFinish", a.call(a.finish, d.queue))
}

// release frees the status block, the queue and the context.
func (d *Device) release() {
	a := d.api
	if d.status != 0 {
		a.call(a.releaseMemObject, d.status)
	}
	a.call(a.releaseCommandQueue, d.queue)
	a.call(a.releaseContext, d.ctx)
}

// open reports a closed device as ErrUnavailable.
func (d *Device) open() error {
	if d.closed.Load() {
		return devices.Unavailablef("%s is closed", d.where)
	}
	return nil
}

// Info implements devices.Device.
func (d *Device) Info() devices.Info { return d.info }

// Describe is what the device reports about itself.
func (d *Device) Describe() DeviceInfo { return d.dinfo }

// Facts are the limits kernels are scheduled for: work-items per work-group, local
// memory per work-group, compute units, image2d limits (zero without images), and fp16
// (the cl_khr_fp16 extension).
func (d *Device) Facts() target.GPUFacts { return d.dinfo.Facts }

// Arch names the device for the compiler's target: its CL_DEVICE_NAME.
func (d *Device) Arch() string { return d.dinfo.Name }

// BaseAlign is the device's base address alignment in bytes
// (CL_DEVICE_MEM_BASE_ADDR_ALIGN): where the VM places views for kernels, so that each
// tensor starts as aligned as a buffer of its own.
func (d *Device) BaseAlign() int64 { return d.dinfo.BaseAlign }

// Target describes the device for the compiler.
func (d *Device) Target() (target.Target, error) {
	return target.GPU(target.OpenCL, d.Arch(), d.dinfo.Facts)
}

// Stats counts the device's program builds.
type Stats struct {
	// SourceBuilds counts programs compiled from OpenCL C (Build, and Load of source).
	SourceBuilds int64
	// BinaryLoads counts programs loaded from a program binary.
	BinaryLoads int64
}

// Stats reports the builds since Open.
func (d *Device) Stats() Stats {
	return Stats{SourceBuilds: d.builds.Load(), BinaryLoads: d.loads.Load()}
}

// Close waits for queued work, releases every live buffer and module, the status block,
// the queue and the context. It must not run concurrently with other calls on the device; calls
// after it are errors.
func (d *Device) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	a := d.api
	err := check("clFinish", a.call(a.finish, d.queue))
	d.mu.Lock()
	for b := range d.alive {
		a.call(a.releaseMemObject, b.mem)
		delete(d.alive, b)
	}
	mods := d.modules
	d.modules = map[*module]bool{}
	d.mu.Unlock()
	for m := range mods {
		m.release()
	}
	d.release()
	if err != nil {
		return fmt.Errorf("%s: %w", d.where, err)
	}
	return nil
}

var (
	_ devices.Device = (*Device)(nil)
	_ devices.Slicer = (*Device)(nil)
)
