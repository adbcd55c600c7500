package opencl

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/kilnrt/kiln/internal/dynlib"
)

// libraryName is the ICD loader's soname.
var libraryName = "libOpenCL.so.1"

// libraryDirs are the folders searched for libOpenCL.so.1 after the loader's own path:
// the distributions' library folders, ROCm's and the CUDA toolkit's.
var libraryDirs = []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/opt/rocm/lib", "/usr/local/cuda/lib64"}

// api is the ICD loader's entry points, as cl.h declares them (cl_int and cl_uint are
// 32-bit, cl_bitfield and cl_ulong 64-bit, handles are pointers, sizes size_t).
type api struct {
	path string

	getPlatformIDs, getPlatformInfo, getDeviceIDs, getDeviceInfo           uintptr
	createContext, releaseContext, createCommandQueue, releaseCommandQueue uintptr
	createBuffer, releaseMemObject                                         uintptr
	enqueueWriteBuffer, enqueueReadBuffer, enqueueCopyBuffer               uintptr
	enqueueFillBuffer, finish                                              uintptr
	createProgramWithSource, createProgramWithBinary, buildProgram         uintptr
	getProgramBuildInfo, getProgramInfo, releaseProgram                    uintptr
	createKernel, getKernelInfo, setKernelArg, releaseKernel               uintptr
	enqueueNDRangeKernel, getEventProfilingInfo, waitForEvents             uintptr
	releaseEvent                                                           uintptr
	createImage, getSupportedImageFormats, enqueueWriteImage               uintptr
	enqueueReadImage, enqueueCopyImage, enqueueCopyImageToBuffer           uintptr
	enqueueCopyBufferToImage, enqueueFillImage                             uintptr
}

var (
	apiOnce sync.Once
	theAPI  *api
	apiErr  error
)

// loadAPI binds the ICD loader once per process.
func loadAPI() (*api, error) {
	apiOnce.Do(func() { theAPI, apiErr = bindAPI() })
	return theAPI, apiErr
}

func bindAPI() (*api, error) {
	candidates := dynlib.EnvFirst("KILN_LIBOPENCL", append([]string{libraryName}, dynlib.InDirs(libraryDirs, libraryName)...))
	h, path, err := dynlib.Open(candidates)
	if err != nil {
		return nil, fmt.Errorf("no OpenCL ICD loader: %v", err)
	}
	a := &api{path: path}
	err = dynlib.Symbols(h, map[string]*uintptr{
		"clGetPlatformIDs": &a.getPlatformIDs, "clGetPlatformInfo": &a.getPlatformInfo,
		"clGetDeviceIDs": &a.getDeviceIDs, "clGetDeviceInfo": &a.getDeviceInfo,
		"clCreateContext": &a.createContext, "clReleaseContext": &a.releaseContext,
		"clCreateCommandQueue": &a.createCommandQueue, "clReleaseCommandQueue": &a.releaseCommandQueue,
		"clCreateBuffer":       &a.createBuffer,
		"clReleaseMemObject":   &a.releaseMemObject,
		"clEnqueueWriteBuffer": &a.enqueueWriteBuffer, "clEnqueueReadBuffer": &a.enqueueReadBuffer,
		"clEnqueueCopyBuffer": &a.enqueueCopyBuffer, "clEnqueueFillBuffer": &a.enqueueFillBuffer,
		"clFinish":                  &a.finish,
		"clCreateProgramWithSource": &a.createProgramWithSource, "clCreateProgramWithBinary": &a.createProgramWithBinary,
		"clBuildProgram": &a.buildProgram, "clGetProgramBuildInfo": &a.getProgramBuildInfo,
		"clGetProgramInfo": &a.getProgramInfo, "clReleaseProgram": &a.releaseProgram,
		"clCreateKernel": &a.createKernel, "clGetKernelInfo": &a.getKernelInfo,
		"clSetKernelArg": &a.setKernelArg, "clReleaseKernel": &a.releaseKernel,
		"clEnqueueNDRangeKernel": &a.enqueueNDRangeKernel, "clGetEventProfilingInfo": &a.getEventProfilingInfo,
		"clWaitForEvents": &a.waitForEvents, "clReleaseEvent": &a.releaseEvent,
		"clCreateImage": &a.createImage, "clGetSupportedImageFormats": &a.getSupportedImageFormats,
		"clEnqueueWriteImage": &a.enqueueWriteImage, "clEnqueueReadImage": &a.enqueueReadImage,
		"clEnqueueCopyImage": &a.enqueueCopyImage, "clEnqueueCopyImageToBuffer": &a.enqueueCopyImageToBuffer,
		"clEnqueueCopyBufferToImage": &a.enqueueCopyBufferToImage, "clEnqueueFillImage": &a.enqueueFillImage,
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return a, nil
}

// status is a cl_int error code.
type status int32

const success status = 0

// call makes one foreign call returning a cl_int (the upper half of the return register
// is not part of it). Arguments converted from pointers must be converted in call's own
// argument list: go:uintptrescapes then moves what they point to to the heap, where it
// cannot move while the library writes through it.
//
//go:uintptrescapes
func (a *api) call(fn uintptr, args ...uintptr) status {
	r, _, _ := purego.SyscallN(fn, args...)
	return status(int32(r))
}

// create makes one foreign call returning a handle; the function's last parameter is the
// cl_int error out-parameter, which create supplies. Pointer arguments follow call's rule.
//
//go:uintptrescapes
func (a *api) create(fn uintptr, args ...uintptr) (uintptr, status) {
	var code int32
	h := a.createCall(fn, args, uintptr(unsafe.Pointer(&code)))
	if code == 0 && h == 0 {
		return 0, outOfHostMemory // a null handle reported as success
	}
	return h, status(code)
}

// createCall calls fn with args and then errcode (converted here, in the argument list,
// so that go:uintptrescapes moves the error code to the heap).
//
//go:uintptrescapes
func (a *api) createCall(fn uintptr, args []uintptr, errcode uintptr) uintptr {
	h, _, _ := purego.SyscallN(fn, append(args, errcode)...)
	return h
}

// check turns a failed cl_int into an error naming the call and the code.
func check(what string, s status) error {
	if s == success {
		return nil
	}
	return &clError{Call: what, Code: s}
}

// clError is a failed OpenCL call.
type clError struct {
	Call string
	Code status
}

func (e *clError) Error() string { return fmt.Sprintf("%s: %s", e.Call, e.Code) }

func (s status) String() string {
	if n, ok := statusNames[s]; ok {
		return n
	}
	return fmt.Sprintf("OpenCL error %d", int32(s))
}
