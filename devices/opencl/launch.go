package opencl

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/kilnrt/kiln/devices"
)

// Launch implements devices.Device: the kernel is queued with the convention's arguments
// (buffers, dims as long, the status block) on a grid of Geometry.Grid work-groups of
// Geometry.Block work-items, and Launch returns; a code the kernel writes to the status
// block surfaces at the next Sync.
func (d *Device) Launch(k devices.Kernel, g devices.Geometry, bufs []devices.Buffer, dims []int64) error {
	_, err := d.launch(k, g, bufs, dims, false)
	return err
}

// Timing reports whether the device was opened with Options.Profiling, which Time needs.
func (d *Device) Timing() bool { return d.timing }

// Time launches like Launch, waits for the kernel, and returns its run time as the device
// measured it (from the start to the end of its execution). The device must have been
// opened with Options.Profiling. A code the kernel wrote still surfaces at Sync.
func (d *Device) Time(k devices.Kernel, g devices.Geometry, bufs []devices.Buffer, dims []int64) (time.Duration, error) {
	ev, err := d.launch(k, g, bufs, dims, true)
	if err != nil {
		return 0, err
	}
	a := d.api
	defer a.call(a.releaseEvent, ev)
	events := []uintptr{ev}
	if err := check("clWaitForEvents", a.call(a.waitForEvents, 1, uintptr(unsafe.Pointer(&events[0])))); err != nil {
		return 0, fmt.Errorf("%w: kernel %q: %v", devices.ErrLaunch, k.Name(), err)
	}
	var start, end uint64
	if err := check("clGetEventProfilingInfo", a.call(a.getEventProfilingInfo, ev, profilingCommandStart, 8, uintptr(unsafe.Pointer(&start)), 0)); err != nil {
		return 0, fmt.Errorf("timing kernel %q on %s (open it with Options.Profiling): %v", k.Name(), d.where, err)
	}
	if err := check("clGetEventProfilingInfo", a.call(a.getEventProfilingInfo, ev, profilingCommandEnd, 8, uintptr(unsafe.Pointer(&end)), 0)); err != nil {
		return 0, fmt.Errorf("timing kernel %q on %s: %v", k.Name(), d.where, err)
	}
	return time.Duration(end - start), nil
}

// launch queues the kernel, with an event when withEvent (the caller releases it).
func (d *Device) launch(k devices.Kernel, g devices.Geometry, bufs []devices.Buffer, dims []int64, withEvent bool) (uintptr, error) {
	kk, ok := k.(*kernel)
	if !ok || kk == nil {
		return 0, fmt.Errorf("%w: kernel of another device (%T)", devices.ErrLaunch, k)
	}
	if err := d.open(); err != nil {
		return 0, err
	}
	var global, local [3]uintptr
	for i := range 3 {
		gr, bl := g.Grid[i], g.Block[i]
		if gr <= 0 || bl <= 0 || gr > 1<<31-1 || bl > 1<<31-1 {
			return 0, fmt.Errorf("%w: kernel %q: geometry grid %v block %v: every extent must be positive", devices.ErrLaunch, kk.name, g.Grid, g.Block)
		}
		global[i], local[i] = uintptr(gr)*uintptr(bl), uintptr(bl)
	}
	args := make([]bufferArg, len(bufs))
	n := len(dims) + 1
	for i, b := range bufs {
		cb, err := d.own(b)
		if err != nil {
			return 0, fmt.Errorf("kernel %q argument %d: %w", kk.name, i, err)
		}
		args[i] = bufferArg{mem: cb.mem, offset: cb.offset, image: cb.img != nil}
		n += 2
		if args[i].image {
			n--
		}
	}
	if kk.nargs != n {
		return 0, fmt.Errorf("%w: kernel %q takes %d parameters, given %d buffers (each a buffer and its byte offset, an image alone), %d dims and the status block", devices.ErrLaunch, kk.name, kk.nargs, len(bufs), len(dims))
	}
	a := d.api
	kk.mod.mu.Lock()
	closed := kk.mod.closed
	kk.mu.Lock() // before the module's lock is released: Close waits for it
	kk.mod.mu.Unlock()
	defer kk.mu.Unlock()
	if closed {
		return 0, fmt.Errorf("%w: kernel %q of a closed module", devices.ErrLaunch, kk.name)
	}
	if err := d.setArgs(kk, args, dims); err != nil {
		return 0, err
	}
	var ev uintptr // cl_event, when withEvent
	var s status
	if withEvent {
		s = a.call(a.enqueueNDRangeKernel, d.queue, kk.obj, 3, 0,
			uintptr(unsafe.Pointer(&global[0])), uintptr(unsafe.Pointer(&local[0])), 0, 0, uintptr(unsafe.Pointer(&ev)))
	} else {
		s = a.call(a.enqueueNDRangeKernel, d.queue, kk.obj, 3, 0,
			uintptr(unsafe.Pointer(&global[0])), uintptr(unsafe.Pointer(&local[0])), 0, 0, 0)
	}
	if err := check("clEnqueueNDRangeKernel", s); err != nil {
		return 0, fmt.Errorf("%w: kernel %q on %s: %v", devices.ErrLaunch, kk.name, d.where, err)
	}
	d.statusMu.Lock()
	d.launched.Add(kk.name)
	d.statusMu.Unlock()
	return ev, nil
}

// bufferArg is one buffer argument of a launch: the buffer a view lies in and the
// view's byte offset, passed as two kernel parameters (codegen's ByteOffsets), or an
// image, passed alone.
type bufferArg struct {
	mem    uintptr
	offset int64
	image  bool
}

// setArgs sets the convention's arguments; the caller holds the kernel's lock.
func (d *Device) setArgs(k *kernel, bufs []bufferArg, dims []int64) error {
	a := d.api
	arg := new(uint64) // a cl_mem (pointer-sized) or a long, read before the call returns
	set := func(i int, v uint64, size uintptr) error {
		*arg = v
		if err := check("clSetKernelArg", a.call(a.setKernelArg, k.obj, uintptr(i), size, uintptr(unsafe.Pointer(arg)))); err != nil {
			return fmt.Errorf("%w: kernel %q argument %d: %v", devices.ErrLaunch, k.name, i, err)
		}
		return nil
	}
	const memSize, longSize = unsafe.Sizeof(uintptr(0)), 8
	i := 0
	for _, b := range bufs {
		if err := set(i, uint64(b.mem), memSize); err != nil {
			return err
		}
		i++
		if b.image {
			continue
		}
		if err := set(i, uint64(b.offset), longSize); err != nil {
			return err
		}
		i++
	}
	for _, v := range dims {
		if err := set(i, uint64(v), longSize); err != nil {
			return err
		}
		i++
	}
	return set(i, uint64(d.status), memSize)
}

// Sync implements devices.Device: it waits for the queue, then reads the status block.
// A failure the driver reports, or a nonzero code a kernel wrote, is an error naming the
// kernels launched since the last Sync; the block is zeroed again after a code is read.
func (d *Device) Sync() error {
	if err := d.open(); err != nil {
		return err
	}
	d.statusMu.Lock()
	defer d.statusMu.Unlock()
	names := d.launched.Take()
	a := d.api
	err := check("clFinish", a.call(a.finish, d.queue))
	if err == nil {
		st := new([3]int64)
		err = check("clEnqueueReadBuffer", a.call(a.enqueueReadBuffer, d.queue, d.status, clTrue, 0, statusBytes, uintptr(unsafe.Pointer(&st[0])), 0, 0, 0))
		if err == nil && st[0] != 0 {
			if zerr := d.zeroStatus(); zerr != nil {
				return fmt.Errorf("%w: clearing the status block: %v", devices.ErrLaunch, zerr)
			}
			// kernels claim the code with a 32-bit compare-and-swap on its first half
			return devices.StatusError(names, *st)
		}
	}
	if err != nil {
		return fmt.Errorf("%w: kernels %s on %s: %v", devices.ErrLaunch, names, d.where, err)
	}
	return nil
}

// zeroStatus queues the status block's zeroing.
func (d *Device) zeroStatus() error {
	return d.fill(d.status, 0, statusBytes)
}
