package compiler

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// A concatenation in place: where each input of a Concat is one contiguous run of the
// output's bytes (every extent before the axis is 1, and a channel-blocked value
// concatenates whole blocks along its channels), the kernels that produce the inputs
// write them straight into their runs of the output, and the Concat launches nothing.
// SqueezeNet's fire modules and Inception's branches lose a copy of every
// concatenated tensor.
//
// The plan is made before the entry function is lowered (concatPlan); the emitter
// allocates the output at the first producer it lowers (concatOutput) and each input
// as a tensor at its run's offset in the output's arena slot (the offsets are patched
// with the arena's, plan.go). The output's planned interval starts at that first
// producer and its register's uses keep it alive as long as the inputs' views; if a
// producer is lowered some other way (a view, a host op), the Concat runs as a kernel
// into a fresh output, reading the views: correct, only not in place.

// inPlaceConcat is one planned Concat: its node, the byte offset of each input's run,
// and, once its first producer is lowered, the register holding the output.
type inPlaceConcat struct {
	node    *graph.Node
	offsets map[*graph.Value]int64
	out     vm.Reg
	root    *root
	dev     int
	placed  bool                  // out and root are set
	written map[*graph.Value]bool // inputs a kernel wrote in place
}

// subAlloc is an AllocTensor at delta bytes into a planned root (a concat input).
type subAlloc struct {
	pc    int
	root  *root
	delta int64
}

// concatPlan finds the Concats of f whose inputs can be written in place: every input
// a distinct value produced by a node of f, read by this Concat alone and not a result
// of f, all of static shape in global memory with the output's channel block, and each
// run starting at a multiple of align. f with control flow is left alone (a branch may
// read a value without naming it as an input).
func concatPlan(f *graph.Func, align int64) map[*graph.Value]*inPlaceConcat {
	readers := map[*graph.Value]int{}
	produced := map[*graph.Value]bool{}
	for _, n := range f.Nodes {
		switch n.Op {
		case graph.OpIf, graph.OpLoop, graph.OpScan, graph.OpSequenceMap:
			return nil
		}
		for _, v := range n.Inputs {
			readers[v]++
		}
		for _, v := range n.Outputs {
			produced[v] = true
		}
	}
	for _, v := range f.Results {
		readers[v] += 2 // never in place
	}
	plan := map[*graph.Value]*inPlaceConcat{}
	for _, n := range f.Nodes {
		if n.Op != graph.OpConcat || len(n.Inputs) < 2 || len(n.Outputs) != 1 {
			continue
		}
		offsets, ok := concatRuns(n, align)
		if !ok {
			continue
		}
		for _, v := range n.Inputs {
			if !produced[v] || readers[v] != 1 || plan[v] != nil {
				ok = false
			}
		}
		if !ok {
			continue
		}
		c := &inPlaceConcat{node: n, offsets: offsets, written: map[*graph.Value]bool{}}
		for _, v := range n.Inputs {
			plan[v] = c
		}
	}
	return plan
}

// concatRuns is the byte offset of each input's run in n's output, when every input is
// one contiguous run of it at a multiple of align.
func concatRuns(n *graph.Node, align int64) (map[*graph.Value]int64, bool) {
	a, ok := n.Attrs.(*graph.AxisAttrs)
	out := n.Outputs[0].Type
	if !ok || out.Kind != graph.KindTensor || out.Scope != graph.ScopeGlobal {
		return nil, false
	}
	shape, ok := out.ConstShape()
	if !ok {
		return nil, false
	}
	axis := int(a.Axis)
	if axis < 0 {
		axis += len(shape)
	}
	if axis < 0 || axis >= len(shape) || (out.Block != 0 && (len(shape) != 4 || axis != 1)) {
		return nil, false
	}
	for _, d := range shape[:axis] {
		if d != 1 {
			return nil, false
		}
	}
	offsets := map[*graph.Value]int64{}
	var at int64
	for _, v := range n.Inputs {
		t := v.Type
		s, ok := t.ConstShape()
		if !ok || t.Kind != graph.KindTensor || t.Scope != graph.ScopeGlobal || t.DType != out.DType ||
			t.Block != out.Block || len(s) != len(shape) || at%align != 0 {
			return nil, false
		}
		if out.Block != 0 && int64(s[1])%out.Block != 0 {
			return nil, false
		}
		if _, dup := offsets[v]; dup {
			return nil, false
		}
		offsets[v] = at
		b, err := tensor.CheckedBytes(t.DType, toInt64(s))
		if err != nil {
			return nil, false
		}
		at += b
	}
	if b, err := tensor.CheckedBytes(out.DType, toInt64(shape)); err != nil || b != at {
		return nil, false
	}
	return offsets, true
}

func toInt64(s tensor.Shape) []int64 {
	out := make([]int64, len(s))
	for i, d := range s {
		out[i] = int64(d)
	}
	return out
}

// concatInput allocates output o of a kernel on device dev as its run of a planned
// Concat's output (ok false: o is not planned in place there, allocate it as usual).
func (e *emitter) concatInput(o *graph.Value, dt tensor.DType, shape []int64, what string, dev int) (vm.Reg, bool, error) {
	if outer, ok := e.inPlaceAs[o]; ok {
		o = outer
	}
	c := e.inPlace[o]
	if c == nil || e.depth != 0 || (c.placed && c.dev != dev) {
		return 0, false, nil
	}
	if !c.placed {
		out := c.node.Outputs[0]
		s, _ := out.Type.ConstShape()
		r, err := e.allocTensor(out.Type.DType, toInt64(s), describe(c.node, out), dev)
		if err != nil {
			return 0, false, err
		}
		c.out, c.root, c.dev, c.placed = r, e.rootOf[r][0], dev, true
	}
	r := e.newReg()
	e.dev[r] = dev
	e.rootOf[r] = []*root{c.root}
	e.subAllocs = append(e.subAllocs, subAlloc{pc: e.pc(), root: c.root, delta: c.offsets[o]})
	e.emit(vm.Instr{Op: vm.AllocTensor, Dst: r, Args: []vm.Reg{e.arenas[dev]}, DType: dt, Shape: shape, Str: what})
	c.written[o] = true
	return r, true, nil
}

// lowerConcatInPlace takes a planned Concat's output from the register its producers
// wrote into (false: some input was not written in place; lower it as a kernel).
func (e *emitter) lowerConcatInPlace(n *graph.Node) bool {
	if len(n.Inputs) == 0 {
		return false
	}
	c := e.inPlace[n.Inputs[0]]
	if c == nil || c.node != n || !c.placed || e.depth != 0 {
		return false
	}
	for _, v := range n.Inputs {
		if !c.written[v] {
			return false
		}
	}
	e.reg[n.Outputs[0]] = c.out
	e.c.res.Stats.ConcatsInPlace++
	return true
}
