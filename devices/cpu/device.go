package cpu

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/target"
)

// Device is the host CPU.
type Device struct {
	cc      *Compiler // nil: can load and run prebuilt binaries, cannot build
	info    devices.Info
	threads int64

	mu    sync.Mutex
	alive map[*buffer]bool
}

// Options configure the device.
type Options struct {
	// NoCompiler opens the device for running prebuilt binaries only.
	NoCompiler bool
	// Threads is how many threads a parallel loop may use (0: every core).
	Threads int
}

// Open opens the CPU device, finding a C compiler unless opts.NoCompiler. An unknown
// ISA cap (target.ISAEnv) is target.ErrUnknownLevel.
func Open(opts Options) (*Device, error) {
	host, err := target.HostChecked()
	if err != nil {
		return nil, err
	}
	d := &Device{alive: map[*buffer]bool{}, threads: int64(opts.Threads)}
	if d.threads <= 0 {
		d.threads = int64(runtime.NumCPU())
	}
	d.info = devices.Info{Kind: "cpu", Name: cpuModel(), Fingerprint: host.Fingerprint(), Threads: int(d.threads)}
	if !opts.NoCompiler {
		cc, err := FindCompiler()
		if err != nil {
			return nil, err
		}
		d.cc = cc
		d.info.Toolchain = cc.Version
	}
	return d, nil
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "cpu"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "cpu"
}

// Compiler returns the C compiler, or nil when opened without one.
func (d *Device) Compiler() *Compiler { return d.cc }

// Info implements devices.Device.
func (d *Device) Info() devices.Info { return d.info }

// module is a dlopen'ed shared object.
type module struct {
	handle uintptr
	closed bool
	mu     sync.Mutex
}

type kernel struct {
	name string
	sym  uintptr // int fn(void *const *bufs, const int64_t *dims, void *ctx)
	mod  *module
}

// launchArgs is one launch's argument arrays, recycled: a request runs a few dozen
// kernels and these were most of a launch's garbage.
type launchArgs struct {
	ptrs []unsafe.Pointer
	dims []int64
	ctx  [3]int64   // {num_threads, detail, detail}: see devices' calling convention
	args [3]uintptr // the call's arguments: a variadic list built at the call would be allocated on every launch
}

var launchPool = sync.Pool{New: func() any { return new(launchArgs) }}

func (k *kernel) Name() string { return k.name }

// Load implements devices.Device: the shared object is written to a private temporary
// file, dlopen'ed, and the file removed.
func (d *Device) Load(binary []byte) (devices.Module, error) {
	f, err := os.CreateTemp("", "kiln-*.so")
	if err != nil {
		return nil, err
	}
	path := f.Name()
	defer os.Remove(path)
	if _, err := f.Write(binary); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	h, err := purego.Dlopen(filepath.Clean(path), purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", devices.ErrLoad, err)
	}
	return &module{handle: h}, nil
}

// Kernel implements devices.Module.
func (m *module) Kernel(name string) (devices.Kernel, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, fmt.Errorf("%w: module is closed", devices.ErrLoad)
	}
	sym, err := purego.Dlsym(m.handle, name)
	if err != nil || sym == 0 {
		return nil, fmt.Errorf("%w: no kernel %q: %v", devices.ErrLoad, name, err)
	}
	return &kernel{name: name, sym: sym, mod: m}, nil
}

// Close implements devices.Module.
func (m *module) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	// generated code with parallel loops keeps worker threads running in the object:
	// stop them before its code is unmapped
	if sym, err := purego.Dlsym(m.handle, "kiln_pool_shutdown"); err == nil && sym != 0 {
		purego.SyscallN(sym)
	}
	return purego.Dlclose(m.handle)
}

// Launch implements devices.Device: one foreign call with the buffer pointer array, the
// dims array and the context, whose first int64 is the number of threads parallel loops
// may use.
func (d *Device) Launch(k devices.Kernel, _ devices.Geometry, bufs []devices.Buffer, dims []int64) error {
	kk, ok := k.(*kernel)
	if !ok {
		return fmt.Errorf("%w: kernel of another device (%T)", devices.ErrLaunch, k)
	}
	kk.mod.mu.Lock()
	closed := kk.mod.closed
	kk.mod.mu.Unlock()
	if closed {
		return fmt.Errorf("%w: kernel %q of a closed module", devices.ErrLaunch, kk.name)
	}
	a := launchPool.Get().(*launchArgs)
	defer launchPool.Put(a)
	a.ptrs = append(a.ptrs[:0], make([]unsafe.Pointer, len(bufs)+1)...)
	for i, b := range bufs {
		cb, err := d.own(b)
		if err != nil {
			clear(a.ptrs)
			return fmt.Errorf("kernel %q argument %d: %w", kk.name, i, err)
		}
		a.ptrs[i] = unsafe.Pointer(&cb.mem[0])
	}
	a.dims = append(append(a.dims[:0], dims...), 0)
	a.ctx = [3]int64{d.threads, 0, 0} // the kernel context: {num_threads, detail words}
	// a direct foreign call (purego.RegisterFunc's reflect-built wrapper allocated
	// on every call); the arrays are heap objects that stay alive through it
	a.args = [3]uintptr{uintptr(unsafe.Pointer(&a.ptrs[0])), uintptr(unsafe.Pointer(&a.dims[0])), uintptr(unsafe.Pointer(&a.ctx[0]))}
	r1, _, _ := purego.SyscallN(kk.sym, a.args[:]...)
	clear(a.ptrs) // hold no buffer past the launch
	if rc := int32(r1); rc != 0 {
		return &devices.KernelError{Kernel: kk.name, Code: rc, Detail: [2]int64{a.ctx[1], a.ctx[2]}}
	}
	return nil
}

// Sync implements devices.Device; CPU launches are synchronous.
func (d *Device) Sync() error { return nil }

// Close frees every live buffer and the compiler's work directory.
func (d *Device) Close() error {
	if d.cc != nil {
		d.cc.Close()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for b := range d.alive {
		if !b.foreign {
			_ = syscall.Munmap(b.mem)
		}
		delete(d.alive, b)
	}
	return nil
}

var (
	_ devices.Device     = (*Device)(nil)
	_ devices.Slicer     = (*Device)(nil)
	_ devices.HostMapper = (*Device)(nil)
)
