package opencl

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/internal/dynlib"
)

// SourceMarker begins a Load argument that is OpenCL C source rather than a program
// binary: Load builds what follows it as Build would (and counts a source build). No
// program binary begins with it: they are ELF, LLVM bitcode or vendor containers, none
// of which starts with a C comment.
const SourceMarker = "//kiln:opencl-c\n"

// module is a built program and the kernels created from it.
type module struct {
	d       *Device
	program uintptr // cl_program
	mu      sync.Mutex
	kernels []*kernel
	closed  bool
}

// kernel is one cl_kernel. OpenCL's objects are thread-safe except a kernel's
// arguments, which clSetKernelArg sets on the object itself: mu holds them from the
// first clSetKernelArg to the enqueue that copies them.
type kernel struct {
	name  string
	obj   uintptr // cl_kernel
	nargs int
	mod   *module
	mu    sync.Mutex
}

func (k *kernel) Name() string { return k.name }

// Build compiles OpenCL C source for the device with clBuildProgram's options (e.g.
// "-cl-fast-relaxed-math") and returns the program binary (CL_PROGRAM_BINARIES), which
// Load accepts on a device of the same Fingerprint. A compile error is devices.ErrBuild
// with the build log.
func (d *Device) Build(source, options string) ([]byte, error) {
	p, err := d.buildSource(source, options)
	if err != nil {
		return nil, err
	}
	defer d.api.call(d.api.releaseProgram, p)
	bin, err := d.binary(p)
	if err != nil {
		return nil, fmt.Errorf("%w: reading the program binary on %s: %v", devices.ErrBuild, d.where, err)
	}
	return bin, nil
}

// buildSource creates and builds a program from source, counting the build.
func (d *Device) buildSource(source, options string) (uintptr, error) {
	if err := d.open(); err != nil {
		return 0, err
	}
	if source == "" {
		return 0, fmt.Errorf("%w: empty OpenCL C source", devices.ErrBuild)
	}
	a := d.api
	src := dynlib.CString(source)
	strs := []unsafe.Pointer{unsafe.Pointer(&src[0])}
	lens := []uintptr{uintptr(len(source))}
	p, s := a.create(a.createProgramWithSource, d.ctx, 1, uintptr(unsafe.Pointer(&strs[0])), uintptr(unsafe.Pointer(&lens[0])))
	runtime.KeepAlive(src)
	if s != success {
		return 0, fmt.Errorf("%w: %v", devices.ErrBuild, check("clCreateProgramWithSource", s))
	}
	d.builds.Add(1)
	if err := d.build(p, options); err != nil {
		a.call(a.releaseProgram, p)
		return 0, fmt.Errorf("%w: %v", devices.ErrBuild, err)
	}
	return p, nil
}

// build runs clBuildProgram for the device; a failure carries the build log.
func (d *Device) build(p uintptr, options string) error {
	a := d.api
	opts := dynlib.CString(options)
	dev := []uintptr{d.dev}
	s := a.call(a.buildProgram, p, 1, uintptr(unsafe.Pointer(&dev[0])), uintptr(unsafe.Pointer(&opts[0])), 0, 0)
	if s == success {
		return nil
	}
	err := check("clBuildProgram", s)
	if log := d.buildLog(p); log != "" {
		return fmt.Errorf("%v on %s:\n%s", err, d.where, log)
	}
	return fmt.Errorf("%v on %s", err, d.where)
}

// buildLog is the device's build log for p (empty when it cannot be read).
func (d *Device) buildLog(p uintptr) string {
	a := d.api
	var n uintptr
	if a.call(a.getProgramBuildInfo, p, d.dev, programBuildLog, 0, 0, uintptr(unsafe.Pointer(&n))) != success || n == 0 {
		return ""
	}
	buf := make([]byte, n)
	if a.call(a.getProgramBuildInfo, p, d.dev, programBuildLog, n, uintptr(unsafe.Pointer(&buf[0])), 0) != success {
		return ""
	}
	return strings.TrimSpace(gostring(buf))
}

// binary reads a built program's binary for the device (the program has one device).
func (d *Device) binary(p uintptr) ([]byte, error) {
	a := d.api
	sizes := make([]uintptr, 1)
	if err := check("clGetProgramInfo", a.call(a.getProgramInfo, p, programBinarySizes, unsafe.Sizeof(sizes[0]), uintptr(unsafe.Pointer(&sizes[0])), 0)); err != nil {
		return nil, err
	}
	if sizes[0] == 0 || sizes[0] > maxAlloc {
		return nil, fmt.Errorf("the driver reports a %d-byte program binary", sizes[0])
	}
	bin := make([]byte, sizes[0])
	ptrs := []unsafe.Pointer{unsafe.Pointer(&bin[0])}
	err := check("clGetProgramInfo", a.call(a.getProgramInfo, p, programBinaries, unsafe.Sizeof(ptrs[0]), uintptr(unsafe.Pointer(&ptrs[0])), 0))
	runtime.KeepAlive(bin)
	return bin, err
}

// Load implements devices.Device: a program binary from Build (on a device of the same
// Fingerprint), or OpenCL C source after SourceMarker. A binary the driver refuses is
// devices.ErrLoad; source that does not compile is devices.ErrBuild.
func (d *Device) Load(binary []byte) (devices.Module, error) {
	if src, ok := bytes.CutPrefix(binary, []byte(SourceMarker)); ok {
		p, err := d.buildSource(string(src), "")
		if err != nil {
			return nil, err
		}
		return d.track(&module{d: d, program: p}), nil
	}
	if len(binary) == 0 {
		return nil, fmt.Errorf("%w: empty OpenCL program binary", devices.ErrLoad)
	}
	if err := d.open(); err != nil {
		return nil, err
	}
	a := d.api
	bin := append([]byte(nil), binary...) // the driver reads it during the call only
	dev := []uintptr{d.dev}
	lens := []uintptr{uintptr(len(bin))}
	ptrs := []unsafe.Pointer{unsafe.Pointer(&bin[0])}
	binStatus := make([]int32, 1)
	p, s := a.create(a.createProgramWithBinary, d.ctx, 1, uintptr(unsafe.Pointer(&dev[0])), uintptr(unsafe.Pointer(&lens[0])),
		uintptr(unsafe.Pointer(&ptrs[0])), uintptr(unsafe.Pointer(&binStatus[0])))
	runtime.KeepAlive(bin)
	if s != success {
		return nil, fmt.Errorf("%w: %d-byte program binary on %s: %v (binary status %s)", devices.ErrLoad, len(binary), d.where, check("clCreateProgramWithBinary", s), status(binStatus[0]))
	}
	if err := d.build(p, ""); err != nil {
		a.call(a.releaseProgram, p)
		return nil, fmt.Errorf("%w: %v", devices.ErrLoad, err)
	}
	d.loads.Add(1)
	return d.track(&module{d: d, program: p}), nil
}

// Kernel implements devices.Module: a fresh cl_kernel for the entry point name.
func (m *module) Kernel(name string) (devices.Kernel, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, fmt.Errorf("%w: module is closed", devices.ErrLoad)
	}
	d := m.d
	if err := d.open(); err != nil {
		return nil, err
	}
	a := d.api
	cname := dynlib.CString(name)
	obj, s := a.create(a.createKernel, m.program, uintptr(unsafe.Pointer(&cname[0])))
	if s != success {
		return nil, fmt.Errorf("%w: no kernel %q: %v", devices.ErrLoad, name, check("clCreateKernel", s))
	}
	var nargs uint32
	if err := check("clGetKernelInfo", a.call(a.getKernelInfo, obj, kernelNumArgs, 4, uintptr(unsafe.Pointer(&nargs)), 0)); err != nil {
		a.call(a.releaseKernel, obj)
		return nil, fmt.Errorf("%w: kernel %q: %v", devices.ErrLoad, name, err)
	}
	k := &kernel{name: name, obj: obj, nargs: int(nargs), mod: m}
	m.kernels = append(m.kernels, k)
	return k, nil
}

// track records a loaded module, which the device's Close releases if its own Close
// has not.
func (d *Device) track(m *module) *module {
	d.mu.Lock()
	d.modules[m] = true
	d.mu.Unlock()
	return m
}

// Close implements devices.Module: it releases the kernels and the program (OpenCL
// keeps them until the launches queued with them have finished).
func (m *module) Close() error {
	d := m.d
	d.mu.Lock()
	mine := d.modules[m]
	delete(d.modules, m)
	d.mu.Unlock()
	if !mine {
		return nil // closed already, by itself or with the device
	}
	return m.release()
}

// release marks the module closed and releases its kernels and program, once.
func (m *module) release() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	a := m.d.api
	for _, k := range m.kernels {
		k.mu.Lock() // no launch is setting its arguments
		a.call(a.releaseKernel, k.obj)
		k.mu.Unlock()
	}
	m.kernels = nil
	return check("clReleaseProgram", a.call(a.releaseProgram, m.program))
}
