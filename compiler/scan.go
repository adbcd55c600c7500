package compiler

import (
	"fmt"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// lowerScan inlines an ONNX Scan like a Loop: the trip count is the scan inputs' extent
// along their scan axis (read at run time, so it may be symbolic), each iteration's
// slices are taken on the host (scan.slice, either direction), the states are carried
// in registers and the scan outputs stacked along a new first axis (scan.append,
// scan.finish). Scan outputs along another axis or in reverse are refused with the
// reason.
func (e *emitter) lowerScan(n *graph.Node) error {
	a := n.Attrs.(*graph.ScanAttrs)
	body := a.Body
	m := int(a.NumScanInputs)
	nState := len(n.Inputs) - m
	nOut := len(n.Outputs) - nState
	if m < 1 || nState < 0 || nOut < 0 || len(body.Params) != nState+m || len(body.Results) != nState+nOut {
		return fmt.Errorf("%v: %d inputs, %d scan inputs and %d outputs do not match the body", n, len(n.Inputs), m, len(n.Outputs))
	}
	for k := 0; k < nOut; k++ {
		if (k < len(a.ScanOutputAxes) && a.ScanOutputAxes[k] != 0) || (k < len(a.ScanOutputDirections) && a.ScanOutputDirections[k] != 0) {
			return fmt.Errorf("%v: scan output %d along axis %v or reversed is not supported by the compiled engine yet", n, k, a.ScanOutputAxes)
		}
	}
	vals := make([]vm.Reg, nState)
	for k := range vals {
		r, err := e.readDevice(n.Inputs[k])
		if err != nil {
			return err
		}
		vals[k] = e.move(r)
	}
	xs := make([]vm.Reg, m)
	axes := make([]int64, m)
	for j := range xs {
		v := n.Inputs[nState+j]
		r, err := e.read(v)
		if err != nil {
			return err
		}
		xs[j] = r
		if j < len(a.ScanInputAxes) {
			axes[j] = a.ScanInputAxes[j]
		}
		if rank := int64(len(v.Type.Shape)); axes[j] < 0 && !v.Type.UnknownRank {
			axes[j] += rank
		}
		if axes[j] < 0 || v.Type.UnknownRank || axes[j] >= int64(len(v.Type.Shape)) {
			return fmt.Errorf("%v: scan input %d: axis %d of %v", n, j, axes[j], v.Type)
		}
	}
	// the trip count: scan input 0's extent along its axis
	shape, axis, count := e.newReg(), e.newReg(), e.newReg()
	e.use(xs[0])
	e.emit(vm.Instr{Op: vm.ShapeOf, Dst: shape, Args: []vm.Reg{xs[0]}})
	e.emit(vm.Instr{Op: vm.LoadConstInt, Dst: axis, Imm: axes[0]})
	e.emit(vm.Instr{Op: vm.CallBuiltin, Dst: count, Args: []vm.Reg{shape, axis}, Imm: e.builtin(vm.BuiltinShapeDim)})
	iter, always := e.newReg(), e.loadConst(tensor.Scalar(true))
	e.emit(vm.Instr{Op: vm.LoadConstInt, Dst: iter, Imm: 0})
	for _, r := range []vm.Reg{shape, count, iter} {
		e.host[r] = true
	}
	accs := make([]vm.Reg, nOut)
	for k := range accs {
		accs[k] = e.newReg()
		e.emit(vm.Instr{Op: vm.LoadConstInt, Dst: accs[k], Imm: -1}) // a scalar: no rows yet
		e.host[accs[k]] = true
	}
	for k := range vals {
		e.reg[body.Params[k]] = vals[k]
	}
	top := e.pc()
	test := e.newReg()
	for _, r := range []vm.Reg{iter, count, always} {
		e.use(r)
	}
	e.emit(vm.Instr{Op: vm.CallBuiltin, Dst: test, Args: []vm.Reg{iter, count, always}, Imm: e.builtin(vm.BuiltinLoopContinue)})
	e.host[test] = true
	e.use(test)
	pcIf := e.emit(vm.Instr{Op: vm.If, Args: []vm.Reg{test}})
	region := &loopRegion{start: top, extend: map[*root]bool{}}
	e.loops = append(e.loops, region)
	e.depth++
	for j, x := range xs {
		ax, rev := e.newReg(), e.newReg()
		e.emit(vm.Instr{Op: vm.LoadConstInt, Dst: ax, Imm: axes[j]})
		reverse := int64(0)
		if j < len(a.ScanInputDirections) {
			reverse = a.ScanInputDirections[j]
		}
		e.emit(vm.Instr{Op: vm.LoadConstInt, Dst: rev, Imm: reverse})
		s := e.newReg()
		for _, r := range []vm.Reg{x, ax, iter, count, rev} {
			e.use(r)
		}
		e.emit(vm.Instr{Op: vm.CallBuiltin, Dst: s, Args: []vm.Reg{x, ax, iter, count, rev}, Imm: e.builtin(vm.BuiltinScanSlice)})
		e.host[s] = true
		e.reg[body.Params[nState+j]] = s
	}
	if err := e.function(body); err != nil {
		return err
	}
	temps := make([]vm.Reg, nState)
	for k := range temps {
		r, err := e.readDevice(body.Results[k])
		if err != nil {
			return err
		}
		temps[k] = e.move(r)
	}
	if err := e.appendScans(accs, body.Results[nState:]); err != nil {
		return err
	}
	e.closeLoop(iter, top, pcIf, region, vals, temps, accs, n.Outputs)
	return nil
}

// finishScan completes a stacked scan output after its loop (scan.finish): the rows, or
// an empty tensor with the element shape when no iteration ran.
func (e *emitter) finishScan(acc vm.Reg, o *graph.Value) {
	args := []vm.Reg{acc, e.loadConst(tensor.New(o.Type.DType, tensor.Shape{0}))}
	if t := o.Type; t.Kind == graph.KindTensor && !t.UnknownRank && len(t.Shape) > 0 {
		// the element shape, for a loop that runs no iteration (when it is known)
		if r, err := e.shapeEval(tensor.Int64, []int64{int64(len(t.Shape) - 1)}, t.Shape[1:]); err == nil {
			args = append(args, r)
		}
	}
	for _, a := range args {
		e.use(a)
	}
	r := e.newReg()
	e.emit(vm.Instr{Op: vm.CallBuiltin, Dst: r, Args: args, Imm: e.builtin(vm.BuiltinScanFinish)})
	e.host[r] = true
	e.reg[o] = r
}
