package cuda

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/kilnrt/kiln/devices"
)

// Timing reports whether the device was opened with Options.Profiling, which Time needs.
func (d *Device) Timing() bool { return d.timing }

// Time launches like Launch between two events recorded on the stream, waits for the
// second and returns the time between them as the GPU measured it (the kernel's run;
// the events' resolution is about half a microsecond). A code the kernel wrote still
// surfaces at Sync.
func (d *Device) Time(k devices.Kernel, g devices.Geometry, bufs []devices.Buffer, dims []int64) (time.Duration, error) {
	if !d.timing {
		return 0, fmt.Errorf("CUDA device %d times no kernel: it was opened without Options.Profiling", d.ordinal)
	}
	start, end, err := d.eventPair()
	if err != nil {
		return 0, err
	}
	defer d.destroyEvents(start, end)
	if err := d.record(start); err != nil {
		return 0, err
	}
	if err := d.Launch(k, g, bufs, dims); err != nil {
		return 0, err
	}
	if err := d.record(end); err != nil {
		return 0, err
	}
	if err := d.enter(); err != nil {
		return 0, err
	}
	defer d.leave()
	drv := d.drv
	if err := drv.check("cuEventSynchronize", drv.call(drv.eventSynchronize, end)); err != nil {
		return 0, fmt.Errorf("%w: kernel %q: %v", devices.ErrLaunch, k.Name(), err)
	}
	var ms float32
	if err := drv.check("cuEventElapsedTime", drv.call(drv.eventElapsedTime, uintptr(unsafe.Pointer(&ms)), start, end)); err != nil {
		return 0, fmt.Errorf("timing kernel %q: %v", k.Name(), err)
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// eventPair creates two events (default flags: they record time).
func (d *Device) eventPair() (start, end uintptr, err error) {
	if err := d.enter(); err != nil {
		return 0, 0, err
	}
	defer d.leave()
	drv := d.drv
	if err := drv.check("cuEventCreate", drv.call(drv.eventCreate, uintptr(unsafe.Pointer(&start)), 0)); err != nil {
		return 0, 0, err
	}
	if err := drv.check("cuEventCreate", drv.call(drv.eventCreate, uintptr(unsafe.Pointer(&end)), 0)); err != nil {
		drv.call(drv.eventDestroy, start)
		return 0, 0, err
	}
	return start, end, nil
}

// record queues an event on the device's stream.
func (d *Device) record(ev uintptr) error {
	if err := d.enter(); err != nil {
		return err
	}
	defer d.leave()
	return d.drv.check("cuEventRecord", d.drv.call(d.drv.eventRecord, ev, d.stream))
}

func (d *Device) destroyEvents(evs ...uintptr) {
	if d.enter() != nil {
		return
	}
	defer d.leave()
	for _, ev := range evs {
		d.drv.call(d.drv.eventDestroy, ev)
	}
}

var _ devices.Timer = (*Device)(nil)
