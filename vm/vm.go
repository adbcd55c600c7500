package vm

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/tensor"
)

// ErrRun is wrapped by every failure while running an executable (bad inputs, a kernel
// error, a Fatal instruction, cancellation).
var ErrRun = errors.New("vm run failed")

// ErrInput: an input does not match the executable's signature (element type, rank or a
// static extent); the request is at fault, not the executable.
var ErrInput = errors.New("input does not match the executable")

// ErrOutOfBounds: a bounds-checked kernel (a debug build) accessed an element outside
// one of its buffers. The executable is at fault, not the request: it is a compiler bug.
var ErrOutOfBounds = errors.New("kernel access out of bounds (a compiler bug)")

// Builtin is a host function called by CallBuiltin on host copies of its arguments.
type Builtin func(args []*tensor.Tensor) (*tensor.Tensor, error)

// maxDepth bounds Invoke recursion (an executable cannot overflow the Go stack).
const maxDepth = 256

// VM runs one loaded executable; Run is safe for concurrent use (each call has its own
// frames and allocations).
type VM struct {
	exe      *Executable
	devs     []devices.Device
	kernels  []devices.Kernel
	builtins []Builtin
	hostOps  []HostOp       // by host call
	vbuilt   []valueBuiltin // the sequence and optional builtins, by builtin index (zero: a tensor builtin)
	consts   []*Tensor      // constants uploaded to device 0
	modules  []devices.Module
	storages []*Storage // the constants' storage
	pool     *pool      // best-fit allocator of storages, keeping finished calls' memory
	limits   Limits     // resolved: every field set
	// memPlanAt is the index of BuiltinMemPlan in the executable's builtins (-1: none)
	memPlanAt int
	// argBytes holds each kernel argument's bytes when they do not depend on the dims
	// (-1 when they do), by kernel
	argBytes [][]int64
	// kdev is the device each kernel runs on (its binary's)
	kdev []int
	// placed holds the constants copied to other devices for their GPU kernels
	placed placed
}

// Options configure LoadWith.
type Options struct {
	// Limits bound one call's memory (zero fields: DefaultLimits).
	Limits Limits
	// HostOps resolves the executable's host calls (nil: StdHostOps).
	HostOps HostOps
}

// Load is LoadWith with default Options.
func Load(exe *Executable, devs []devices.Device, table map[string]Builtin) (*VM, error) {
	return LoadWith(exe, devs, table, Options{})
}

// LoadWith verifies the executable, checks its static memory against opts.Limits (a
// planned tensor or arena over them is an error wrapping ErrMemoryLimit), loads each
// binary on the first device of its kind, looks up every kernel, resolves builtins by
// name in table (the memory builtins are the VM's own) and binds the constants on
// devs[0]: in place (devices.HostMapper, no copy) when the executable's constants alias
// their backing memory (Mapped) and the device can read host memory, else by upload.
// Kernels may read constants, never write them (launch refuses a constant as an output).
// Close releases all of it.
func LoadWith(exe *Executable, devs []devices.Device, table map[string]Builtin, opts Options) (*VM, error) {
	if err := exe.Verify(); err != nil {
		return nil, err
	}
	if len(devs) == 0 {
		return nil, fmt.Errorf("%w: no device", ErrRun)
	}
	limits := opts.Limits.Resolved()
	if err := exe.checkStatic(limits); err != nil {
		return nil, err
	}
	m := &VM{exe: exe, devs: devs, pool: newPool(devs), limits: limits, memPlanAt: -1}
	fail := func(err error) (*VM, error) { m.Close(); return nil, err }
	binDev := make([]int, len(exe.Binaries))
	for i, b := range exe.Binaries {
		di := -1
		for j, d := range devs {
			if d.Info().Kind == b.Device {
				di = j
				break
			}
		}
		if di < 0 {
			return fail(fmt.Errorf("%w: binary %d is for a %s device, none given", ErrRun, i, b.Device))
		}
		if fp := devs[di].Info().Fingerprint; b.Fingerprint != "" && fp != b.Fingerprint {
			return fail(fmt.Errorf("%w: binary %d was built for %q, this device is %q", ErrRun, i, b.Fingerprint, fp))
		}
		mod, err := devs[di].Load(b.Data)
		if err != nil {
			return fail(fmt.Errorf("binary %d: %w", i, err))
		}
		m.modules = append(m.modules, mod)
		binDev[i] = di
	}
	m.kdev = kernelDevices(exe, binDev)
	for _, k := range exe.Kernels {
		kern, err := m.modules[k.Binary].Kernel(k.Name)
		if err != nil {
			return fail(err)
		}
		m.kernels = append(m.kernels, kern)
		ab := make([]int64, len(k.Args))
		for i, a := range k.Args {
			ab[i] = a.constBytes()
		}
		m.argBytes = append(m.argBytes, ab)
	}
	vtable := valueBuiltins()
	m.vbuilt = make([]valueBuiltin, len(exe.Builtins))
	for i, name := range exe.Builtins {
		if vb, ok := vtable[name]; ok { // the VM's own: they take registers' values
			m.vbuilt[i] = vb
			m.builtins = append(m.builtins, nil)
			continue
		}
		if name == BuiltinMemPlan { // the VM's own: it reads the call's memory
			m.memPlanAt = i
			m.builtins = append(m.builtins, nil)
			continue
		}
		b, ok := table[name]
		if !ok {
			return fail(fmt.Errorf("%w: builtin %q is not in this VM's table", ErrRun, name))
		}
		m.builtins = append(m.builtins, b)
	}
	if err := m.resolveHostOps(opts.HostOps); err != nil {
		return fail(err)
	}
	mapper, _ := devs[0].(devices.HostMapper)
	if !exe.Mapped() {
		mapper = nil
	}
	for i, c := range exe.Constants {
		t, err := m.bindConst(mapper, c)
		if err != nil {
			return fail(fmt.Errorf("constant %d: %w", i, err))
		}
		t.Storage.constant = true
		m.consts = append(m.consts, t)
	}
	m.placed.copies = map[constPlace]*Storage{}
	m.placed.index = make(map[*Storage]int, len(m.consts))
	for i, t := range m.consts {
		m.placed.index[t.Storage] = i
	}
	for _, p := range m.constUses() {
		if _, err := m.placeConst(p.idx, p.dev); err != nil {
			return fail(err)
		}
	}
	return m, nil
}

// Close frees the constants and the pool's memory and unloads the binaries.
func (m *VM) Close() error {
	for _, s := range m.storages {
		if s.blk != nil {
			m.pool.put(s) // an uploaded constant
		} else {
			m.devs[s.Device].Free(s.Buf) // mapped in place
		}
	}
	m.storages = nil
	m.pool.drain()
	var first error
	for _, mod := range m.modules {
		if err := mod.Close(); err != nil && first == nil {
			first = err
		}
	}
	m.modules = nil
	return first
}

// call is the state of one Run: its allocations, freed when it ends.
type call struct {
	m        *VM
	ctx      context.Context
	storages []*Storage
	borrowed []*Storage // inputs bound without a copy (bind): views of the caller's memory
	steps    int
	prof     *Profile      // nil unless profiling
	held     int64         // bytes of the call's storages (checked against Limits.RequestBytes)
	pending  []pending     // GPU kernels launched and not yet synchronized
	gpus     []*sync.Mutex // the GPU devices this call holds (gpuLock), released at its end
	// a host kernel launch's arguments (launchScratch), reused by every launch
	bufs []devices.Buffer
	ts   []*Tensor
	dims []int64
}

// Run invokes the entry function on host inputs and returns its result as host tensors
// (a tuple result gives one tensor per field). An executable whose entry takes or
// returns sequences or optionals runs with RunValues. A large input may be read in
// place (bind): the caller keeps the inputs unchanged until Run returns.
func (m *VM) Run(ctx context.Context, inputs []*tensor.Tensor) ([]*tensor.Tensor, error) {
	return m.run(ctx, inputs, nil)
}

func (m *VM) run(ctx context.Context, inputs []*tensor.Tensor, prof *Profile) ([]*tensor.Tensor, error) {
	vals := make([]any, len(inputs))
	for i, t := range inputs {
		vals[i] = t
	}
	outs, err := m.runValues(ctx, vals, prof)
	if err != nil {
		return nil, err
	}
	return tensorsOf(outs, m.exe.Outputs)
}

func (m *VM) runValues(ctx context.Context, inputs []any, prof *Profile) (out []any, err error) {
	defer func() {
		// a panicking builtin must not take the daemon down
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("%w: BUG: panic: %v", ErrRun, r)
		}
	}()
	entry := m.exe.Functions[m.exe.Entry]
	if len(inputs) != entry.Params {
		return nil, fmt.Errorf("%w: %s takes %d inputs, got %d", ErrRun, entry.Name, entry.Params, len(inputs))
	}
	if err := m.checkInputs(inputs); err != nil {
		return nil, err
	}
	c := &call{m: m, ctx: ctx, prof: prof}
	defer c.free()
	args := make([]Value, len(inputs))
	for i, in := range inputs {
		name, elem := fmt.Sprintf("input %d", i), tensor.DType(0)
		if i < len(m.exe.Inputs) {
			io := m.exe.Inputs[i]
			name, elem = fmt.Sprintf("input %q", io.Name), io.DType
			if _, isOpt := in.(*OptValue); !isOpt && (io.Kind == IOOptional || io.Kind == IOOptSequence) {
				in = &OptValue{V: in} // an optional's content given bare
			}
		}
		v, err := c.input(in, name, elem)
		if err != nil {
			return nil, fmt.Errorf("%w: input %d: %w", ErrRun, i, err)
		}
		args[i] = v
	}
	ret, err := c.invoke(m.exe.Entry, args, 0)
	if err != nil {
		return nil, err
	}
	if err := c.sync(-1); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRun, err)
	}
	var flat []Value
	if tup, ok := ret.(*Tuple); ok {
		flat = tup.Fields
	} else {
		flat = []Value{ret}
	}
	res := make([]any, len(flat))
	for i, v := range flat {
		if res[i], err = c.output(v); err != nil {
			return nil, fmt.Errorf("%w: output %d: %v", ErrRun, i, err)
		}
	}
	return res, nil
}

func (c *call) free() {
	// kernels still running must not write memory the pool hands out again; their
	// failure is moot once the call has failed
	_ = c.sync(-1)
	for _, mu := range c.gpus {
		mu.Unlock()
	}
	c.gpus = nil
	for _, s := range c.storages {
		c.m.pool.put(s)
	}
	for _, s := range c.borrowed {
		_ = c.m.devs[s.Device].Free(s.Buf) // the device's bookkeeping only: the caller's bytes stay
	}
	c.borrowed = nil
}

// release returns a storage this call allocated to the pool before the call ends (a
// KillRegister of its register: the compiler emits one after the last use of a tensor
// sized at run time, so later allocations of the call reuse its memory). A storage the
// call does not own (a constant's) is left alone.
func (c *call) release(s *Storage) {
	for i, o := range c.storages {
		if o == s {
			last := len(c.storages) - 1
			c.storages[i] = c.storages[last]
			c.storages = c.storages[:last]
			c.held -= s.Size
			c.m.pool.put(s)
			return
		}
	}
}
