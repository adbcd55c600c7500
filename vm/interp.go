package vm

import (
	"errors"
	"fmt"
	"time"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/tensor"
)

// invoke runs function fi on args in a fresh frame.
func (c *call) invoke(fi int, args []Value, depth int) (Value, error) {
	f := &c.m.exe.Functions[fi]
	if depth >= maxDepth {
		return nil, fmt.Errorf("%w: calls nested deeper than %d in %s", ErrRun, maxDepth, f.Name)
	}
	regs := make([]Value, f.Regs)
	copy(regs, args)
	for pc := 0; pc < len(f.Code); {
		if c.steps++; c.steps&1023 == 0 {
			if err := c.ctx.Err(); err != nil {
				return nil, fmt.Errorf("%w: %s: %v", ErrRun, f.Name, err)
			}
		}
		in := &f.Code[pc]
		next, ret, err := c.step(f, regs, in, pc, depth)
		if err != nil {
			return nil, fmt.Errorf("%w: %s, instruction %d (%v): %w", ErrRun, f.Name, pc, in.Op, err)
		}
		if in.Op == Ret {
			return ret, nil
		}
		pc = next
	}
	return nil, fmt.Errorf("%w: %s ran past its last instruction without Ret", ErrRun, f.Name)
}

// step executes one instruction and returns the next pc (and, for Ret, the value).
func (c *call) step(f *Function, regs []Value, in *Instr, pc, depth int) (int, Value, error) {
	arg := func(i int) (Value, error) {
		v := regs[in.Args[i]]
		if v == nil {
			return nil, fmt.Errorf("register %d is empty", in.Args[i])
		}
		return v, nil
	}
	set := func(v Value) (int, Value, error) {
		regs[in.Dst] = v
		return pc + 1, nil, nil
	}
	switch in.Op {
	case Move:
		v, err := arg(0)
		if err != nil {
			return 0, nil, err
		}
		return set(v)
	case Ret:
		v, err := arg(0)
		return 0, v, err
	case Invoke:
		args := make([]Value, len(in.Args))
		for i := range args {
			v, err := arg(i)
			if err != nil {
				return 0, nil, err
			}
			args[i] = v
		}
		v, err := c.invoke(int(in.Imm), args, depth+1)
		if err != nil {
			return 0, nil, err
		}
		return set(v)
	case InvokeKernel:
		return pc + 1, nil, c.launch(regs, in)
	case CallBuiltin:
		if vb := c.m.vbuilt[in.Imm]; vb.f != nil {
			return c.stepValue(vb, in, arg, set)
		}
		args := make([]*tensor.Tensor, len(in.Args))
		for i := range args {
			v, err := arg(i)
			if err != nil {
				return 0, nil, err
			}
			if args[i], err = c.host(v); err != nil {
				return 0, nil, err
			}
		}
		var out *tensor.Tensor
		var err error
		if int(in.Imm) == c.m.memPlanAt {
			out, err = c.memPlan(in, args)
		} else {
			out, err = c.m.builtins[in.Imm](args)
		}
		if err != nil {
			if in.Str != "" && int(in.Imm) != c.m.memPlanAt { // the node it computes for
				return 0, nil, fmt.Errorf("%s: builtin %s: %w", in.Str, c.m.exe.Builtins[in.Imm], err)
			}
			return 0, nil, fmt.Errorf("builtin %s: %w", c.m.exe.Builtins[in.Imm], err)
		}
		if b := int64(out.Len()) * int64(out.DType.Size()); b > c.m.limits.TensorBytes {
			return 0, nil, fmt.Errorf("%w: %w", ErrInput, c.m.limits.TensorError("the result of builtin "+c.m.exe.Builtins[in.Imm], b))
		}
		return set(&Host{T: out})
	case CallHost:
		args := make([]*tensor.Tensor, len(in.Args))
		for i := range args {
			v, err := arg(i)
			if err != nil {
				return 0, nil, err
			}
			if args[i], err = c.host(v); err != nil {
				return 0, nil, err
			}
		}
		v, err := c.callHost(in, args)
		if err != nil {
			return 0, nil, err
		}
		return set(v)
	case AllocStorage:
		if k, ok, err := imageOf(in); err != nil || ok {
			if err != nil {
				return 0, nil, fmt.Errorf("%s: %w", what(in), err)
			}
			s, err := c.allocImage(k, what(in))
			if err != nil {
				return 0, nil, err
			}
			return set(s)
		}
		n := in.Imm
		if len(in.Args) == 1 { // a size computed at run time (symbolic shapes)
			v, err := arg(0)
			if err != nil {
				return 0, nil, err
			}
			h, err := c.host(v)
			if err != nil || h.Len() != 1 || !h.DType.IsInt() {
				return 0, nil, fmt.Errorf("alloc_storage: register %d does not hold a byte count", in.Args[0])
			}
			b := h.Int64s()[0]
			if b < 0 {
				return 0, nil, fmt.Errorf("alloc_storage: %d bytes", b)
			}
			total, err := tensor.CheckedAdd(n, b)
			if err != nil {
				return 0, nil, fmt.Errorf("%w: %s: %w", ErrInput, what(in), err)
			}
			n = max(total, PlanAlign)
		}
		s, err := c.alloc(in.Device, n, what(in))
		if err != nil {
			return 0, nil, err
		}
		return set(s)
	case AllocTensor, AllocTensorReg:
		v, err := arg(0)
		if err != nil {
			return 0, nil, err
		}
		s, ok := v.(*Storage)
		if !ok {
			return 0, nil, fmt.Errorf("register %d holds %T, not storage", in.Args[0], v)
		}
		shape := append([]int64{}, in.Shape...)
		if in.Op == AllocTensorReg {
			sv, err := arg(1)
			if err != nil {
				return 0, nil, err
			}
			if shape, err = c.shapeValue(sv); err != nil {
				return 0, nil, err
			}
		}
		n, err := tensor.CheckedBytes(in.DType, shape)
		if err != nil {
			return 0, nil, fmt.Errorf("%w: %s: %w", ErrInput, what(in), err)
		}
		if n > c.m.limits.TensorBytes {
			return 0, nil, fmt.Errorf("%w: %w", ErrInput, c.m.limits.TensorError(what(in), n))
		}
		if s.img != nil && in.Imm != 0 {
			return 0, nil, fmt.Errorf("%s: a tensor at offset %d of a %v: tensors in images start at 0", what(in), in.Imm, *s.img)
		}
		if end, err := tensor.CheckedAdd(in.Imm, n); err != nil || end > s.Size {
			return 0, nil, fmt.Errorf("%s: a %v%v tensor at offset %d does not fit a %d-byte storage", what(in), in.DType, shape, in.Imm, s.Size)
		}
		return set(&Tensor{Storage: s, Offset: in.Imm, DType: in.DType, Shape: shape})
	case LoadConst:
		return set(c.m.consts[in.Imm])
	case LoadConstInt:
		return set(&Host{T: tensor.MustFromSlice(tensor.Shape{}, []int64{in.Imm})})
	case If:
		v, err := arg(0)
		if err != nil {
			return 0, nil, err
		}
		h, err := c.host(v)
		if err != nil {
			return 0, nil, err
		}
		if h.Len() != 1 {
			return 0, nil, fmt.Errorf("condition has %d elements", h.Len())
		}
		if h.Float64s()[0] != 0 {
			return pc + 1, nil, nil
		}
		return pc + int(in.Imm), nil, nil
	case Goto:
		return pc + int(in.Imm), nil, nil
	case ShapeOf:
		v, err := arg(0)
		if err != nil {
			return 0, nil, err
		}
		s, err := shapeOf(v)
		if err != nil {
			return 0, nil, err
		}
		return set(&Host{T: tensor.MustFromSlice(tensor.Shape{len(s)}, append([]int64{}, s...))})
	case ReshapeTensor:
		v, err := arg(0)
		if err != nil {
			return 0, nil, err
		}
		t, ok := v.(*Tensor)
		if !ok {
			return 0, nil, fmt.Errorf("reshape of %T", v)
		}
		sv, err := arg(1)
		if err != nil {
			return 0, nil, err
		}
		shape, err := c.shapeValue(sv)
		if err != nil {
			return 0, nil, err
		}
		if n, err := tensor.CheckedBytes(t.DType, shape); err != nil || n != t.Bytes() {
			return 0, nil, fmt.Errorf("cannot view %v as %v", t.Shape, shape)
		}
		return set(&Tensor{Storage: t.Storage, Offset: t.Offset, DType: t.DType, Shape: shape})
	case DeviceCopy:
		v, err := arg(0)
		if err != nil {
			return 0, nil, err
		}
		if in.Device < 0 || in.Device >= len(c.m.devs) {
			return 0, nil, fmt.Errorf("device %d of %d", in.Device, len(c.m.devs))
		}
		var t *Tensor
		if k, ok, kerr := imageOf(in); kerr != nil {
			return 0, nil, fmt.Errorf("%s: %w", what(in), kerr)
		} else if ok {
			if ct, isT := v.(*Tensor); isT && ct.Storage.constant && ct.Offset == 0 {
				if idx, found := c.m.placed.index[ct.Storage]; found {
					s, err := c.m.placeConstImage(idx, k)
					if err != nil {
						return 0, nil, fmt.Errorf("%s: %w", what(in), err)
					}
					return set(&Tensor{Storage: s, DType: ct.DType, Shape: append([]int64{}, ct.Shape...)})
				}
			}
			t, err = c.imageCopy(v, k)
		} else {
			t, err = c.deviceCopy(v, in.Device)
		}
		if err != nil {
			return 0, nil, err
		}
		return set(t)
	case AllocTuple:
		fields := make([]Value, len(in.Args))
		for i := range fields {
			v, err := arg(i)
			if err != nil {
				return 0, nil, err
			}
			fields[i] = v
		}
		return set(&Tuple{Fields: fields})
	case GetField:
		v, err := arg(0)
		if err != nil {
			return 0, nil, err
		}
		tup, ok := v.(*Tuple)
		if !ok || in.Imm < 0 || in.Imm >= int64(len(tup.Fields)) {
			return 0, nil, fmt.Errorf("field %d of %T", in.Imm, v)
		}
		return set(tup.Fields[in.Imm])
	case KillRegister:
		if s, ok := regs[in.Args[0]].(*Storage); ok {
			c.release(s)
		}
		regs[in.Args[0]] = nil
		return pc + 1, nil, nil
	case Fatal:
		return 0, nil, fmt.Errorf("%w: %s", ErrInput, in.Str)
	}
	panic(fmt.Sprintf("BUG: opcode %v passed Verify", in.Op))
}

// launch runs a kernel on tensors in registers (inputs, then preallocated outputs) with
// the runtime dims held in registers, on the device its binary was loaded on. A GPU
// kernel (KernelInfo.Launch) gets its geometry evaluated at the dims, is skipped when
// its grid is empty, and is recorded as pending until the call synchronizes its device.
func (c *call) launch(regs []Value, in *Instr) error {
	k := c.m.exe.Kernels[in.Imm]
	dev := c.m.kdev[in.Imm]
	var bufs []devices.Buffer
	var ts []*Tensor
	var dims []int64
	if k.Launch == nil {
		// a host kernel runs to completion inside Launch: the call's scratch arrays serve
		// every launch (cleared after it, to hold no tensor), and launches allocate nothing
		bufs, ts, dims = c.launchScratch(len(in.Args), len(in.Dims))
		defer func() { clear(bufs); clear(ts) }()
	} else {
		// a GPU launch stays pending with its dims until the device synchronizes
		bufs, ts, dims = make([]devices.Buffer, len(in.Args)), make([]*Tensor, len(in.Args)), make([]int64, len(in.Dims))
	}
	for i, r := range in.Args {
		t, ok := regs[r].(*Tensor)
		if !ok {
			return fmt.Errorf("kernel %s argument %d: register %d holds %T, not a device tensor", k.Name, i, r, regs[r])
		}
		if i >= in.In && t.Storage.constant {
			return fmt.Errorf("kernel %s output %d: register %d holds a constant, which kernels must not write", k.Name, i-in.In, r)
		}
		t, err := c.onDevice(t, dev)
		if err != nil {
			return fmt.Errorf("kernel %s argument %d: %w", k.Name, i, err)
		}
		b, err := c.view(t)
		if err != nil {
			return err
		}
		bufs[i], ts[i] = b, t
	}
	for i, r := range in.Dims {
		h, err := c.host(regs[r])
		if err != nil || h.Len() != 1 {
			return fmt.Errorf("kernel %s dim %s: register %d is not a scalar", k.Name, k.Dims[i], r)
		}
		if d, ok := h.Data.([]int64); ok { // the common case, without Int64s's copy
			dims[i] = d[0]
		} else {
			dims[i] = h.Int64s()[0]
		}
		if dims[i] < 0 {
			return fmt.Errorf("%w: %s: kernel %s dim %s is %d", ErrInput, what(in), k.Name, k.Dims[i], dims[i])
		}
	}
	// every tensor must hold what the kernel may touch through it
	for i, t := range ts {
		need := c.m.argBytes[in.Imm][i]
		if need < 0 {
			var err error
			if need, err = k.Args[i].bytes(dims); err != nil {
				return fmt.Errorf("%w: %s: kernel %s argument %d: %w", ErrInput, what(in), k.Name, i, err)
			}
		}
		if have := t.capacity(); need > have {
			return fmt.Errorf("%s: kernel %s argument %d may touch %d bytes, its tensor (%v%v) holds %d", what(in), k.Name, i, need, t.DType, t.Shape, have)
		}
	}
	var g devices.Geometry
	if k.Launch != nil {
		var skip bool
		var err error
		if g, skip, err = geometry(in, k, dims); err != nil || skip {
			return err
		}
	}
	var start time.Time
	var clock0 time.Duration
	clocked := c.prof != nil && c.prof.Clock != nil && k.Launch == nil
	if clocked {
		clock0 = c.prof.Clock()
	} else if c.prof != nil {
		start = time.Now()
	}
	if k.Launch != nil {
		c.holdGPU(dev)
	}
	var measured time.Duration
	timer, timed := c.m.devs[dev].(devices.Timer)
	timed = timed && c.prof != nil && k.Launch != nil && timer.Timing()
	var err error
	if timed { // the device's own measure of the kernel's run
		measured, err = timer.Time(c.m.kernels[in.Imm], g, bufs, dims)
	} else {
		err = c.m.devs[dev].Launch(c.m.kernels[in.Imm], g, bufs, dims)
	}
	err = kernelError(in, k, dims, err)
	if err == nil && k.Launch != nil {
		c.pending = append(c.pending, pending{dev: dev, in: in, k: k, dims: dims})
		if c.prof != nil { // a GPU kernel's time includes its run only once it is waited for
			err = c.sync(dev)
		}
	}
	if c.prof != nil {
		kt := &c.prof.Kernels[in.Imm]
		kt.Launches++
		switch {
		case timed:
			kt.Total += measured
		case clocked:
			kt.Total += c.prof.Clock() - clock0
		default:
			kt.Total += time.Since(start)
		}
	}
	return err
}

// launchScratch returns the call's argument arrays for a host kernel's launch, grown to
// n buffers and nd dims.
func (c *call) launchScratch(n, nd int) ([]devices.Buffer, []*Tensor, []int64) {
	if cap(c.bufs) < n {
		c.bufs, c.ts = make([]devices.Buffer, n), make([]*Tensor, n)
	}
	if cap(c.dims) < nd {
		c.dims = make([]int64, nd)
	}
	return c.bufs[:n], c.ts[:n], c.dims[:nd]
}

// kernelError turns a kernel's report of bad data (an index out of range) into an
// ErrInput error naming the node (the instruction's Str), and a bounds-checked kernel's
// report of an access outside a buffer into an ErrOutOfBounds error naming the kernel,
// the node, the buffer and the offset; other errors pass through.
func kernelError(in *Instr, k KernelInfo, dims []int64, err error) error {
	if err == nil {
		return nil // before ke, which escapes to the heap
	}
	var ke *devices.KernelError
	if !errors.As(err, &ke) {
		return err
	}
	switch ke.Code {
	case devices.KernelIndexOutOfRange:
		n := ke.Detail[1]
		return fmt.Errorf("%w: %s: index %d is out of range [%d, %d)", ErrInput, what(in), ke.Detail[0], -n, n)
	case devices.KernelOutOfBounds:
		return fmt.Errorf("%w: %s: kernel %s accessed element %d of %s: %w", ErrOutOfBounds, what(in), k.Name, ke.Detail[1], bufferName(in, k, dims, ke.Detail[0]), err)
	}
	return err
}

// bufferName describes the buffer a bounds-checked kernel reported: an input or an
// output with its extent, or one of the kernel's own allocations.
func bufferName(in *Instr, k KernelInfo, dims []int64, id int64) string {
	switch {
	case id < 0:
		return fmt.Sprintf("buffer %d", id)
	case id >= int64(len(in.Args)) || id >= int64(len(k.Args)):
		return fmt.Sprintf("its local buffer %d", id-int64(len(k.Args)))
	}
	kind, pos := "input", id
	if id >= int64(in.In) {
		kind, pos = "output", id-int64(in.In)
	}
	n, err := k.Args[id].Elements.Eval(dims)
	if err != nil {
		return fmt.Sprintf("%s %d (argument %d)", kind, pos, id)
	}
	return fmt.Sprintf("%s %d (argument %d, %d elements)", kind, pos, id, n)
}

// shapeValue reads a shape from a 1-D integer host value.
func (c *call) shapeValue(v Value) ([]int64, error) {
	h, err := c.host(v)
	if err != nil {
		return nil, err
	}
	if len(h.Shape) != 1 || !h.DType.IsInt() {
		return nil, fmt.Errorf("a shape must be a 1-D integer tensor, got %v%v", h.DType, h.Shape)
	}
	return h.Int64s(), nil
}

// what describes an instruction's tensor or storage for errors: the value and node the
// compiler recorded in Str, else the instruction.
func what(in *Instr) string {
	if in.Str != "" {
		return in.Str
	}
	return in.Op.String()
}
