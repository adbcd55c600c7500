package compiler

import (
	"fmt"
	"math"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// Sequences and optionals are VM values (vm.Seq, vm.Opt) built and read by the VM's
// sequence builtins on the host; a tensor read out of one is a host value, copied to a
// device by the kernel that reads it, and a tensor put into one is copied to the host,
// so the memory plan never reuses memory a sequence holds. SequenceMap is a loop over
// its compiled body, the body's symbols bound from each item's shape.

// isSeqOpt reports whether a node reads or writes a sequence or an optional (Identity
// of one is a move), or is a sequence or optional op.
func isSeqOpt(n *graph.Node) bool {
	if _, ok := seqBuiltin[n.Op]; ok || n.Op == graph.OpSequenceMap || n.Op == graph.OpShape {
		return true
	}
	for _, v := range append(append([]*graph.Value{}, n.Inputs...), n.Outputs...) {
		if v != nil && v.Type.Kind != graph.KindTensor {
			return true
		}
	}
	return false
}

// seqBuiltin is the builtin that computes each sequence or optional op.
var seqBuiltin = map[graph.Op]string{
	graph.OpSequenceConstruct: vm.BuiltinSeqConstruct, graph.OpSequenceEmpty: vm.BuiltinSeqEmpty,
	graph.OpSequenceAt: vm.BuiltinSeqAt, graph.OpSequenceInsert: vm.BuiltinSeqInsert,
	graph.OpSequenceErase: vm.BuiltinSeqErase, graph.OpSequenceLength: vm.BuiltinSeqLength,
	graph.OpSplitToSequence: vm.BuiltinSeqSplit, graph.OpConcatFromSequence: vm.BuiltinSeqConcat,
	graph.OpOptional: vm.BuiltinOptSome, graph.OpOptionalHasElement: vm.BuiltinOptHas,
	graph.OpOptionalGetElement: vm.BuiltinOptGet,
}

// lowerSeqOpt lowers a sequence or optional op to its builtin, Identity of a sequence
// or optional to a move, and SequenceMap to a loop.
func (e *emitter) lowerSeqOpt(n *graph.Node) error {
	switch n.Op {
	case graph.OpSequenceMap:
		return e.lowerSequenceMap(n)
	case graph.OpShape:
		return e.lowerShapeOf(n)
	case graph.OpIdentity:
		r, err := e.read(n.Inputs[0])
		if err != nil {
			return err
		}
		e.reg[n.Outputs[0]] = e.move(r)
		return nil
	}
	name, ok := seqBuiltin[n.Op]
	if !ok {
		return fmt.Errorf("%w: %v: the compiled engine has no lowering of %v over sequences or optionals", kernels.ErrNoKernel, n, n.Op)
	}
	var args []vm.Reg
	for i, v := range n.Inputs {
		if v == nil {
			if i < len(n.Inputs)-1 {
				return fmt.Errorf("%v: input %d is omitted before a given one", n, i)
			}
			continue
		}
		r, err := e.read(v)
		if err != nil {
			return err
		}
		args = append(args, r)
	}
	in := vm.Instr{Op: vm.CallBuiltin, Str: n.String()}
	switch a := n.Attrs.(type) {
	case *graph.SequenceEmptyAttrs:
		in.DType = tensor.DType(a.DType)
	case *graph.SplitToSequenceAttrs:
		args = append(args[:1], append([]vm.Reg{e.constInt(a.Axis), e.constInt(a.KeepDims)}, args[1:]...)...)
	case *graph.ConcatFromSequenceAttrs:
		args = append(args, e.constInt(a.Axis), e.constInt(a.NewAxis))
	}
	if n.Op == graph.OpOptional && len(args) == 0 {
		name = vm.BuiltinOptNone
	}
	dst := e.newReg()
	for _, r := range args {
		e.use(r)
	}
	in.Dst, in.Args, in.Imm = dst, args, e.builtin(name)
	e.emit(in)
	out := n.Outputs[0]
	e.host[dst] = out.Type.Kind == graph.KindTensor
	e.reg[out] = dst
	if out.Type.Kind == graph.KindTensor {
		e.bindItemSymbols(dst, out.Type)
	}
	return nil
}

// bindItemSymbols reads the symbols of a tensor taken out of a sequence or optional
// from its shape: a symbol not bound yet is bound, one bound already is checked
// (shape.expect).
func (e *emitter) bindItemSymbols(r vm.Reg, t graph.Type) {
	if t.UnknownRank {
		return
	}
	v := &graph.Value{Name: "item", Type: t}
	e.reg[v] = r
	e.bindSymbols([]*graph.Value{v})
	delete(e.reg, v)
}

// lowerSequenceMap is a loop over the first input's positions: each sequence input's
// item at the position (the others as they are) binds the body's parameters, whose
// symbols are bound afresh from the items' shapes, and each body result is appended to
// its output sequence.
func (e *emitter) lowerSequenceMap(n *graph.Node) error {
	body := n.Attrs.(*graph.SequenceMapAttrs).Body
	if len(body.Params) != len(n.Inputs) || len(body.Results) != len(n.Outputs) {
		return fmt.Errorf("%v: body takes %d values and returns %d for %d inputs and %d outputs", n, len(body.Params), len(body.Results), len(n.Inputs), len(n.Outputs))
	}
	ins := make([]vm.Reg, len(n.Inputs))
	for i, v := range n.Inputs {
		r, err := e.read(v)
		if err != nil {
			return err
		}
		ins[i] = r
	}
	length := e.newReg()
	e.use(ins[0])
	e.emit(vm.Instr{Op: vm.CallBuiltin, Dst: length, Args: []vm.Reg{ins[0]}, Imm: e.builtin(vm.BuiltinSeqLength), Str: n.String()})
	e.host[length] = true
	for i := 1; i < len(ins); i++ {
		if n.Inputs[i].Type.Kind == graph.KindSequence { // every sequence as long as the first
			chk := e.newReg()
			e.use(ins[i])
			e.use(length)
			e.emit(vm.Instr{Op: vm.CallBuiltin, Dst: chk, Args: []vm.Reg{ins[i], length}, Imm: e.builtin(vm.BuiltinSeqLength), Str: n.String()})
			e.host[chk] = true
		}
	}
	always := e.loadConst(tensor.Scalar(true))
	iter := e.newReg()
	e.emit(vm.Instr{Op: vm.LoadConstInt, Dst: iter, Imm: 0})
	e.host[iter] = true
	outs := make([]vm.Reg, len(n.Outputs))
	for k := range outs {
		outs[k] = e.newReg()
		e.emit(vm.Instr{Op: vm.CallBuiltin, Dst: outs[k], Imm: e.builtin(vm.BuiltinSeqEmpty), DType: body.Results[k].Type.DType, Str: n.String()})
	}
	top := e.pc()
	test := e.newReg()
	for _, r := range []vm.Reg{iter, length, always} {
		e.use(r)
	}
	e.emit(vm.Instr{Op: vm.CallBuiltin, Dst: test, Args: []vm.Reg{iter, length, always}, Imm: e.builtin(vm.BuiltinLoopContinue)})
	e.host[test] = true
	e.use(test)
	pcIf := e.emit(vm.Instr{Op: vm.If, Args: []vm.Reg{test}})
	region := &loopRegion{start: top, extend: map[*root]bool{}}
	e.loops = append(e.loops, region)
	e.depth++
	// the body's symbols are the items': bound afresh each iteration
	outer := e.sym
	e.sym = map[string]vm.Reg{}
	for name, r := range outer {
		e.sym[name] = r
	}
	var params []*graph.Value
	rebound := map[string]bool{}
	for i, p := range body.Params {
		if n.Inputs[i].Type.Kind != graph.KindSequence {
			e.reg[p] = ins[i]
			continue
		}
		item := e.newReg()
		e.use(ins[i])
		e.use(iter)
		e.emit(vm.Instr{Op: vm.CallBuiltin, Dst: item, Args: []vm.Reg{ins[i], iter}, Imm: e.builtin(vm.BuiltinSeqAt), Str: n.String()})
		e.host[item] = true
		e.reg[p] = item
		if p.Type.Kind == graph.KindTensor && !p.Type.UnknownRank {
			for _, d := range p.Type.Shape {
				if name, ok := d.IsSym(); ok {
					delete(e.sym, name)
					rebound[name] = true
				}
			}
			params = append(params, p)
		}
	}
	e.unbindDerivedOf(rebound)
	e.bindSymbols(params)
	if err := e.bindDefs(); err != nil {
		return err
	}
	if err := e.function(body); err != nil {
		return err
	}
	for k, res := range body.Results {
		r, err := e.read(res)
		if err != nil {
			return err
		}
		e.use(outs[k])
		e.use(r)
		e.emit(vm.Instr{Op: vm.CallBuiltin, Dst: outs[k], Args: []vm.Reg{outs[k], r}, Imm: e.builtin(vm.BuiltinSeqInsert), Str: n.String()})
	}
	e.sym = outer
	e.closeLoop(iter, top, pcIf, region, nil, nil, nil, nil)
	for k, o := range n.Outputs {
		e.reg[o] = outs[k]
	}
	return nil
}

// kindOf is the signature kind of a value's type; 0 (a tensor) also for a type the
// signature cannot describe (lower refuses such an input).
func kindOf(t graph.Type) vm.IOKind {
	switch {
	case t.Kind == graph.KindSequence && t.Elem != nil && t.Elem.Kind == graph.KindTensor:
		return vm.IOSequence
	case t.Kind == graph.KindOptional && t.Elem != nil && t.Elem.Kind == graph.KindTensor:
		return vm.IOOptional
	case t.Kind == graph.KindOptional && t.Elem != nil && kindOf(*t.Elem) == vm.IOSequence:
		return vm.IOOptSequence
	}
	return vm.IOTensor
}

// elemType is the tensor type inside a sequence or optional type.
func elemType(t graph.Type) graph.Type {
	for t.Kind != graph.KindTensor && t.Elem != nil {
		t = *t.Elem
	}
	return t
}

// lowerShapeOf reads a tensor's shape at run time (ShapeOf): a Shape that folding left
// because its input's extents are known only then (an item of a sequence).
func (e *emitter) lowerShapeOf(n *graph.Node) error {
	a := n.Attrs.(*graph.ShapeAttrs)
	x := n.Inputs[0].Type
	if a.Start != 0 || (a.End != math.MinInt64 && (x.UnknownRank || a.End < int64(len(x.Shape)))) {
		return fmt.Errorf("%w: %v: the shape of a tensor known only at run time, with start %d and end %d", kernels.ErrNoKernel, n, a.Start, a.End)
	}
	r, err := e.read(n.Inputs[0])
	if err != nil {
		return err
	}
	dst := e.newReg()
	e.use(r)
	e.emit(vm.Instr{Op: vm.ShapeOf, Dst: dst, Args: []vm.Reg{r}})
	e.host[dst] = true
	e.reg[n.Outputs[0]] = dst
	return nil
}
