package opencl

import (
	"encoding/binary"
	"fmt"
	"strings"
	"unsafe"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/target"
)

// Platform is one OpenCL implementation (an ICD) and its devices, as List reports them.
type Platform struct {
	Index   int
	Name    string // CL_PLATFORM_NAME, e.g. "Portable Computing Language"
	Vendor  string
	Version string // CL_PLATFORM_VERSION: "OpenCL <major>.<minor> <vendor text>"
	Devices []DeviceInfo
}

// DeviceInfo is what a device reports about itself.
type DeviceInfo struct {
	Index         int
	Name          string // CL_DEVICE_NAME
	Type          string // "gpu", "cpu", "accelerator" or "other"
	Vendor        string
	Version       string // CL_DEVICE_VERSION
	DriverVersion string // CL_DRIVER_VERSION
	OpenCLC       string // CL_DEVICE_OPENCL_C_VERSION, e.g. "OpenCL C 1.2 PoCL"
	Extensions    []string
	MemoryBytes   int64 // CL_DEVICE_GLOBAL_MEM_SIZE
	MaxAllocBytes int64 // CL_DEVICE_MAX_MEM_ALLOC_SIZE: the largest one buffer may be
	// BaseAlign is CL_DEVICE_MEM_BASE_ADDR_ALIGN in bytes: a sub-buffer (a view passed
	// to a kernel) must start at a multiple of it.
	BaseAlign int64
	Facts     target.GPUFacts
}

// List reports every platform the ICD loader finds and each one's devices. An absent
// loader or no platform is devices.ErrUnavailable.
func List() ([]Platform, error) {
	a, err := loadAPI()
	if err != nil {
		return nil, devices.Unavailablef("%v", err)
	}
	ids, err := a.platforms()
	if err != nil {
		return nil, err
	}
	out := make([]Platform, len(ids))
	for i, p := range ids {
		out[i] = Platform{Index: i, Name: a.platformString(p, platformName),
			Vendor: a.platformString(p, platformVendor), Version: a.platformString(p, platformVersion)}
		devs, err := a.devices(p)
		if err != nil {
			continue // a platform without devices lists none
		}
		for j, d := range devs {
			info, err := a.deviceInfo(d)
			if err != nil {
				return nil, fmt.Errorf("OpenCL platform %d (%s) device %d: %w", i, out[i].Name, j, err)
			}
			info.Index = j
			out[i].Devices = append(out[i].Devices, info)
		}
	}
	return out, nil
}

// Default chooses the device Open uses when none is named: the first GPU of the first
// platform that has one, else the first device of any platform.
func Default() (Options, error) {
	ps, err := List()
	if err != nil {
		return Options{}, err
	}
	first := Options{Platform: -1}
	for _, p := range ps {
		for _, d := range p.Devices {
			if d.Type == "gpu" {
				return Options{Platform: p.Index, Device: d.Index}, nil
			}
			if first.Platform < 0 {
				first = Options{Platform: p.Index, Device: d.Index}
			}
		}
	}
	if first.Platform < 0 {
		return Options{}, devices.Unavailablef("no OpenCL device on %d platforms (%s)", len(ps), theAPI.path)
	}
	return first, nil
}

// platforms lists the platform ids; none is ErrUnavailable naming the loader.
func (a *api) platforms() ([]uintptr, error) {
	var n uint32
	s := a.call(a.getPlatformIDs, 0, 0, uintptr(unsafe.Pointer(&n)))
	if s == platformNotFound || s == success && n == 0 {
		return nil, devices.Unavailablef("no OpenCL platform: the ICD loader %s found no driver (see /etc/OpenCL/vendors)", a.path)
	}
	if err := check("clGetPlatformIDs", s); err != nil {
		return nil, devices.Unavailablef("%s: %v", a.path, err)
	}
	ids := make([]uintptr, n)
	if err := check("clGetPlatformIDs", a.call(a.getPlatformIDs, uintptr(n), uintptr(unsafe.Pointer(&ids[0])), uintptr(unsafe.Pointer(&n)))); err != nil {
		return nil, devices.Unavailablef("%s: %v", a.path, err)
	}
	return ids[:min(int(n), len(ids))], nil
}

// devices lists a platform's device ids.
func (a *api) devices(p uintptr) ([]uintptr, error) {
	var n uint32
	if err := check("clGetDeviceIDs", a.call(a.getDeviceIDs, p, deviceTypeAll, 0, 0, uintptr(unsafe.Pointer(&n)))); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, nil
	}
	ids := make([]uintptr, n)
	if err := check("clGetDeviceIDs", a.call(a.getDeviceIDs, p, deviceTypeAll, uintptr(n), uintptr(unsafe.Pointer(&ids[0])), uintptr(unsafe.Pointer(&n)))); err != nil {
		return nil, err
	}
	return ids[:min(int(n), len(ids))], nil
}

// info reads a variable-size parameter through an info function of the form
// f(object, param, size, value, size_ret).
func (a *api) info(fn uintptr, what string, obj uintptr, param uint32) ([]byte, error) {
	var n uintptr
	if err := check(what, a.call(fn, obj, uintptr(param), 0, 0, uintptr(unsafe.Pointer(&n)))); err != nil {
		return nil, fmt.Errorf("parameter %#x: %w", param, err)
	}
	buf := make([]byte, max(n, 1))
	if err := check(what, a.call(fn, obj, uintptr(param), n, uintptr(unsafe.Pointer(&buf[0])), 0)); err != nil {
		return nil, fmt.Errorf("parameter %#x: %w", param, err)
	}
	return buf[:n], nil
}

func (a *api) platformString(p uintptr, param uint32) string {
	b, err := a.info(a.getPlatformInfo, "clGetPlatformInfo", p, param)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(gostring(b))
}

func (a *api) deviceString(d uintptr, param uint32) (string, error) {
	b, err := a.info(a.getDeviceInfo, "clGetDeviceInfo", d, param)
	return strings.TrimSpace(gostring(b)), err
}

// deviceUint reads an unsigned scalar parameter (cl_uint, cl_bool, size_t, cl_ulong or
// cl_bitfield: the size the device returns decides).
func (a *api) deviceUint(d uintptr, param uint32) (uint64, error) {
	b, err := a.info(a.getDeviceInfo, "clGetDeviceInfo", d, param)
	switch {
	case err != nil:
		return 0, err
	case len(b) == 4:
		return uint64(binary.NativeEndian.Uint32(b)), nil
	case len(b) == 8:
		return binary.NativeEndian.Uint64(b), nil
	}
	return 0, fmt.Errorf("clGetDeviceInfo: parameter %#x has %d bytes", param, len(b))
}

// deviceInfo reads what DeviceInfo holds.
func (a *api) deviceInfo(d uintptr) (DeviceInfo, error) {
	var info DeviceInfo
	var err error
	str := func(param uint32) string {
		s, e := a.deviceString(d, param)
		if err == nil {
			err = e
		}
		return s
	}
	num := func(param uint32) uint64 {
		v, e := a.deviceUint(d, param)
		if err == nil {
			err = e
		}
		return v
	}
	info.Name, info.Vendor, info.Version = str(deviceName), str(deviceVendor), str(deviceVersion)
	info.DriverVersion, info.OpenCLC = str(driverVersion), str(deviceOpenCLCVersion)
	info.Extensions = strings.Fields(str(deviceExtensions))
	switch t := num(deviceType); {
	case t&deviceTypeGPU != 0:
		info.Type = "gpu"
	case t&deviceTypeCPU != 0:
		info.Type = "cpu"
	case t&deviceTypeAccelerator != 0:
		info.Type = "accelerator"
	default:
		info.Type = "other"
	}
	info.MemoryBytes = int64(num(deviceGlobalMemSize))
	info.MaxAllocBytes = int64(num(deviceMaxMemAllocSize))
	info.BaseAlign = int64(num(deviceMemBaseAddrAlign) / 8)
	info.Facts = target.GPUFacts{
		MaxWorkGroup:  int(num(deviceMaxWorkGroupSize)),
		LocalMemBytes: int64(num(deviceLocalMemSize)),
		ComputeUnits:  int(num(deviceMaxComputeUnits)),
	}
	if num(deviceImageSupport) != 0 {
		info.Facts.ImageMaxWidth = int(num(deviceImage2DMaxWidth))
		info.Facts.ImageMaxHeight = int(num(deviceImage2DMaxHeight))
	}
	for _, e := range info.Extensions {
		if e == "cl_khr_fp16" {
			info.Facts.FP16 = true
		}
	}
	if info.BaseAlign < 1 {
		info.BaseAlign = 1
	}
	return info, err
}
