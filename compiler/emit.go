package compiler

import (
	"fmt"
	"strconv"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// emitter builds the entry function's code: one register per value, constants loaded
// at each use, control flow inlined. It records the tensors the static plan places.
type emitter struct {
	c     *compile
	code  []vm.Instr
	nregs int
	reg   map[*graph.Value]vm.Reg
	host  map[vm.Reg]bool   // the register holds a host value (builtin results, counters)
	sym   map[string]vm.Reg // each symbolic dim's value (host int64 scalar), see symbolic.go
	// defs are the derived symbols the function's types use (bindDerived), in order
	defs []graph.SymbolDef
	// dev is the device of each device tensor's register (absent: 0, the CPU); a
	// constant's register (anyDev) is read on any device (the VM places a copy at load)
	dev    map[vm.Reg]int
	anyDev map[vm.Reg]bool
	// copies are the straight-line part's device copies, by source register and device
	copies map[copyKey]vm.Reg
	// img is the image (width, height in texels) of each register whose tensor is in
	// an image2d texture (absent: a buffer); imgCopies the straight-line part's copies
	// between a buffer and an image, by source register and image (textures.go)
	img       map[vm.Reg]image
	imgCopies map[imageCopyKey]vm.Reg

	consts     []*tensor.Tensor
	constIdx   map[*tensor.Tensor]int
	builtins   []string
	builtinIdx map[string]int
	hostCalls  []vm.HostCall // the CallHost instructions' table (hostop.go)

	// static plan bookkeeping: one arena per device, allocated by the instruction at
	// arenaPC (its size set by the plan)
	arenas  []vm.Reg
	arenaPC []int
	roots   []*root
	dyn     []*root            // storages sized at run time on the straight-line part (symbolic.go)
	rootOf  map[vm.Reg][]*root // the allocations a register may hold (views included)
	loops   []*loopRegion
	depth   int // control-flow nesting: 0 is the straight-line part, planned statically
	// memPlan is the prologue's check of the run-time sized storages (nil: none)
	memPlan *memPlanSite

	launches   int
	copiesMade int // DeviceCopy instructions between devices

	// inPlace are the Concat inputs written into their Concat's output (concat.go),
	// by value, and inPlaceAs the fused bodies' results standing for such a value;
	// subAllocs the AllocTensors of those inputs, patched by the plan.
	inPlace   map[*graph.Value]*inPlaceConcat
	inPlaceAs map[*graph.Value]*graph.Value
	subAllocs []subAlloc
}

// root is one planned allocation: the AllocTensor at pc alloc, its size and last use.
type root struct {
	alloc   int
	dev     int // the device whose arena (or storage) holds it
	size    int64
	lastUse int
	storage vm.Reg    // a run-time sized storage (dyn), freed after lastUse
	bytes   graph.Dim // a run-time sized storage's bytes over the symbols (dyn)
	what    string    // the value and node, for errors
}

// loopRegion collects the planned tensors read inside a loop that were allocated
// before it: they must live until the loop's back edge.
type copyKey struct {
	src vm.Reg
	dev int
}

type loopRegion struct {
	start  int
	extend map[*root]bool
}

func newEmitter(c *compile) *emitter {
	e := &emitter{c: c, reg: map[*graph.Value]vm.Reg{}, host: map[vm.Reg]bool{}, sym: map[string]vm.Reg{},
		constIdx: map[*tensor.Tensor]int{}, builtinIdx: map[string]int{}, rootOf: map[vm.Reg][]*root{},
		dev: map[vm.Reg]int{}, anyDev: map[vm.Reg]bool{}, copies: map[copyKey]vm.Reg{},
		img: map[vm.Reg]image{}, imgCopies: map[imageCopyKey]vm.Reg{}}
	return e
}

func (e *emitter) pc() int { return len(e.code) }

func (e *emitter) emit(in vm.Instr) int {
	e.code = append(e.code, in)
	return len(e.code) - 1
}

func (e *emitter) newReg() vm.Reg {
	e.nregs++
	return vm.Reg(e.nregs - 1)
}

// use records that the instruction about to be emitted (at pc) reads r.
func (e *emitter) use(r vm.Reg) {
	pc := e.pc()
	for _, rt := range e.rootOf[r] {
		rt.lastUse = max(rt.lastUse, pc)
		for _, l := range e.loops {
			if rt.alloc < l.start {
				l.extend[rt] = true
				break
			}
		}
	}
}

// alias makes dst hold what src holds (views, moves).
func (e *emitter) alias(dst, src vm.Reg) {
	e.rootOf[dst] = append(e.rootOf[dst], e.rootOf[src]...)
	e.host[dst] = e.host[src]
	e.dev[dst] = e.dev[src]
	e.anyDev[dst] = e.anyDev[src]
}

func (e *emitter) constant(t *tensor.Tensor) int {
	if i, ok := e.constIdx[t]; ok {
		return i
	}
	e.consts = append(e.consts, t)
	e.constIdx[t] = len(e.consts) - 1
	return len(e.consts) - 1
}

func (e *emitter) builtin(name string) int64 {
	if i, ok := e.builtinIdx[name]; ok {
		return int64(i)
	}
	e.builtins = append(e.builtins, name)
	e.builtinIdx[name] = len(e.builtins) - 1
	return int64(len(e.builtins) - 1)
}

// loadConst loads a constant into a fresh register (at every use: a register set on one
// path of inlined control flow must not be read on another).
func (e *emitter) loadConst(t *tensor.Tensor) vm.Reg {
	r := e.newReg()
	e.emit(vm.Instr{Op: vm.LoadConst, Dst: r, Imm: int64(e.constant(t))})
	e.anyDev[r] = true
	return r
}

// read returns the register holding v.
func (e *emitter) read(v *graph.Value) (vm.Reg, error) {
	v = e.c.resolve(v)
	if v.Const != nil {
		return e.loadConst(v.Const), nil
	}
	r, ok := e.reg[v]
	if !ok {
		return 0, fmt.Errorf("BUG: value %q is read before it is computed", v.Name)
	}
	return r, nil
}

// readDevice returns a register holding v as a tensor on the CPU (device 0): what
// control flow carries and moves between its branches and iterations.
func (e *emitter) readDevice(v *graph.Value) (vm.Reg, error) { return e.readOn(v, 0) }

// readTensor returns a register holding v as a device tensor where it is (a host
// value is copied to the CPU).
func (e *emitter) readTensor(v *graph.Value) (vm.Reg, error) {
	r, err := e.read(v)
	if err != nil || !e.host[r] {
		return r, err
	}
	return e.readOn(v, 0)
}

// readOn returns a register holding v as a tensor on device dev: v's own register
// when it is there (or is a constant, which the VM places on every device that reads
// it), else a DeviceCopy. A copy on the straight-line part is made once and reused by
// later reads (its source register is never written again there).
func (e *emitter) readOn(v *graph.Value, dev int) (vm.Reg, error) {
	r, err := e.read(v)
	if err != nil || e.anyDev[r] || (!e.host[r] && e.dev[r] == dev) || e.c.resolve(v).Type.Kind != graph.KindTensor {
		return r, err // a sequence or optional stays a host value
	}
	key := copyKey{r, dev}
	if d, ok := e.copies[key]; ok {
		return d, nil
	}
	d := e.newReg()
	e.use(r)
	e.emit(vm.Instr{Op: vm.DeviceCopy, Dst: d, Args: []vm.Reg{r}, Device: dev, Str: "tensor " + strconv.Quote(v.Name)})
	e.dev[d] = dev
	e.copiesMade++
	if e.depth == 0 {
		e.copies[key] = d
	}
	return d, nil
}

// move copies src into a fresh register (a constant's copy counts as on the CPU).
func (e *emitter) move(src vm.Reg) vm.Reg {
	d := e.newReg()
	e.moveTo(d, src)
	return d
}

func (e *emitter) moveTo(dst, src vm.Reg) {
	e.use(src)
	e.emit(vm.Instr{Op: vm.Move, Dst: dst, Args: []vm.Reg{src}})
	e.alias(dst, src)
	if im, ok := e.img[src]; ok {
		e.img[dst] = im
	}
	// control flow writes dst again (a loop's carried value, a branch's result): it
	// holds a tensor on the CPU, not a constant every device may read
	e.anyDev[dst] = false
}

// allocTensor allocates a tensor of a static shape: planned in the arena on the
// straight-line part, its own storage inside control flow. what names it (the value and
// its node) in errors and in the instructions. A byte count that overflows, or one
// above the tensor limit, is an error.
func (e *emitter) allocTensor(dt tensor.DType, shape []int64, what string, dev int) (vm.Reg, error) {
	bytes, err := tensor.CheckedBytes(dt, shape)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	if bytes > e.c.limits.TensorBytes {
		return 0, e.c.limits.TensorError(what, bytes)
	}
	r := e.newReg()
	e.dev[r] = dev
	if e.depth == 0 {
		rt := &root{alloc: e.pc(), dev: dev, size: bytes, what: what}
		rt.lastUse = rt.alloc
		e.roots = append(e.roots, rt)
		e.rootOf[r] = []*root{rt}
		e.emit(vm.Instr{Op: vm.AllocTensor, Dst: r, Args: []vm.Reg{e.arenas[dev]}, DType: dt, Shape: shape, Str: what})
		return r, nil
	}
	s := e.newReg()
	e.emit(vm.Instr{Op: vm.AllocStorage, Dst: s, Imm: max(bytes, vm.PlanAlign), Device: dev, Str: what})
	e.emit(vm.Instr{Op: vm.AllocTensor, Dst: r, Args: []vm.Reg{s}, DType: dt, Shape: shape, Str: what})
	return r, nil
}

// describe names a node's output for errors and instructions.
func describe(n *graph.Node, v *graph.Value) string {
	return fmt.Sprintf("tensor %q of %v", v.Name, n)
}

// function lowers the nodes of f (the entry, or an inlined subgraph).
func (e *emitter) function(f *graph.Func) error {
	for i, n := range f.Nodes {
		if err := e.c.stopped(); err != nil {
			return err
		}
		if f.Parent == nil {
			e.c.report(Progress{Stage: "lower", Done: i, Total: len(f.Nodes), Detail: n.String()})
		}
		e.c.at = n.String()
		if err := e.node(n); err != nil {
			return err
		}
	}
	return nil
}

func (e *emitter) node(n *graph.Node) error {
	if err := e.bindRuntimeShapes(n); err != nil {
		return err
	}
	if err := e.checkBroadcasts(n); err != nil {
		return err
	}
	if k := e.keptReduction(n); k != nil {
		return e.lowerKeptReduction(n, k)
	}
	switch {
	case n.Op == graph.OpIf:
		return e.lowerIf(n)
	case n.Op == graph.OpFail:
		return e.lowerFail(n)
	case n.Op == graph.OpLoop:
		return e.lowerLoop(n)
	case n.Op == graph.OpScan:
		return e.lowerScan(n)
	case isSeqOpt(n):
		return e.lowerSeqOpt(n)
	case n.Op == graph.OpFused:
		return e.lowerFused(n)
	case n.Op == graph.OpShapeExpr:
		return e.lowerShapeExpr(n)
	case isView(n):
		return e.lowerView(n)
	case n.Op == graph.OpConcat && e.lowerConcatInPlace(n):
		return nil
	}
	if name := e.c.hostOpFor(n); name != "" {
		return e.lowerHostOp(n, name)
	}
	_, err := e.lowerKernel(n, nil)
	return err
}

// staticShape returns a value's extents, or an error naming the node and value.
func staticShape(n *graph.Node, v *graph.Value) ([]int64, error) {
	s, ok := v.Type.ConstShape()
	if !ok || v.Type.Kind != graph.KindTensor {
		return nil, fmt.Errorf("%v: %q has type %v; the compiled engine needs static shapes here (bind its symbolic dims from the input shapes)", n, v.Name, v.Type)
	}
	out := make([]int64, len(s))
	for i, d := range s {
		out[i] = int64(d)
	}
	return out, nil
}
