package compiler

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// lower builds the entry function: parameters in registers 0..P-1, the arena, the
// nodes, the results.
func (c *compile) lower(m *graph.Module) error {
	e := newEmitter(c)
	c.em = e
	c.kt = newKernelTable()
	f := m.Main
	for _, p := range f.Params {
		if p.Type.Kind != graph.KindTensor && kindOf(p.Type) == 0 {
			return fmt.Errorf("input %q has type %v; the compiled engine takes tensors, sequences of tensors and optionals of either", p.Name, p.Type)
		}
		e.reg[p] = e.newReg()
	}
	for _, p := range e.c.places {
		r := e.newReg()
		e.arenas = append(e.arenas, r)
		e.arenaPC = append(e.arenaPC, e.emit(vm.Instr{Op: vm.AllocStorage, Dst: r, Device: p.dev, Str: "the static memory plan"})) // size set by the plan
		e.dev[r] = p.dev
	}
	e.bindSymbols(f.Params)
	if err := e.bindDerived(m); err != nil {
		return err
	}
	e.reserveMemPlan()
	e.inPlace, e.inPlaceAs = concatPlan(f, slices.Max(c.aligns())), map[*graph.Value]*graph.Value{}
	n := 0
	f.Funcs(func(g *graph.Func) {
		for _, nd := range g.Nodes {
			if nd.Op != graph.OpFused { // count its members instead
				n++
			}
		}
	})
	c.res.Stats.Nodes = n
	if err := e.function(f); err != nil {
		return err
	}
	c.at = "results"
	var outs []vm.Reg
	for _, r := range f.Results {
		reg, err := e.read(r)
		if err != nil {
			return err
		}
		outs = append(outs, reg)
	}
	ret := outs[0]
	if len(outs) != 1 {
		ret = e.newReg()
		for _, o := range outs {
			e.use(o)
		}
		e.emit(vm.Instr{Op: vm.AllocTuple, Dst: ret, Args: outs})
	}
	e.use(ret)
	e.emit(vm.Instr{Op: vm.Ret, Args: []vm.Reg{ret}})
	c.res.Stats.Launches = e.launches
	c.res.Stats.Copies = e.copiesMade
	c.res.Stats.Kernels = len(c.kt.units)
	e.killDynamic(outs)
	c.report(Progress{Stage: "lower", Done: len(f.Nodes), Total: len(f.Nodes)})
	return nil
}

// isView reports nodes that only reinterpret a tensor's shape (graph.View in the op
// table): they share their input's storage.
func isView(n *graph.Node) bool {
	info := n.Op.Info()
	return info != nil && info.Flags&graph.View != 0 && len(n.Outputs) == 1 &&
		n.Outputs[0].Type.Kind == graph.KindTensor && n.Inputs[0].Type.Kind == graph.KindTensor
}

// lowerView reshapes without copying.
func (e *emitter) lowerView(n *graph.Node) error {
	out := n.Outputs[0]
	src, err := e.readTensor(n.Inputs[0])
	if err != nil {
		return err
	}
	if symbolicType(out.Type) {
		if n.Inputs[0].Type.Equal(out.Type) {
			e.reg[out] = e.move(src)
			return nil
		}
		shapeReg, err := e.shapeEval(tensor.Int64, []int64{int64(len(out.Type.Shape))}, out.Type.Shape)
		if err != nil {
			return fmt.Errorf("%v: %w", n, err)
		}
		dst := e.newReg()
		e.use(src)
		e.use(shapeReg)
		e.emit(vm.Instr{Op: vm.ReshapeTensor, Dst: dst, Args: []vm.Reg{src, shapeReg}})
		e.alias(dst, src)
		e.reg[out] = dst
		return nil
	}
	shape, err := staticShape(n, out)
	if err != nil {
		return err
	}
	if in, ok := n.Inputs[0].Type.ConstShape(); ok && in.Equal(tensorShape(shape)) {
		e.reg[out] = e.move(src)
		return nil
	}
	shapeReg := e.loadConst(tensor.MustFromSlice(tensor.Shape{len(shape)}, shape))
	dst := e.newReg()
	e.use(src)
	e.emit(vm.Instr{Op: vm.ReshapeTensor, Dst: dst, Args: []vm.Reg{src, shapeReg}})
	e.alias(dst, src)
	e.reg[out] = dst
	return nil
}

func tensorShape(s []int64) tensor.Shape {
	out := make(tensor.Shape, len(s))
	for i, d := range s {
		out[i] = int(d)
	}
	return out
}

// lowerKernel launches the node's kernel on its inputs and freshly allocated outputs;
// with a chain, the chain's elementwise nodes run inside it and the kernel's output is
// the last one's. ok is false when no strategy fuses the chain (nothing was emitted).
func (e *emitter) lowerKernel(n *graph.Node, chain []*graph.Node) (ok bool, err error) {
	k, err := e.c.kernelFor(n, chain)
	if err != nil || k == nil {
		return false, err
	}
	nodes := append([]*graph.Node{n}, chain...)
	for _, nd := range nodes {
		if err := e.checkSliceEnds(nd); err != nil {
			return false, err
		}
	}
	var args []vm.Reg
	for _, p := range k.params {
		src := nodes[p.Node]
		v := e.c.resolve(src.Inputs[p.Input])
		var r vm.Reg
		if p.Prepack != nil {
			packed, err := e.c.kt.prepack(v, p)
			if err != nil {
				return false, fmt.Errorf("%v: repacking input %d (%s): %w", src, p.Input, p.Layout, err)
			}
			r = e.loadConst(packed)
		} else if r, err = e.readOn(v, k.dev); err != nil {
			return false, err
		}
		args = append(args, e.asImage(v, r, k.images[len(args)], k.dev))
	}
	last := nodes[len(nodes)-1]
	for i, o := range last.Outputs {
		var r vm.Reg
		var placed bool // written into a Concat's output (concat.go)
		if k.outShape[i] == nil {
			if r, err = e.allocDynamic(k.outDT[i], o.Type.Shape, describe(last, o), k.dev); err != nil {
				return false, fmt.Errorf("%v: output %q: %w", last, o.Name, err)
			}
		} else if im := k.images[len(args)]; im.isImage() {
			if r, err = e.allocImage(k.outDT[i], k.outShape[i], im, describe(last, o), k.dev); err != nil {
				return false, err
			}
		} else if r, placed, err = e.concatInput(o, k.outDT[i], k.outShape[i], describe(last, o), k.dev); err != nil {
			return false, err
		} else if !placed {
			if r, err = e.allocTensor(k.outDT[i], k.outShape[i], describe(last, o), k.dev); err != nil {
				return false, err
			}
		}
		e.reg[o] = r
		args = append(args, r)
		if e.depth == 0 && k.outShape[i] != nil {
			e.c.placeTensor(o, k.outDT[i], k.outShape[i], k.images[len(args)-1])
		}
	}
	var dims []vm.Reg
	for _, name := range k.dims {
		r, ok := e.sym[name]
		if !ok {
			return false, fmt.Errorf("%v: its kernel needs %w: %q (no input's shape names it)", n, errDataDependent, name)
		}
		dims = append(dims, r)
	}
	for _, r := range append(args, dims...) {
		e.use(r)
	}
	e.emit(vm.Instr{Op: vm.InvokeKernel, Args: args, Dims: dims, In: len(k.params), Imm: int64(k.index), Str: launchWhat(nodes)})
	e.launches++
	e.c.res.Stats.Fused += len(chain)
	g := Group{Kernel: e.c.kt.units[k.index].name, Strategy: k.strategy, Anchor: n.String(), Device: e.c.deviceName(k.dev), Why: k.why,
		Workload: k.workload, Tuned: k.tuned, Space: k.space}
	for _, c := range chain {
		g.Fused = append(g.Fused, c.String())
	}
	e.c.res.Stats.Groups = append(e.c.res.Stats.Groups, g)
	return true, nil
}

// launchWhat names a kernel's nodes for the VM's errors: the anchor, or the members
// that read indices from data (the ones whose kernel can fail on a request's values).
func launchWhat(nodes []*graph.Node) string {
	var readers []string
	for _, nd := range nodes {
		if nd.Op == graph.OpGather || nd.Op == graph.OpGatherElements {
			readers = append(readers, nd.String())
		}
	}
	switch {
	case len(readers) == 0:
		return nodes[0].String()
	case len(nodes) == 1:
		return readers[0]
	}
	return strings.Join(readers, " or ") + " (in the kernel of " + nodes[0].String() + ")"
}

// lowerIf inlines both branches: If jumps to the else code when the condition is
// false; each branch moves its results into the node's output registers.
func (e *emitter) lowerIf(n *graph.Node) error {
	a := n.Attrs.(*graph.IfAttrs)
	if c := n.Inputs[0].Const; c != nil && c.Len() == 1 {
		return e.lowerTaken(n, a, c.Int64s()[0] != 0)
	}
	cond, err := e.read(n.Inputs[0])
	if err != nil {
		return err
	}
	outs := make([]vm.Reg, len(n.Outputs))
	for i := range outs {
		outs[i] = e.newReg()
	}
	e.use(cond)
	pcIf := e.emit(vm.Instr{Op: vm.If, Args: []vm.Reg{cond}})
	e.depth++
	branch := func(f *graph.Func) error {
		if err := e.function(f); err != nil {
			return err
		}
		for i := range outs {
			r, err := e.readDevice(f.Results[i])
			if err != nil {
				return err
			}
			e.moveTo(outs[i], r)
		}
		return nil
	}
	if err := branch(a.ThenBranch); err != nil {
		return err
	}
	pcGoto := e.emit(vm.Instr{Op: vm.Goto})
	e.code[pcIf].Imm = int64(e.pc() - pcIf)
	if err := branch(a.ElseBranch); err != nil {
		return err
	}
	e.code[pcGoto].Imm = int64(e.pc() - pcGoto)
	e.depth--
	for i, o := range n.Outputs {
		e.reg[o] = outs[i]
	}
	return e.bindResults(n)
}

// bindResults binds the symbols of an If's or a Loop's outputs that no earlier code
// bound from the shapes of the values the node left: an If whose branches' results
// differ in shape (torchvision's detection models: an empty list in one branch, a
// suppression's survivors in the other), a Loop whose carried value grows.
func (e *emitter) bindResults(n *graph.Node) error {
	for _, o := range n.Outputs {
		t := o.Type
		if t.Kind != graph.KindTensor || t.UnknownRank || e.allBound(t.Shape) {
			continue
		}
		if err := e.bindResultShape(n, o, e.reg[o]); err != nil {
			return err
		}
	}
	return nil
}

// lowerTaken lowers the branch of an If whose condition is a constant: the other
// branch is not lowered at all (it may be a stub that does not run on these shapes).
func (e *emitter) lowerTaken(n *graph.Node, a *graph.IfAttrs, cond bool) error {
	f := a.ElseBranch
	if cond {
		f = a.ThenBranch
	}
	if err := e.function(f); err != nil {
		return err
	}
	for i, o := range n.Outputs {
		r, err := e.read(f.Results[i])
		if err != nil {
			return err
		}
		e.reg[o] = r
	}
	return nil
}

// lowerFail emits a kiln.Fail: the VM stops the run with its message (vm.ErrInput: the
// inputs reached a branch that cannot run on the shapes the executable was built
// for). Its output register holds an empty constant that no instruction reads at run
// time, so that the branch's results stay defined for the code after it.
func (e *emitter) lowerFail(n *graph.Node) error {
	t := n.Outputs[0].Type
	if t.Kind != graph.KindTensor || !t.DType.Valid() {
		return fmt.Errorf("%v: a failing branch's result has type %v; only tensors are supported", n, t)
	}
	e.emit(vm.Instr{Op: vm.Fatal, Str: n.Attrs.(*graph.FailAttrs).Message})
	e.reg[n.Outputs[0]] = e.loadConst(tensor.New(t.DType, tensor.Shape{0}))
	return nil
}

// lowerLoop inlines an ONNX Loop: counter and condition in registers, the body's
// parameters bound to the loop-carried registers, results moved back through
// temporaries (a result may be another carried value's register) before the jump back.
// Scan outputs are stacked on the host, one row per iteration (scan.append), and
// completed after the loop (scan.finish: empty with the element shape when the loop
// ran no iteration).
func (e *emitter) lowerLoop(n *graph.Node) error {
	body := n.Attrs.(*graph.LoopAttrs).Body
	carried := len(n.Inputs) - 2
	scans := len(n.Outputs) - carried
	if scans < 0 || len(body.Results) != 1+carried+scans {
		return fmt.Errorf("%v: body returns %d values for %d carried values and %d scan outputs", n, len(body.Results), carried, scans)
	}
	var maxTrip, cond vm.Reg
	var err error
	if n.Inputs[0] != nil {
		maxTrip, err = e.read(n.Inputs[0])
	} else {
		maxTrip = e.loadConst(tensor.Scalar(int64(math.MaxInt64)))
	}
	if err != nil {
		return err
	}
	if n.Inputs[1] != nil {
		r, err := e.read(n.Inputs[1])
		if err != nil {
			return err
		}
		cond = e.move(r)
	} else {
		cond = e.loadConst(tensor.Scalar(true))
	}
	iter := e.newReg()
	e.emit(vm.Instr{Op: vm.LoadConstInt, Dst: iter, Imm: 0})
	e.host[iter] = true
	accs := make([]vm.Reg, scans)
	for k := range accs {
		accs[k] = e.newReg()
		e.emit(vm.Instr{Op: vm.LoadConstInt, Dst: accs[k], Imm: -1}) // a scalar: no rows yet
		e.host[accs[k]] = true
	}
	vals := make([]vm.Reg, carried)
	for k := range vals {
		r, err := e.readDevice(n.Inputs[2+k])
		if err != nil {
			return err
		}
		vals[k] = e.move(r)
	}
	e.reg[body.Params[0]], e.reg[body.Params[1]] = iter, cond
	for k := range vals {
		e.reg[body.Params[2+k]] = vals[k]
	}
	varying, err := e.bindCarried(n, body.Params[2:], vals)
	if err != nil {
		return err
	}
	top := e.pc()
	test := e.newReg()
	for _, r := range []vm.Reg{iter, maxTrip, cond} {
		e.use(r)
	}
	e.emit(vm.Instr{Op: vm.CallBuiltin, Dst: test, Args: []vm.Reg{iter, maxTrip, cond}, Imm: e.builtin(vm.BuiltinLoopContinue)})
	e.host[test] = true
	e.use(test)
	pcIf := e.emit(vm.Instr{Op: vm.If, Args: []vm.Reg{test}})
	region := &loopRegion{start: top, extend: map[*root]bool{}}
	e.loops = append(e.loops, region)
	e.depth++
	e.rebindCarried(n, varying, vals)
	if err := e.function(body); err != nil {
		return err
	}
	c, err := e.read(body.Results[0])
	if err != nil {
		return err
	}
	tc := e.move(c)
	temps := make([]vm.Reg, carried)
	for k := range temps {
		r, err := e.readDevice(body.Results[1+k])
		if err != nil {
			return err
		}
		temps[k] = e.move(r)
	}
	if err := e.appendScans(accs, body.Results[1+carried:]); err != nil {
		return err
	}
	e.moveTo(cond, tc)
	e.closeLoop(iter, top, pcIf, region, vals, temps, accs, n.Outputs)
	return e.bindResults(n)
}

// carriedDim is an extent of a loop-carried value that changes from iteration to
// iteration: the symbol's register and where its value is read (carried value k, axis).
type carriedDim struct {
	reg     vm.Reg
	k, axis int
}

// bindCarried binds, before a Loop, the symbols of its carried parameters that nothing
// bound yet (a value that grows each iteration, as Keypoint R-CNN's per-detection
// results concatenated in a loop, is declared with fresh extents) from the initial
// values' shapes, and returns them for rebindCarried. A compound extent over unbound
// symbols is left (the code that needs it refuses it).
func (e *emitter) bindCarried(n *graph.Node, params []*graph.Value, vals []vm.Reg) ([]carriedDim, error) {
	var out []carriedDim
	for k, p := range params {
		t := p.Type
		if k >= len(vals) || t.Kind != graph.KindTensor || t.UnknownRank || e.allBound(t.Shape) {
			continue
		}
		var fresh []int
		for axis, d := range t.Shape {
			if name, ok := d.IsSym(); ok {
				if _, bound := e.sym[name]; !bound {
					fresh = append(fresh, axis)
				}
			}
		}
		if err := e.bindResultShape(n, p, vals[k]); err != nil {
			return nil, err
		}
		for _, axis := range fresh {
			name, _ := t.Shape[axis].IsSym()
			out = append(out, carriedDim{reg: e.sym[name], k: k, axis: axis})
		}
	}
	return out, nil
}

// rebindCarried sets, at the top of each iteration, the symbols bindCarried bound from
// the carried values as they are now.
func (e *emitter) rebindCarried(n *graph.Node, dims []carriedDim, vals []vm.Reg) {
	shapes := map[int]vm.Reg{}
	for _, d := range dims {
		shape, ok := shapes[d.k]
		if !ok {
			e.use(vals[d.k])
			shape = e.newReg()
			e.emit(vm.Instr{Op: vm.ShapeOf, Dst: shape, Args: []vm.Reg{vals[d.k]}})
			e.host[shape] = true
			shapes[d.k] = shape
		}
		axis := e.constInt(int64(d.axis))
		e.emit(vm.Instr{Op: vm.CallBuiltin, Dst: d.reg, Args: []vm.Reg{shape, axis}, Imm: e.builtin(vm.BuiltinShapeDim), Str: n.String()})
	}
}

// appendScans appends each iteration's scan values (results, in order) to their
// accumulators (scan.append).
func (e *emitter) appendScans(accs []vm.Reg, results []*graph.Value) error {
	for k, acc := range accs {
		v, err := e.read(results[k])
		if err != nil {
			return err
		}
		e.use(acc)
		e.use(v)
		e.emit(vm.Instr{Op: vm.CallBuiltin, Dst: acc, Args: []vm.Reg{acc, v}, Imm: e.builtin(vm.BuiltinScanAppend)})
	}
	return nil
}

// closeLoop ends a Loop's or Scan's body: the carried values take the iteration's
// results (temps), the iteration counter advances, the body jumps back to top and the
// loop's If at pcIf jumps past it; values live across the loop stay live to its end.
// Then the node's outputs are the carried registers followed by the finished scans.
func (e *emitter) closeLoop(iter vm.Reg, top, pcIf int, region *loopRegion, vals, temps, accs []vm.Reg, outs []*graph.Value) {
	for k := range temps {
		e.moveTo(vals[k], temps[k])
	}
	e.use(iter)
	e.emit(vm.Instr{Op: vm.CallBuiltin, Dst: iter, Args: []vm.Reg{iter}, Imm: e.builtin(vm.BuiltinLoopNext)})
	pcGoto := e.emit(vm.Instr{Op: vm.Goto, Imm: int64(top - e.pc())})
	e.code[pcIf].Imm = int64(e.pc() - pcIf)
	e.depth--
	e.loops = e.loops[:len(e.loops)-1]
	for rt := range region.extend {
		rt.lastUse = max(rt.lastUse, pcGoto)
	}
	for k := range vals {
		e.reg[outs[k]] = vals[k]
	}
	for k, acc := range accs {
		e.finishScan(acc, outs[len(vals)+k])
	}
}
