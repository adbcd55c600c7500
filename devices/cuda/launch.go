package cuda

import (
	"bytes"
	"fmt"
	"sync"
	"unsafe"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/internal/dynlib"
)

// module is a loaded PTX or cubin image.
type module struct {
	d      *Device
	handle uintptr // CUmodule
	mu     sync.Mutex
	closed bool
}

type kernel struct {
	name   string
	fn     uintptr // CUfunction
	params int     // the kernel's parameter count, -1 when the driver cannot say
	mod    *module
}

func (k *kernel) Name() string { return k.name }

var (
	elfMagic    = []byte("\x7fELF")
	fatbinMagic = []byte{0x50, 0xed, 0x55, 0xba} // 0xBA55ED50, little-endian
)

// Load implements devices.Device: a cubin (ELF), a fatbinary, or PTX text (NUL-terminated
// here when it is not already), JIT-compiled by the driver for this device.
func (d *Device) Load(binary []byte) (devices.Module, error) {
	if len(binary) == 0 {
		return nil, fmt.Errorf("%w: empty CUDA image", devices.ErrLoad)
	}
	img := binary
	if !bytes.HasPrefix(img, elfMagic) && !bytes.HasPrefix(img, fatbinMagic) && img[len(img)-1] != 0 {
		img = append(append(make([]byte, 0, len(binary)+1), binary...), 0)
	}
	if err := d.enter(); err != nil {
		return nil, err
	}
	defer d.leave()
	m := &module{d: d}
	if err := d.drv.check("cuModuleLoadData", d.drv.call(d.drv.moduleLoadData, uintptr(unsafe.Pointer(&m.handle)), uintptr(unsafe.Pointer(&img[0])))); err != nil {
		return nil, fmt.Errorf("%w: %v", devices.ErrLoad, err)
	}
	return m, nil
}

// Kernel implements devices.Module.
func (m *module) Kernel(name string) (devices.Kernel, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, fmt.Errorf("%w: module is closed", devices.ErrLoad)
	}
	d := m.d
	if err := d.enter(); err != nil {
		return nil, err
	}
	defer d.leave()
	k := &kernel{name: name, mod: m, params: -1}
	cname := dynlib.CString(name)
	if err := d.drv.check("cuModuleGetFunction", d.drv.call(d.drv.moduleGetFunction, uintptr(unsafe.Pointer(&k.fn)), m.handle, uintptr(unsafe.Pointer(&cname[0])))); err != nil {
		return nil, fmt.Errorf("%w: no kernel %q: %v", devices.ErrLoad, name, err)
	}
	if d.drv.funcGetParamInfo != 0 {
		k.params = d.drv.paramCount(k.fn)
	}
	return k, nil
}

// Close implements devices.Module: it waits for launched work, then unloads the image.
func (m *module) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	d := m.d
	if err := d.enter(); err != nil {
		return nil // the device is closed, and its context with every module
	}
	defer d.leave()
	err := d.syncStream()
	if r := d.drv.call(d.drv.moduleUnload, m.handle); err == nil {
		err = d.drv.check("cuModuleUnload", r)
	}
	return err
}

// launchArgs is one launch's parameter values and the pointers to them that
// cuLaunchKernel reads (it copies the values before it returns), recycled.
type launchArgs struct {
	vals   []uint64
	params []unsafe.Pointer
}

var launchPool = sync.Pool{New: func() any { return new(launchArgs) }}

// Launch implements devices.Device: the kernel is queued on the stream with the
// convention's parameters (buffer pointers, dims, the status block) and Launch returns;
// a code the kernel writes to the status block surfaces at the next Sync.
func (d *Device) Launch(k devices.Kernel, g devices.Geometry, bufs []devices.Buffer, dims []int64) error {
	kk, ok := k.(*kernel)
	if !ok || kk == nil {
		return fmt.Errorf("%w: kernel of another device (%T)", devices.ErrLaunch, k)
	}
	kk.mod.mu.Lock()
	closed := kk.mod.closed
	kk.mod.mu.Unlock()
	if closed {
		return fmt.Errorf("%w: kernel %q of a closed module", devices.ErrLaunch, kk.name)
	}
	for _, n := range [6]int{g.Grid[0], g.Grid[1], g.Grid[2], g.Block[0], g.Block[1], g.Block[2]} {
		if n <= 0 || n > 1<<31-1 {
			return fmt.Errorf("%w: kernel %q: geometry grid %v block %v: every extent must be positive", devices.ErrLaunch, kk.name, g.Grid, g.Block)
		}
	}
	n := len(bufs) + len(dims) + 1
	if kk.params >= 0 && kk.params != n {
		return fmt.Errorf("%w: kernel %q takes %d parameters, given %d buffers, %d dims and the status block", devices.ErrLaunch, kk.name, kk.params, len(bufs), len(dims))
	}
	a := launchPool.Get().(*launchArgs)
	defer launchPool.Put(a)
	a.vals = append(a.vals[:0], make([]uint64, n)...)
	for i, b := range bufs {
		cb, err := d.own(b)
		if err != nil {
			return fmt.Errorf("kernel %q argument %d: %w", kk.name, i, err)
		}
		a.vals[i] = cb.ptr
	}
	for i, v := range dims {
		a.vals[len(bufs)+i] = uint64(v)
	}
	a.vals[n-1] = d.status
	a.params = a.params[:0]
	for i := range a.vals {
		a.params = append(a.params, unsafe.Pointer(&a.vals[i]))
	}
	if err := d.enter(); err != nil {
		return err
	}
	r := d.drv.call(d.drv.launch, kk.fn,
		uintptr(g.Grid[0]), uintptr(g.Grid[1]), uintptr(g.Grid[2]),
		uintptr(g.Block[0]), uintptr(g.Block[1]), uintptr(g.Block[2]),
		0, d.stream, uintptr(unsafe.Pointer(&a.params[0])), 0)
	d.leave()
	clear(a.params)
	if err := d.drv.check("cuLaunchKernel", r); err != nil {
		return fmt.Errorf("%w: kernel %q: %v", devices.ErrLaunch, kk.name, err)
	}
	d.statusMu.Lock()
	d.launched.Add(kk.name)
	d.statusMu.Unlock()
	return nil
}

// Sync implements devices.Device: it waits for the stream, then reads the status block.
// A fault the driver reports, or a nonzero code a kernel wrote, is an error naming the
// kernels launched since the last Sync; the block is zeroed again after a code is read.
func (d *Device) Sync() error {
	if err := d.enter(); err != nil {
		return err
	}
	defer d.leave()
	d.statusMu.Lock()
	defer d.statusMu.Unlock()
	names := d.launched.Take()
	err := d.syncStream()
	if err == nil {
		st := new([3]int64)
		err = d.copyOut(unsafe.Pointer(&st[0]), d.status, statusBytes)
		if err == nil && st[0] != 0 {
			if zerr := d.zeroStatus(); zerr != nil {
				return fmt.Errorf("%w: clearing the status block: %v", devices.ErrLaunch, zerr)
			}
			return devices.StatusError(names, *st)
		}
	}
	if err != nil {
		return fmt.Errorf("%w: kernels %s: %v", devices.ErrLaunch, names, err)
	}
	return nil
}

// syncStream waits for the stream; the caller has entered.
func (d *Device) syncStream() error {
	return d.drv.check("cuStreamSynchronize", d.drv.call(d.drv.streamSynchronize, d.stream))
}

// zeroStatus queues the status block's zeroing; the caller has entered.
func (d *Device) zeroStatus() error {
	return d.drv.check("cuMemsetD8Async", d.drv.call(d.drv.memsetD8Async, uintptr(d.status), 0, statusBytes, d.stream))
}
