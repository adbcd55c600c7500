package vm

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/kilnrt/kiln/devices"
)

// Aligner is implemented by devices whose kernels need their buffers' views at
// multiples of a base alignment (OpenCL sub-buffers); others get PlanAlign.
type Aligner interface {
	BaseAlign() int64
}

// DeviceAlign is the alignment of the offsets the VM places tensors and pool blocks at
// on d: PlanAlign, or the device's base alignment rounded up to a multiple of it.
func DeviceAlign(d devices.Device) int64 {
	a, ok := d.(Aligner)
	if !ok {
		return PlanAlign
	}
	b := a.BaseAlign()
	if b <= PlanAlign || b > 1<<30 {
		return PlanAlign
	}
	return (b + PlanAlign - 1) / PlanAlign * PlanAlign
}

// geometry evaluates a GPU kernel's launch geometry at the runtime dims; skip reports
// a grid with no blocks (no work: the launch is skipped). An extent that overflows is
// the request's fault (ErrInput); a negative grid or a non-positive block is the
// executable's.
func geometry(in *Instr, k KernelInfo, dims []int64) (g devices.Geometry, skip bool, err error) {
	for i := range 3 {
		for j, e := range [2]Extent{k.Launch.Grid[i], k.Launch.Block[i]} {
			part := [2]string{"grid", "block"}[j]
			v, err := e.Eval(dims)
			if err != nil {
				return g, false, fmt.Errorf("%w: %s: kernel %s %s extent %d: %w", ErrInput, what(in), k.Name, part, i, err)
			}
			if v < 0 || v > math.MaxInt32 || j == 1 && v == 0 {
				return g, false, fmt.Errorf("%s: kernel %s %s extent %d is %d (dims %v)", what(in), k.Name, part, i, v, dims)
			}
			if j == 0 {
				g.Grid[i] = int(v)
				skip = skip || v == 0
			} else {
				g.Block[i] = int(v)
			}
		}
	}
	return g, skip, nil
}

// pending is a GPU kernel launched by a call and not yet synchronized: its failure
// surfaces at the device's next Sync, which names it through this record.
type pending struct {
	dev  int
	in   *Instr
	k    KernelInfo
	dims []int64
}

// sync waits for the GPU kernels this call launched on device d (d < 0: on every
// device) and turns a kernel's failure into the call's error, typed as a CPU kernel's
// is (kernelError) and naming the node.
func (c *call) sync(d int) error {
	if len(c.pending) == 0 {
		return nil
	}
	var first error
	for dev := range c.m.devs {
		if d >= 0 && dev != d {
			continue
		}
		var mine []pending
		rest := c.pending[:0]
		for _, p := range c.pending {
			if p.dev == dev {
				mine = append(mine, p)
			} else {
				rest = append(rest, p)
			}
		}
		c.pending = rest
		if len(mine) == 0 {
			continue
		}
		if err := c.m.devs[dev].Sync(); err != nil && first == nil {
			first = syncError(mine, err)
		}
	}
	return first
}

// syncError attributes a Sync failure to the launches it covers: a kernel error with
// the node of the one launch it names (the first of them when it names several).
func syncError(launched []pending, err error) error {
	var ke *devices.KernelError
	if !errors.As(err, &ke) {
		return err
	}
	p := launched[0]
	for _, q := range launched {
		if strings.Contains(ke.Kernel, q.k.Name) {
			p = q
			break
		}
	}
	return kernelError(p.in, p.k, p.dims, err)
}

// constPlace is a constant's copy on a device other than its own.
type constPlace struct {
	idx, dev int
}

// placed holds the constants copied to the devices of the GPU kernels that read them:
// uploaded at load for every LoadConst whose register reaches a kernel argument
// directly (or through Move and ReshapeTensor), and at first use otherwise.
type placed struct {
	mu     sync.Mutex
	copies map[constPlace]*Storage
	images map[constImage]*Storage // constants copied into images (weights a kernel reads as textures)
	index  map[*Storage]int        // a constant's own storage → its index
}

type constImage struct {
	idx int
	img imageKey
}

// kernelDevices maps each kernel to the device its binary was loaded on.
func kernelDevices(exe *Executable, binDev []int) []int {
	out := make([]int, len(exe.Kernels))
	for i, k := range exe.Kernels {
		out[i] = binDev[k.Binary]
	}
	return out
}

// constUses lists the constants each device other than 0 needs for its kernels: a
// register holding a LoadConst's constant (directly or through Move and
// ReshapeTensor, in instruction order) passed to a kernel on that device.
func (m *VM) constUses() []constPlace {
	seen := map[constPlace]bool{}
	var out []constPlace
	for _, f := range m.exe.Functions {
		held := map[Reg]int{}
		for _, in := range f.Code {
			switch in.Op {
			case InvokeKernel:
				for _, r := range in.Args[:in.In] {
					if ci, ok := held[r]; ok {
						if p := (constPlace{ci, m.kdev[in.Imm]}); p.dev != 0 && !seen[p] {
							seen[p] = true
							out = append(out, p)
						}
					}
				}
				continue
			case LoadConst:
				held[in.Dst] = int(in.Imm)
				continue
			case Move, ReshapeTensor:
				if ci, ok := held[in.Args[0]]; ok {
					held[in.Dst] = ci
					continue
				}
			case Ret, KillRegister, If, Goto, Fatal:
				continue
			}
			delete(held, in.Dst)
		}
	}
	return out
}

// placeConst copies constant idx to device dev once (at load, or at its first use by a
// kernel there) and returns the copy's storage.
func (m *VM) placeConst(idx, dev int) (*Storage, error) {
	m.placed.mu.Lock()
	defer m.placed.mu.Unlock()
	key := constPlace{idx, dev}
	if s := m.placed.copies[key]; s != nil {
		return s, nil
	}
	var owned []*Storage
	t, err := m.upload(dev, m.exe.Constants[idx], &owned)
	if err != nil {
		for _, s := range owned {
			m.pool.put(s)
		}
		return nil, fmt.Errorf("constant %d to device %d: %w", idx, dev, err)
	}
	t.Storage.constant = true
	m.storages = append(m.storages, t.Storage)
	m.placed.copies[key] = t.Storage
	return t.Storage, nil
}

// placeConstImage copies constant idx into an image of key k once (at its first
// DeviceCopy into such an image: a weight a kernel reads as a texture) and returns the
// image's storage, held until the VM closes.
func (m *VM) placeConstImage(idx int, k imageKey) (*Storage, error) {
	m.placed.mu.Lock()
	defer m.placed.mu.Unlock()
	key := constImage{idx, k}
	if s := m.placed.images[key]; s != nil {
		return s, nil
	}
	c := m.exe.Constants[idx]
	raw, ok := c.NativeBytes()
	if !ok {
		var err error
		if raw, err = c.Raw(); err != nil {
			return nil, err
		}
	}
	if int64(len(raw)) > k.bytes() {
		return nil, fmt.Errorf("constant %d (%d bytes) does not fit a %v", idx, len(raw), k)
	}
	s, err := m.pool.getImage(k)
	if err != nil {
		return nil, fmt.Errorf("constant %d to a %v: %w", idx, k, err)
	}
	if err := m.devs[k.dev].CopyIn(s.Buf, raw); err != nil {
		m.pool.put(s)
		return nil, fmt.Errorf("constant %d to a %v: %w", idx, k, err)
	}
	s.constant = true
	m.storages = append(m.storages, s)
	if m.placed.images == nil {
		m.placed.images = map[constImage]*Storage{}
	}
	m.placed.images[key] = s
	return s, nil
}

// onDevice is the tensor a kernel on device dev reads for t: t itself, or the copy of
// the constant it views on dev. A non-constant tensor on another device is an error.
func (c *call) onDevice(t *Tensor, dev int) (*Tensor, error) {
	if t.Storage.Device == dev {
		return t, nil
	}
	if t.Storage.constant {
		if idx, ok := c.m.placed.index[t.Storage]; ok {
			s, err := c.m.placeConst(idx, dev)
			if err != nil {
				return nil, err
			}
			return &Tensor{Storage: s, Offset: t.Offset, DType: t.DType, Shape: t.Shape}, nil
		}
	}
	return nil, fmt.Errorf("a tensor on device %d, the kernel runs on device %d", t.Storage.Device, dev)
}

// gpuLocks hold each GPU device for one call at a time, across every VM of the process:
// a device reports a kernel's failure in one status block, read at its next Sync, and
// Sync waits for the device's whole queue, so two calls launching at once could each
// see the other's failure (or wait for its kernels).
var gpuLocks sync.Map // devices.Device → *sync.Mutex

// holdGPU makes the call the only one launching on device d until it ends (free): from
// its first GPU launch there, so calls that only copy to a device do not wait.
func (c *call) holdGPU(d int) {
	dev := c.m.devs[d]
	l, _ := gpuLocks.LoadOrStore(dev, &sync.Mutex{})
	mu := l.(*sync.Mutex)
	for _, held := range c.gpus {
		if held == mu {
			return
		}
	}
	mu.Lock()
	c.gpus = append(c.gpus, mu)
}
