package cuda

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/kilnrt/kiln/internal/dynlib"
)

// driverDirs are the folders searched for libcuda.so.1 after the loader's own path: the
// distributions' library folders, the NVIDIA container toolkit's mount and WSL's.
var driverDirs = []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/local/nvidia/lib64", "/usr/lib/wsl/lib"}

// driver is libcuda's entry points, as cuda.h declares them (CUresult is a 32-bit enum,
// CUdevice an int, CUdeviceptr an unsigned 64-bit integer, handles are pointers, sizes
// size_t). Where cuda.h maps a name to a _v2 symbol, the _v2 symbol is bound.
type driver struct {
	path string

	init, driverGetVersion, getErrorName, getErrorString                       uintptr
	deviceGetCount, deviceGet, deviceGetName, deviceGetAttribute               uintptr
	deviceTotalMem, primaryCtxRetain, primaryCtxRelease                        uintptr
	ctxSetCurrent, ctxPushCurrent, ctxPopCurrent                               uintptr
	streamCreate, streamDestroy, streamSynchronize                             uintptr
	memAlloc, memFree, memsetD8Async                                           uintptr
	memcpyHtoDAsync, memcpyDtoHAsync, memcpyDtoDAsync                          uintptr
	moduleLoadData, moduleUnload, moduleGetFunction, launch                    uintptr
	eventCreate, eventRecord, eventSynchronize, eventElapsedTime, eventDestroy uintptr
	linkCreate, linkAddData, linkComplete, linkDestroy                         uintptr
	// funcGetParamInfo (CUDA 12.4 and later) is 0 where the driver lacks it.
	funcGetParamInfo uintptr
}

var (
	driverOnce sync.Once
	theDriver  *driver
	driverErr  error
)

// loadDriver binds libcuda once per process and calls cuInit(0): the driver is a
// process-wide singleton, and cuInit's failure (no device, no kernel module) is final.
func loadDriver() (*driver, error) {
	driverOnce.Do(func() { theDriver, driverErr = bindDriver() })
	return theDriver, driverErr
}

func bindDriver() (*driver, error) {
	candidates := dynlib.EnvFirst("KILN_LIBCUDA", append([]string{"libcuda.so.1"}, dynlib.InDirs(driverDirs, "libcuda.so.1")...))
	h, path, err := dynlib.Open(candidates)
	if err != nil {
		return nil, fmt.Errorf("no CUDA driver library: %v", err)
	}
	d := &driver{path: path}
	err = dynlib.Symbols(h, map[string]*uintptr{
		"cuInit": &d.init, "cuDriverGetVersion": &d.driverGetVersion,
		"cuGetErrorName": &d.getErrorName, "cuGetErrorString": &d.getErrorString,
		"cuDeviceGetCount": &d.deviceGetCount, "cuDeviceGet": &d.deviceGet,
		"cuDeviceGetName": &d.deviceGetName, "cuDeviceGetAttribute": &d.deviceGetAttribute,
		"cuDeviceTotalMem_v2": &d.deviceTotalMem, "cuDevicePrimaryCtxRetain": &d.primaryCtxRetain,
		"cuDevicePrimaryCtxRelease_v2": &d.primaryCtxRelease,
		"cuCtxSetCurrent":              &d.ctxSetCurrent, "cuCtxPushCurrent_v2": &d.ctxPushCurrent,
		"cuCtxPopCurrent_v2": &d.ctxPopCurrent,
		"cuStreamCreate":     &d.streamCreate, "cuStreamDestroy_v2": &d.streamDestroy,
		"cuStreamSynchronize": &d.streamSynchronize,
		"cuMemAlloc_v2":       &d.memAlloc, "cuMemFree_v2": &d.memFree, "cuMemsetD8Async": &d.memsetD8Async,
		"cuMemcpyHtoDAsync_v2": &d.memcpyHtoDAsync, "cuMemcpyDtoHAsync_v2": &d.memcpyDtoHAsync,
		"cuMemcpyDtoDAsync_v2": &d.memcpyDtoDAsync,
		"cuModuleLoadData":     &d.moduleLoadData, "cuModuleUnload": &d.moduleUnload,
		"cuModuleGetFunction": &d.moduleGetFunction, "cuLaunchKernel": &d.launch,
		"cuEventCreate": &d.eventCreate, "cuEventRecord": &d.eventRecord,
		"cuEventSynchronize": &d.eventSynchronize, "cuEventElapsedTime": &d.eventElapsedTime,
		"cuEventDestroy_v2": &d.eventDestroy,
		"cuLinkCreate_v2":   &d.linkCreate, "cuLinkAddData_v2": &d.linkAddData,
		"cuLinkComplete": &d.linkComplete, "cuLinkDestroy": &d.linkDestroy,
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if sym, err := purego.Dlsym(h, "cuFuncGetParamInfo"); err == nil {
		d.funcGetParamInfo = sym
	}
	if err := d.check("cuInit", d.call(d.init, 0)); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return d, nil
}

// paramCount is the number of parameters of fn, or -1 when the driver does not say; the
// caller has entered a context.
func (d *driver) paramCount(fn uintptr) int {
	var offset, size uint64
	for i := 0; i < 4096; i++ {
		if d.call(d.funcGetParamInfo, fn, uintptr(i), uintptr(unsafe.Pointer(&offset)), uintptr(unsafe.Pointer(&size))) != resultSuccess {
			if i == 0 {
				return -1
			}
			return i
		}
	}
	return -1
}

// result is a CUresult.
type result int32

// Results kiln tells apart.
const (
	resultSuccess      result = 0
	resultInvalidValue result = 1
	resultOutOfMemory  result = 2
	resultNoDevice     result = 100
	resultNotFound     result = 500
)

// call makes one foreign call returning a CUresult (a 32-bit enum: the upper half of the
// return register is not part of it). Arguments converted from pointers must be
// converted in call's own argument list: go:uintptrescapes then moves what they point to
// to the heap, where it cannot move while the driver writes through it.
//
//go:uintptrescapes
func (d *driver) call(fn uintptr, args ...uintptr) result {
	r, _, _ := purego.SyscallN(fn, args...)
	return result(int32(r))
}

// check turns a failed CUresult into an error naming the call and the driver's own name
// and description of the result.
func (d *driver) check(what string, r result) error {
	if r == resultSuccess {
		return nil
	}
	return &driverError{Call: what, Result: r, Name: d.errorName(r), Text: d.errorString(r)}
}

func (d *driver) errorName(r result) string {
	var p unsafe.Pointer
	if d.call(d.getErrorName, uintptr(r), uintptr(unsafe.Pointer(&p))) != resultSuccess {
		return ""
	}
	return gostring(p)
}

func (d *driver) errorString(r result) string {
	var p unsafe.Pointer
	if d.call(d.getErrorString, uintptr(r), uintptr(unsafe.Pointer(&p))) != resultSuccess {
		return ""
	}
	return gostring(p)
}

// driverError is a failed driver call.
type driverError struct {
	Call   string
	Result result
	Name   string // e.g. CUDA_ERROR_NO_DEVICE
	Text   string
}

func (e *driverError) Error() string {
	if e.Name == "" {
		return fmt.Sprintf("%s: CUresult %d", e.Call, e.Result)
	}
	return fmt.Sprintf("%s: %s (%s)", e.Call, e.Name, e.Text)
}

// Attributes read from cuDeviceGetAttribute (CUdevice_attribute in cuda.h).
const (
	attrMaxThreadsPerBlock     = 1
	attrMaxSharedMemPerBlock   = 8
	attrWarpSize               = 10
	attrMultiprocessorCount    = 16
	attrComputeCapabilityMajor = 75
	attrComputeCapabilityMinor = 76
)
