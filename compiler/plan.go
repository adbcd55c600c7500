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
	at := map[*root]int64{}
	for i, rt := range e.roots {
		e.code[rt.alloc].Imm = p.Offsets[i]
		at[rt] = p.Offsets[i]
	}
	for _, s := range e.subAllocs {
		e.code[s.pc].Imm = at[s.root] + s.delta
	}
	for d, pc := range e.arenaPC {
		e.code[pc].Imm = max(p.Sizes[d], vm.PlanAlign)
	}
	st := &c.res.Stats
	st.ArenaBytes, st.UnplannedSum = total, p.Sum
	for _, k := range e.consts {
		st.ConstantBytes += int64(k.Len() * k.DType.Size())
	}
	st.LayoutTransforms, st.LayoutBytes = layoutTransforms(c.mod.Main)
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
	t := v.Type
	kind := kindOf(t)
	if kind != vm.IOTensor {
		t = elemType(t)
	}
	io := vm.IOInfo{Name: v.Name, Kind: kind, DType: t.DType, Shape: make([]int64, len(t.Shape)), UnknownRank: kind != vm.IOTensor && t.UnknownRank}
	if io.UnknownRank {
		io.Shape = nil
	}
	for i, d := range t.Shape {
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

// layoutTransforms counts the LayoutTransform nodes of f and of its fused groups' bodies
// (alter-layout leaves functions with control flow alone, so each runs once per call)
// and the bytes of their outputs (a dynamic extent counts as 1).
func layoutTransforms(f *graph.Func) (n int, bytes int64) {
	for _, nd := range f.Nodes {
		switch nd.Op {
		case graph.OpFused:
			k, b := layoutTransforms(nd.Attrs.(*graph.FusedAttrs).Body)
			n, bytes = n+k, bytes+b
		case graph.OpLayoutTransform:
			t := nd.Outputs[0].Type
			size := int64(t.DType.Size())
			for _, d := range t.Shape {
				if x, ok := d.Value(); ok {
					size *= x
				}
			}
			n, bytes = n+1, bytes+size
		}
	}
	return n, bytes
}
