package compiler

import (
	"fmt"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/vm"
)

// plan places the straight-line part's tensors in the arena and assembles the
// executable.
func (c *compile) plan() error {
	e := c.em
	iv := make([]vm.Interval, len(e.roots))
	for i, rt := range e.roots {
		iv[i] = vm.Interval{Size: rt.size, Start: rt.alloc, End: max(rt.lastUse, rt.alloc), Device: rt.dev}
	}
	p, err := vm.PlanArenas(iv, c.aligns())
	if err != nil {
		return err
	}
	var total int64
	for _, sz := range p.Sizes {
		total += sz
	}
	if total > c.limits.RequestBytes {
		return c.limits.RequestError(fmt.Sprintf("the static memory plan (its largest tensor: %s)", e.largestRoot()), total)
	}
	for i, rt := range e.roots {
		e.code[rt.alloc].Imm = p.Offsets[i]
	}
	for d, pc := range e.arenaPC {
		e.code[pc].Imm = max(p.Sizes[d], vm.PlanAlign)
	}
	st := &c.res.Stats
	st.ArenaBytes, st.UnplannedSum = total, p.Sum
	for _, k := range e.consts {
		st.ConstantBytes += int64(k.Len() * k.DType.Size())
	}
	exe := &vm.Executable{
		Functions: []vm.Function{{Name: "main", Params: len(c.mod.Main.Params), Regs: e.nregs, Code: e.code}},
		Constants: e.consts,
		Kernels:   c.kt.kernelInfos(),
		Builtins:  e.builtins,
		HostCalls: e.hostCalls,
		Binaries:  c.kt.bins,
	}
	for _, v := range c.mod.Main.Params {
		exe.Inputs = append(exe.Inputs, ioInfo(v))
	}
	for _, v := range c.mod.Main.Results {
		exe.Outputs = append(exe.Outputs, ioInfo(v))
	}
	if err := exe.Verify(); err != nil {
		return err
	}
	c.res.Exe = exe
	return nil
}

// ioInfo describes a value for the executable's signature (-1: a dynamic extent).
func ioInfo(v *graph.Value) vm.IOInfo {
	io := vm.IOInfo{Name: v.Name, DType: v.Type.DType, Shape: make([]int64, len(v.Type.Shape))}
	for i, d := range v.Type.Shape {
		if x, ok := d.Value(); ok {
			io.Shape[i] = x
		} else {
			io.Shape[i] = -1
		}
	}
	return io
}

// largestRoot names the largest tensor of the static plan.
func (e *emitter) largestRoot() string {
	var big *root
	for _, rt := range e.roots {
		if big == nil || rt.size > big.size {
			big = rt
		}
	}
	if big == nil {
		return "none"
	}
	return fmt.Sprintf("%s, %d bytes", big.what, big.size)
}
