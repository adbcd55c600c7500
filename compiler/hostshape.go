package compiler

import (
	"fmt"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// Value-dependent shapes: a node whose shape, sizes, axes, repeats, pads, starts/ends
// or depth operand is not a constant has outputs with fresh symbols (graph inference
// cannot know them). Before the node runs, its host shape function (a vm builtin,
// vm/builtins_hostshape.go) reads the operand on the host with the input's shape and
// yields the output's extents; each fresh symbol is then bound to its extent
// (shape.dim), and an extent the graph knew is checked against it (shape.expect). From
// there the symbols are like those the inputs' shapes bind: kernels take them as
// run-time dims and later nodes compute with them.

// bindRuntimeShapes emits n's host shape function when an output of n has a symbol
// that is not bound yet and n's op has one.
func (e *emitter) bindRuntimeShapes(n *graph.Node) error {
	if !e.needsHostShape(n) {
		return nil
	}
	name, args, err := e.hostShapeCall(n)
	if err != nil || name == "" {
		return err
	}
	for _, a := range args {
		e.use(a)
	}
	shape := e.newReg()
	e.emit(vm.Instr{Op: vm.CallBuiltin, Dst: shape, Args: args, Imm: e.builtin(name), Str: n.String()})
	e.host[shape] = true
	if n.Op == graph.OpOneHot { // the depth alone: the output's extent at the axis
		out := n.Outputs[0].Type
		axis, err := graph.NormAxis(n, n.Attrs.(*graph.OneHotAttrs).Axis, len(out.Shape))
		if err != nil {
			return err
		}
		return e.bindDim(n, shape, 0, out.Shape[axis])
	}
	if n.Op == graph.OpSplit {
		axis, err := splitAxis(n)
		if err != nil {
			return err
		}
		for k, o := range n.Outputs {
			if o == nil || o.Type.Kind != graph.KindTensor || o.Type.UnknownRank || len(o.Type.Shape) <= axis {
				return fmt.Errorf("%v: output %d is not a tensor of the input's rank", n, k)
			}
			if err := e.bindDim(n, shape, k, o.Type.Shape[axis]); err != nil {
				return err
			}
		}
		return nil
	}
	for k, d := range n.Outputs[0].Type.Shape {
		if err := e.bindDim(n, shape, k, d); err != nil {
			return err
		}
	}
	return nil
}

// needsHostShape reports whether n's host shape function runs: an output names an
// unbound symbol, or n is a Resize with run-time scales or sizes (its kernel trusts the
// output extents, so the host checks them against the operands even when the type
// knows them).
func (e *emitter) needsHostShape(n *graph.Node) bool {
	if e.hasUnbound(n) {
		return true
	}
	if n.Op != graph.OpResize {
		return false
	}
	for _, i := range []int{2, 3} {
		if v := n.Input(i); v != nil && e.c.resolve(v).Const == nil {
			return true
		}
	}
	return false
}

// hasUnbound reports whether an output of n names a symbol with no register yet.
func (e *emitter) hasUnbound(n *graph.Node) bool {
	for _, o := range n.Outputs {
		if o == nil || o.Type.Kind != graph.KindTensor || o.Type.UnknownRank {
			continue
		}
		for _, d := range o.Type.Shape {
			for _, s := range d.Symbols() {
				if _, ok := e.sym[s]; !ok {
					return true
				}
			}
		}
	}
	return false
}

// bindResultShape binds the symbols of output o of n from the shape of r, the value
// the node produced (a host op's result, the taken branch's result of an If): a
// symbol not bound yet takes its extent, an extent over bound symbols is checked
// (bindDim). o must have a known rank.
func (e *emitter) bindResultShape(n *graph.Node, o *graph.Value, r vm.Reg) error {
	e.use(r)
	shape := e.newReg()
	e.emit(vm.Instr{Op: vm.ShapeOf, Dst: shape, Args: []vm.Reg{r}})
	e.host[shape] = true
	for axis, d := range o.Type.Shape {
		if err := e.bindDim(n, shape, axis, d); err != nil {
			return err
		}
	}
	return nil
}

// bindDim binds d to element k of the host shape in shape: a fresh symbol takes the
// value, a dim over bound symbols (or a constant) is checked against it, and a compound
// dim over unbound symbols is left (the code that needs it refuses it).
func (e *emitter) bindDim(n *graph.Node, shape vm.Reg, k int, d graph.Dim) error {
	axis := e.newReg()
	e.emit(vm.Instr{Op: vm.LoadConstInt, Dst: axis, Imm: int64(k)})
	if name, ok := d.IsSym(); ok {
		if _, bound := e.sym[name]; !bound {
			v := e.newReg()
			e.emit(vm.Instr{Op: vm.CallBuiltin, Dst: v, Args: []vm.Reg{shape, axis}, Imm: e.builtin(vm.BuiltinShapeDim), Str: n.String()})
			e.host[v] = true
			e.sym[name] = v
			return nil
		}
	}
	for _, s := range d.Symbols() {
		if _, ok := e.sym[s]; !ok {
			return nil
		}
	}
	want, err := e.shapeEval(tensor.Int64, nil, []graph.Dim{d})
	if err != nil {
		return fmt.Errorf("%v: %w", n, err)
	}
	got := e.newReg()
	e.emit(vm.Instr{Op: vm.CallBuiltin, Dst: got, Args: []vm.Reg{shape, axis}, Imm: e.builtin(vm.BuiltinShapeDim), Str: n.String()})
	e.host[got] = true
	chk := e.newReg()
	e.emit(vm.Instr{Op: vm.CallBuiltin, Dst: chk, Args: []vm.Reg{got, want}, Imm: e.builtin(vm.BuiltinShapeExpect), Str: n.String()})
	return nil
}

// hostShapeCall returns the host shape function of n and its arguments ("" when n's op
// has none).
func (e *emitter) hostShapeCall(n *graph.Node) (string, []vm.Reg, error) {
	var args []vm.Reg
	add := func(regs ...vm.Reg) { args = append(args, regs...) }
	// operands in order, each read on the host; optional ones stop at the first absent
	operands := func(from, to int) error {
		for i := from; i < to; i++ {
			v := n.Input(i)
			if v == nil {
				return nil
			}
			r, err := e.hostOperand(v)
			if err != nil {
				return err
			}
			add(r)
		}
		return nil
	}
	var name string
	var err error
	switch n.Op {
	case graph.OpReshape:
		name = vm.BuiltinShapeReshape
		if err = e.addInputShape(n, &args); err == nil {
			err = operands(1, 2)
		}
		add(e.constInt(n.Attrs.(*graph.ReshapeAttrs).AllowZero))
	case graph.OpSqueeze, graph.OpUnsqueeze, graph.OpExpand, graph.OpTile, graph.OpPad, graph.OpSlice:
		name = map[graph.Op]string{graph.OpSqueeze: vm.BuiltinShapeSqueeze, graph.OpUnsqueeze: vm.BuiltinShapeUnsqueeze,
			graph.OpExpand: vm.BuiltinShapeBroadcast, graph.OpTile: vm.BuiltinShapeTile, graph.OpPad: vm.BuiltinShapePad,
			graph.OpSlice: vm.BuiltinShapeSlice}[n.Op]
		if err = e.addInputShape(n, &args); err != nil {
			break
		}
		switch n.Op {
		case graph.OpPad: // pads and axes; the constant value (input 2) is no shape
			if err = operands(1, 2); err == nil && n.Input(3) != nil {
				err = operands(3, 4)
			}
		case graph.OpSlice:
			err = e.sliceOperands(n, &args)
		default:
			err = operands(1, len(n.Inputs))
		}
	case graph.OpConstantOfShape, graph.OpHannWindow, graph.OpHammingWindow, graph.OpBlackmanWindow:
		name = vm.BuiltinShapeValues // a shape, or a window's size (a scalar): its one extent
		err = operands(0, 1)
	case graph.OpRange:
		name = vm.BuiltinShapeRange
		err = operands(0, 3)
	case graph.OpOneHot:
		name = vm.BuiltinShapeOneHot
		err = operands(1, 2)
	case graph.OpSplit:
		name = vm.BuiltinShapeSplit
		axis, aerr := splitAxis(n)
		if aerr != nil {
			return "", nil, aerr
		}
		if err = e.addInputShape(n, &args); err == nil {
			add(e.constInt(int64(axis)))
			if err = operands(1, 2); err == nil {
				add(e.constInt(int64(len(n.Outputs))))
			}
		}
	case graph.OpReduceSum, graph.OpReduceMean, graph.OpReduceMax, graph.OpReduceMin, graph.OpReduceProd,
		graph.OpReduceL1, graph.OpReduceL2, graph.OpReduceLogSum, graph.OpReduceLogSumExp, graph.OpReduceSumSquare:
		name = vm.BuiltinShapeReduce
		a := n.Attrs.(*graph.ReduceAttrs)
		if err = e.addInputShape(n, &args); err != nil {
			break
		}
		if n.Input(1) == nil {
			add(e.loadConst(tensor.MustFromSlice(tensor.Shape{0}, []int64{})))
		} else if err = operands(1, 2); err != nil {
			break
		}
		add(e.constInt(a.KeepDims), e.constInt(a.NoopWithEmptyAxes))
	case graph.OpResize:
		name = vm.BuiltinShapeResize
		err = e.resizeOperands(n, &args)
	case graph.OpSTFT:
		name = vm.BuiltinShapeSTFT
		err = e.stftOperands(n, &args)
	case graph.OpMelWeightMatrix:
		name = vm.BuiltinShapeMelWeightMatrix
		err = operands(0, 3)
	case graph.OpDFT:
		name = vm.BuiltinShapeDFT
		err = e.dftOperands(n, &args)
	default:
		return "", nil, nil
	}
	if err != nil {
		return "", nil, fmt.Errorf("%v: %w", n, err)
	}
	return name, args, nil
}

// resizeOperands adds Resize's input shape, axes, keep_aspect_ratio policy, and its
// sizes (input 3, kind 1) or else its scales (input 2, kind 0).
func (e *emitter) resizeOperands(n *graph.Node, args *[]vm.Reg) error {
	if err := e.addInputShape(n, args); err != nil {
		return err
	}
	x := e.c.resolve(n.Inputs[0]).Type
	a := n.Attrs.(*graph.ResizeAttrs)
	axes := a.Axes
	if len(axes) == 0 {
		for i := range x.Shape {
			axes = append(axes, int64(i))
		}
	}
	policy := map[string]int64{"": vm.ResizeStretch, "stretch": vm.ResizeStretch,
		"not_larger": vm.ResizeNotLarger, "not_smaller": vm.ResizeNotSmaller}
	p, ok := policy[a.KeepAspectRatioPolicy]
	if !ok {
		return fmt.Errorf("Resize keep_aspect_ratio_policy %q", a.KeepAspectRatioPolicy)
	}
	*args = append(*args, e.loadConst(tensor.MustFromSlice(tensor.Shape{len(axes)}, append([]int64{}, axes...))), e.constInt(p))
	v, kind := n.Input(3), int64(1)
	if v == nil || (e.c.resolve(v).Const != nil && e.c.resolve(v).Const.Len() == 0) {
		v, kind = n.Input(2), 0
	}
	if v == nil {
		return fmt.Errorf("Resize without scales or sizes")
	}
	r, err := e.hostOperand(v)
	if err != nil {
		return err
	}
	*args = append(*args, e.constInt(kind), r)
	return nil
}

// dftOperands adds DFT's input shape, dft_length (-1 when absent), its constant axis
// and onesided.
func (e *emitter) dftOperands(n *graph.Node, args *[]vm.Reg) error {
	x := e.c.resolve(n.Inputs[0]).Type
	if x.Kind != graph.KindTensor || x.UnknownRank {
		return fmt.Errorf("DFT of an input of unknown rank")
	}
	axis, ok, err := graph.DFTAxis(n, len(x.Shape))
	if err != nil || !ok {
		return fmt.Errorf("DFT with a run-time axis: %v", err)
	}
	if err := e.addInputShape(n, args); err != nil {
		return err
	}
	length := e.constInt(-1)
	if v := n.Input(1); v != nil {
		if length, err = e.hostOperand(v); err != nil {
			return err
		}
	}
	*args = append(*args, length, e.constInt(int64(axis)), e.constInt(n.Attrs.(*graph.DFTAttrs).Onesided))
	return nil
}

// stftOperands adds STFT's signal shape, frame_step, frame_length and window length
// (each -1 when absent) and onesided.
func (e *emitter) stftOperands(n *graph.Node, args *[]vm.Reg) error {
	if err := e.addInputShape(n, args); err != nil {
		return err
	}
	step, err := e.hostOperand(n.Inputs[1])
	if err != nil {
		return err
	}
	*args = append(*args, step)
	fl := e.constInt(-1)
	if v := n.Input(3); v != nil {
		if fl, err = e.hostOperand(v); err != nil {
			return err
		}
	}
	wl := e.constInt(-1)
	if v := n.Input(2); v != nil {
		w := e.c.resolve(v).Type
		if w.Kind != graph.KindTensor || w.UnknownRank || len(w.Shape) != 1 || !e.allBound(w.Shape) {
			return fmt.Errorf("STFT window of type %v: its length is needed on the host", w)
		}
		if wl, err = e.shapeEval(tensor.Int64, nil, w.Shape); err != nil {
			return err
		}
	}
	*args = append(*args, fl, wl, e.constInt(n.Attrs.(*graph.STFTAttrs).Onesided))
	return nil
}

// sliceOperands adds Slice's starts, ends, axes and steps; absent axes before present
// steps are the default 0..len-1 (the starts' static length).
func (e *emitter) sliceOperands(n *graph.Node, args *[]vm.Reg) error {
	for i := 1; i <= 4; i++ {
		v := n.Input(i)
		if v == nil {
			if i != 3 || n.Input(4) == nil {
				return nil
			}
			l, ok := staticLen(n.Inputs[1])
			if !ok {
				return fmt.Errorf("Slice with default axes and run-time steps needs the starts' length")
			}
			axes := make([]int64, l)
			for k := range axes {
				axes[k] = int64(k)
			}
			*args = append(*args, e.loadConst(tensor.MustFromSlice(tensor.Shape{l}, axes)))
			continue
		}
		r, err := e.hostOperand(v)
		if err != nil {
			return err
		}
		*args = append(*args, r)
	}
	return nil
}

func staticLen(v *graph.Value) (int, bool) {
	if v.Type.Kind != graph.KindTensor || v.Type.UnknownRank || len(v.Type.Shape) != 1 {
		return 0, false
	}
	l, ok := v.Type.Shape[0].Value()
	return int(l), ok
}

func splitAxis(n *graph.Node) (int, error) {
	x := n.Inputs[0].Type
	if x.Kind != graph.KindTensor || x.UnknownRank {
		return 0, fmt.Errorf("%v: Split of an input of unknown rank", n)
	}
	return graph.NormAxis(n, n.Attrs.(*graph.SplitAttrs).Axis, len(x.Shape))
}

// hostShapesReady reports whether the host shape functions of a fused group's members
// can run before its kernel: every operand value they read is computed outside the
// group (a member's input 0 gives only its shape, which the types give once the
// earlier members' symbols are bound).
func (e *emitter) hostShapesReady(members []*graph.Node) bool {
	inside := map[*graph.Value]bool{}
	for _, m := range members {
		for _, o := range m.Outputs {
			inside[o] = true
		}
	}
	for _, m := range members {
		if !e.needsHostShape(m) {
			continue
		}
		for _, i := range hostReadInputs(m.Op) {
			if v := m.Input(i); v != nil && inside[v] {
				return false
			}
		}
	}
	return true
}

// hostReadInputs are the inputs whose values an op's host shape function reads.
func hostReadInputs(op graph.Op) []int {
	switch op {
	case graph.OpConstantOfShape, graph.OpHannWindow, graph.OpHammingWindow, graph.OpBlackmanWindow:
		return []int{0}
	case graph.OpRange:
		return []int{0, 1, 2}
	case graph.OpPad:
		return []int{1, 3}
	case graph.OpSlice:
		return []int{1, 2, 3, 4}
	case graph.OpResize:
		return []int{2, 3}
	case graph.OpSTFT:
		return []int{1, 3}
	case graph.OpMelWeightMatrix:
		return []int{0, 1, 2}
	}
	return []int{1}
}

// addInputShape adds the shape of n's input 0: a constant when it is static, the
// symbols' values through shape.eval when they are bound, else ShapeOf.
func (e *emitter) addInputShape(n *graph.Node, args *[]vm.Reg) error {
	x := e.c.resolve(n.Inputs[0])
	if x.Type.Kind != graph.KindTensor || x.Type.UnknownRank {
		return fmt.Errorf("input %q has type %v; its shape is needed on the host", x.Name, x.Type)
	}
	if s, ok := x.Type.ConstShape(); ok {
		*args = append(*args, e.loadConst(tensor.MustFromSlice(tensor.Shape{len(s)}, int64Shape(s))))
		return nil
	}
	if e.allBound(x.Type.Shape) {
		r, err := e.shapeEval(tensor.Int64, []int64{int64(len(x.Type.Shape))}, x.Type.Shape)
		if err != nil {
			return err
		}
		*args = append(*args, r)
		return nil
	}
	r, err := e.readTensor(x)
	if err != nil {
		return err
	}
	e.use(r)
	shape := e.newReg()
	e.emit(vm.Instr{Op: vm.ShapeOf, Dst: shape, Args: []vm.Reg{r}})
	e.host[shape] = true
	*args = append(*args, shape)
	return nil
}

// hostOperand returns a register holding v for a builtin: a host value or a constant
// as it is, a device tensor copied to the CPU first when it lives elsewhere.
func (e *emitter) hostOperand(v *graph.Value) (vm.Reg, error) {
	r, err := e.read(v)
	if err != nil || e.host[r] || e.anyDev[r] || e.dev[r] == 0 {
		return r, err
	}
	return e.readOn(v, 0)
}

func (e *emitter) constInt(v int64) vm.Reg {
	r := e.newReg()
	e.emit(vm.Instr{Op: vm.LoadConstInt, Dst: r, Imm: v})
	e.host[r] = true
	return r
}

// allBound reports whether every symbol of dims has a register.
func (e *emitter) allBound(dims []graph.Dim) bool {
	for _, d := range dims {
		for _, s := range d.Symbols() {
			if _, ok := e.sym[s]; !ok {
				return false
			}
		}
	}
	return true
}

// keptReduction returns, for a reduction over axes known only at run time that drops
// the reduced axes, the same reduction keeping them (its output of fresh extents): its
// kernel computes the kept form, and a view gives the node's output (dropping extents
// of 1 moves no element). nil for any other node.
func (e *emitter) keptReduction(n *graph.Node) *graph.Node {
	a, ok := n.Attrs.(*graph.ReduceAttrs)
	if !ok || a.KeepDims != 0 || n.Input(1) == nil || e.c.resolve(n.Inputs[1]).Const != nil || len(n.Outputs) != 1 {
		return nil
	}
	x, out := e.c.resolve(n.Inputs[0]).Type, n.Outputs[0].Type
	if l, ok := staticLen(n.Inputs[1]); !ok || l == 0 || x.Kind != graph.KindTensor || x.UnknownRank || out.UnknownRank {
		return nil
	}
	keep := *a
	keep.KeepDims = 1
	shape := make([]graph.Dim, len(x.Shape))
	for i := range shape {
		shape[i] = e.c.mod.FreshSymbol()
	}
	kept := &graph.Value{Name: n.Outputs[0].Name, Type: graph.TensorType(out.DType, shape...)}
	k := &graph.Node{Op: n.Op, Name: n.Name, Inputs: n.Inputs, Outputs: []*graph.Value{kept}, Attrs: &keep}
	kept.Def = k
	return k
}

// lowerKeptReduction lowers n through its kept form k (keptReduction): k's kernel,
// then a view to n's output shape, both bound on the host.
func (e *emitter) lowerKeptReduction(n, k *graph.Node) error {
	if err := e.bindRuntimeShapes(k); err != nil {
		return err
	}
	if _, err := e.lowerKernel(k, nil); err != nil {
		return err
	}
	out := n.Outputs[0]
	shape, err := e.shapeEval(tensor.Int64, []int64{int64(len(out.Type.Shape))}, out.Type.Shape)
	if err != nil {
		return fmt.Errorf("%v: %w", n, err)
	}
	src := e.reg[k.Outputs[0]]
	dst := e.newReg()
	e.use(src)
	e.use(shape)
	e.emit(vm.Instr{Op: vm.ReshapeTensor, Dst: dst, Args: []vm.Reg{src, shape}})
	e.alias(dst, src)
	e.reg[out] = dst
	return nil
}
