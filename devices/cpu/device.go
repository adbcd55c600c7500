package cpu

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
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
	// and hand back the large scratch blocks its runtime keeps between launches
	// (codegen's cScratch): the heap they live in outlasts the object
	if sym, err := purego.Dlsym(m.handle, "kiln_scratch_release"); err == nil && sym != 0 {
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
	yieldNow()
	r1, _, _ := purego.SyscallN(kk.sym, a.args[:]...)
	clear(a.ptrs) // hold no buffer past the launch
	if rc := int32(r1); rc != 0 {
		return &devices.KernelError{Kernel: kk.name, Code: rc, Detail: [2]int64{a.ctx[1], a.ctx[2]}}
	}
	return nil
}

// lastYield is when a launch last yielded its goroutine's processor (yieldNow), in
// nanoseconds since yieldEpoch.
var lastYield atomic.Int64

// yieldEpoch is the monotonic clock reading yieldNow measures from.
var yieldEpoch = time.Now()

// yieldInterval is how often launches yield the processor (yieldNow): below the Go
// runtime's 10 ms time slice.
const yieldInterval = 2 * time.Millisecond

// yieldNow lets the Go scheduler run (runtime.Gosched) when yieldInterval has passed
// since a launch last did. A kernel is a foreign call, which the runtime treats as a
// system call; a goroutine that launches kernels back to back never reschedules, and
// once it has held its processor for 10 ms (forcePreemptNS) the runtime's monitor
// thread takes the processor from it in the middle of a kernel, hands it to another
// thread and, finding work again, polls every 20 µs: tens of thousands of context
// switches a second, on the core the second thread of a 2-thread kernel needs.
// Yielding every 2 ms keeps the time slice fresh. MobileNetV3-large at 2 threads, 800
// inferences: 29-33 thousand context switches → 3.5-4.2 thousand, p50 3.85-3.93 →
// 3.70-3.86 ms (three runs each, alternating, 2 vCPUs of an Emerald Rapids Xeon; in a
// noisier hour, yielding every 16 launches: 21-43 thousand → 5.2-5.7 thousand, p50
// 4.58-5.44 → 4.44-4.96 ms).
func yieldNow() {
	now := int64(time.Since(yieldEpoch))
	if last := lastYield.Load(); now-last >= int64(yieldInterval) && lastYield.CompareAndSwap(last, now) {
		runtime.Gosched()
	}
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
