package cuda

import (
	"bytes"
	"fmt"
	"unsafe"

	"github.com/kilnrt/kiln/devices"
)

// jitInputPTX is CU_JIT_INPUT_PTX: cuLinkAddData's data is PTX text.
const jitInputPTX = 1

// Finish implements devices.Finisher: PTX is compiled for this GPU by the driver's
// linker (cuLinkCreate, cuLinkAddData, cuLinkComplete: the step cuModuleLoadData takes
// on every load of PTX) and returned as a cubin; a cubin or fatbinary comes back as it
// is. A PTX the driver cannot compile is devices.ErrLoad.
func (d *Device) Finish(binary []byte) ([]byte, error) {
	if len(binary) == 0 || bytes.HasPrefix(binary, elfMagic) || bytes.HasPrefix(binary, fatbinMagic) {
		return binary, nil
	}
	ptx := binary
	if ptx[len(ptx)-1] != 0 {
		ptx = append(append(make([]byte, 0, len(binary)+1), binary...), 0)
	}
	if err := d.enter(); err != nil {
		return nil, err
	}
	defer d.leave()
	drv := d.drv
	var state uintptr
	if err := drv.check("cuLinkCreate", drv.call(drv.linkCreate, 0, 0, 0, uintptr(unsafe.Pointer(&state)))); err != nil {
		return nil, fmt.Errorf("%w: %v", devices.ErrLoad, err)
	}
	defer drv.call(drv.linkDestroy, state)
	name := []byte("kiln.ptx\x00")
	if err := drv.check("cuLinkAddData", drv.call(drv.linkAddData, state, jitInputPTX, uintptr(unsafe.Pointer(&ptx[0])),
		uintptr(len(ptx)), uintptr(unsafe.Pointer(&name[0])), 0, 0, 0)); err != nil {
		return nil, fmt.Errorf("%w: compiling PTX for %s: %v", devices.ErrLoad, d.arch, err)
	}
	var cubin uintptr
	var size uint64
	if err := drv.check("cuLinkComplete", drv.call(drv.linkComplete, state, uintptr(unsafe.Pointer(&cubin)), uintptr(unsafe.Pointer(&size)))); err != nil {
		return nil, fmt.Errorf("%w: linking PTX for %s: %v", devices.ErrLoad, d.arch, err)
	}
	if cubin == 0 || size == 0 {
		return nil, fmt.Errorf("%w: the driver's linker returned no image for %s", devices.ErrLoad, d.arch)
	}
	// the image belongs to the link state, destroyed on return: copy it out
	return bytes.Clone(unsafe.Slice((*byte)(ptr(cubin)), size)), nil
}

// FinishKey implements devices.Finisher: the driver's version and the architecture.
func (d *Device) FinishKey() string {
	var v int32
	d.drv.call(d.drv.driverGetVersion, uintptr(unsafe.Pointer(&v)))
	return fmt.Sprintf("cuda driver %d, %s", v, d.arch)
}

var _ devices.Finisher = (*Device)(nil)
