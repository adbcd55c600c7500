package passes

import (
	"fmt"
	"slices"

	"github.com/kilnrt/kiln/graph"
)

// LayoutPolicy tells alter-layout which nodes have kernels on blocked storage (the
// compiler builds it from the target's strategies).
type LayoutPolicy struct {
	// Anchor: a node that prefers blocked storage (a blocked convolution). It returns
	// the block it wants for each input (-1: any, as it is) and its output's block.
	Anchor func(n *graph.Node) (in []int64, out int64, ok bool)
	// Accepts returns the block of n's output when its inputs are stored in blocks in;
	// ok false: no kernel for that combination.
	Accepts func(n *graph.Node, in []int64) (out int64, ok bool)
	// PlainOutput (optional) reports that n's kernel on inputs stored in blocks in also
	// writes its output plain (a global pool): alter-layout keeps Accepts' block for the
	// output only where a reader takes it so.
	PlainOutput func(n *graph.Node, in []int64) bool
	// ChannelMultiple (optional) is the channel count the blocked kernels compute in
	// whole vectors: pad-channels widens regions of other counts to a multiple of it.
	ChannelMultiple int64
}

// AlterLayout stores the outputs of anchor nodes (convolutions) in channel blocks and
// keeps values blocked through the nodes that accept blocked inputs (elementwise ops
// with their broadcast operands, pooling, channel concat), so that consecutive
// convolutions exchange blocked tensors without reordering: a squeeze-and-excitation
// block (global pool, two convolutions, the channel-wise scale) and a residual Add stay
// blocked. A LayoutTransform is inserted where a consumer needs another storage order
// (plain inputs of the output's shape beside blocked ones, consumers without a blocked
// kernel, the function's results), one per value and block; a node whose only blocked
// inputs broadcast onto its output (a small per-channel tensor) runs plain instead,
// rather than reorder its large plain input. A subgraph (an If's branch, a Loop's body)
// reads the values it captures from the main function plain: a captured value left
// blocked is read through a plain copy made before the node that holds the subgraph.
func AlterLayout(ctx *Context, m *graph.Module) error {
	if ctx.Layout == nil || ctx.Layout.Anchor == nil || ctx.Layout.Accepts == nil {
		return nil
	}
	a := &alterer{m: m, p: ctx.Layout, copies: map[copyKey]*graph.Value{}, readers: map[*graph.Value][]*graph.Node{}}
	f := m.Main
	for _, n := range f.Nodes {
		for _, v := range n.Inputs {
			// once per reader: a node reading v many times is one question
			if rs := a.readers[v]; len(rs) == 0 || rs[len(rs)-1] != n {
				a.readers[v] = append(rs, n)
			}
		}
	}
	for _, n := range f.Nodes {
		if err := a.node(n); err != nil {
			return err
		}
		a.out = append(a.out, n)
	}
	for i, r := range f.Results {
		if r.Type.Block != 0 {
			v, err := a.stored(r, 0)
			if err != nil {
				return err
			}
			f.Results[i] = v
		}
	}
	f.Nodes = a.out
	return nil
}

type copyKey struct {
	v     *graph.Value
	block int64
}

type alterer struct {
	m       *graph.Module
	p       *LayoutPolicy
	out     []*graph.Node // the new node order
	copies  map[copyKey]*graph.Value
	readers map[*graph.Value][]*graph.Node
	useful  map[usefulKey]bool // blockedUseful's answers during one anchor's question
}

type usefulKey struct {
	v     *graph.Value
	block int64
	depth int
}

// blockedUseful reports whether storing v in block b saves a transform somewhere: some
// reader takes it blocked as an anchor, or keeps it blocked on the way to one (through
// elementwise ops, pooling, concats), or consumes it blocked (a global pool). A conv
// whose every reader needs NCHW (a depthwise conv on the generic rule) stays plain.
// Answers are remembered per value, block and depth during one anchor's question (the
// layouts do not change meanwhile), so a lattice of readers is walked once, not once
// per path through it.
func (a *alterer) blockedUseful(v *graph.Value, b int64, depth int) bool {
	if depth > 16 {
		return false
	}
	k := usefulKey{v, b, depth}
	if r, ok := a.useful[k]; ok {
		return r
	}
	r := a.blockedUsefulWalk(v, b, depth)
	a.useful[k] = r
	return r
}

func (a *alterer) blockedUsefulWalk(v *graph.Value, b int64, depth int) bool {
	for _, r := range a.readers[v] {
		if _, _, ok := a.p.Anchor(r); ok {
			return true
		}
		in := blocks(r)
		for i, x := range r.Inputs {
			if x == v {
				in[i] = b
			}
		}
		out, ok := a.p.Accepts(r, in)
		if !ok {
			// as node() would: plain inputs join the block of the blocked ones
			if joined, fits := joinedBlocks(r, in); fits {
				out, ok = a.p.Accepts(r, joined)
			}
		}
		if !ok {
			continue
		}
		if out == 0 || a.plainOutput(r, in) || len(r.Outputs) == 1 && a.blockedUseful(r.Outputs[0], out, depth+1) {
			return true
		}
	}
	return false
}

func blocks(n *graph.Node) []int64 {
	in := make([]int64, len(n.Inputs))
	for i, v := range n.Inputs {
		if v != nil {
			in[i] = v.Type.Block
		}
	}
	return in
}

func (a *alterer) plainOutput(n *graph.Node, in []int64) bool {
	return a.p.PlainOutput != nil && a.p.PlainOutput(n, in)
}

// joinBlock is the block of n's first blocked input (in[i] != 0) that plain inputs
// would join: one of the output's shape, or any input of a concat; 0 when there is
// none. A blocked input that only broadcasts onto the output (a per-channel scale) is
// not worth reordering the large plain one for.
func joinBlock(n *graph.Node, in []int64) int64 {
	if len(n.Outputs) == 0 {
		return 0
	}
	for i, v := range n.Inputs {
		if v != nil && in[i] != 0 && joins(n, v) {
			return in[i]
		}
	}
	return 0
}

// joinedBlocks is in with n's plain inputs that may join the block of its blocked ones
// (joinBlock, joins) stored in that block; fits is false when there is no such block,
// or when it divides the channels of n's output or of one of those inputs not (a
// concat of a 64-channel block and a plain 32-channel tensor stays plain).
func joinedBlocks(n *graph.Node, in []int64) (joined []int64, fits bool) {
	join := joinBlock(n, in)
	if join == 0 || graph.CheckBlock(n.Outputs[0].Type, join) != nil {
		return nil, false
	}
	joined = append([]int64{}, in...)
	for i, v := range n.Inputs {
		if v != nil && joined[i] == 0 && joins(n, v) {
			if graph.CheckBlock(v.Type, join) != nil {
				return nil, false
			}
			joined[i] = join
		}
	}
	return joined, true
}

// accepted sets n's output block to out, accepted by the policy on inputs in; when the
// kernel also writes plain and no reader takes the output blocked, it stays plain.
func (a *alterer) accepted(n *graph.Node, in []int64, out int64) error {
	if out != 0 && a.plainOutput(n, in) {
		a.useful = map[usefulKey]bool{}
		if !a.blockedUseful(n.Outputs[0], out, 0) {
			out = 0
		}
	}
	return setBlock(n, out)
}

func (a *alterer) node(n *graph.Node) error {
	if err := a.plainCaptures(n); err != nil {
		return err
	}
	in := blocks(n)
	if want, out, ok := a.p.Anchor(n); ok {
		a.useful = map[usefulKey]bool{}
		if out != 0 && !a.blockedUseful(n.Outputs[0], out, 0) {
			out = 0
		}
		for i, b := range want {
			if b >= 0 && i < len(n.Inputs) && n.Inputs[i] != nil && in[i] != b {
				if err := a.restore(n, i, b); err != nil {
					return err
				}
			}
		}
		return setBlock(n, out)
	}
	if !slices.ContainsFunc(in, func(b int64) bool { return b != 0 }) {
		return nil
	}
	if out, ok := a.p.Accepts(n, in); ok {
		return a.accepted(n, in, out)
	}
	// bring plain inputs of the output's shape (a concat's inputs) into the block of
	// the blocked ones of that shape, if that is a kernel
	if try, fits := joinedBlocks(n, in); fits {
		if out, ok := a.p.Accepts(n, try); ok {
			for i := range try {
				if try[i] != in[i] {
					if err := a.restore(n, i, try[i]); err != nil {
						return err
					}
				}
			}
			return a.accepted(n, try, out)
		}
	}
	for i, b := range in {
		if b != 0 {
			if err := a.restore(n, i, 0); err != nil {
				return err
			}
		}
	}
	return nil
}

// joins reports whether n's plain input v may be brought into the block of n's other
// inputs: it has the output's shape, or n concatenates it (a concat of a blocked and a
// plain tensor costs a transform of the plain one either way).
func joins(n *graph.Node, v *graph.Value) bool {
	out := n.Outputs[0].Type
	if n.Op == graph.OpConcat {
		return !v.Type.UnknownRank && !out.UnknownRank && len(v.Type.Shape) == len(out.Shape)
	}
	return sameShape(v.Type, out)
}

func sameShape(a, b graph.Type) bool {
	if a.UnknownRank || b.UnknownRank || len(a.Shape) != len(b.Shape) {
		return false
	}
	for i := range a.Shape {
		if !a.Shape[i].Equal(b.Shape[i]) {
			return false
		}
	}
	return true
}

func setBlock(n *graph.Node, b int64) error {
	if len(n.Outputs) == 0 {
		return nil
	}
	if err := graph.CheckBlock(n.Outputs[0].Type, b); err != nil {
		return fmt.Errorf("BUG: layout policy gives %v an output block %d: %v", n, b, err)
	}
	n.Outputs[0].Type.Block = b
	return nil
}

// restore feeds input i of n from a copy of its value stored in block b.
func (a *alterer) restore(n *graph.Node, i int, b int64) error {
	v, err := a.stored(n.Inputs[i], b)
	if err != nil {
		return err
	}
	n.Inputs[i] = v
	return nil
}

// stored returns v stored in block b, adding a LayoutTransform (once per value and block).
func (a *alterer) stored(v *graph.Value, b int64) (*graph.Value, error) {
	if v.Type.Block == b {
		return v, nil
	}
	if c, ok := a.copies[copyKey{v, b}]; ok {
		return c, nil
	}
	attrs := graph.OpLayoutTransform.NewAttrs().(*graph.LayoutTransformAttrs)
	attrs.Block = b
	t := &graph.Node{Op: graph.OpLayoutTransform, Attrs: attrs, Inputs: []*graph.Value{v}}
	out := &graph.Value{Name: fmt.Sprintf("%s@c%d", v.Name, b), Def: t}
	t.Outputs = []*graph.Value{out}
	types, err := graph.InferNode(&graph.InferCtx{M: a.m}, t)
	if err != nil {
		return nil, err
	}
	out.Type = types[0]
	a.out = append(a.out, t)
	a.copies[copyKey{v, b}] = out
	return out, nil
}

// plainCaptures makes n's subgraphs read every value they capture plain: a captured
// value stored in blocks is replaced, in the subgraphs, by its plain copy.
func (a *alterer) plainCaptures(n *graph.Node) error {
	subs := n.Subgraphs()
	if len(subs) == 0 {
		return nil
	}
	plain := map[*graph.Value]*graph.Value{}
	for _, v := range captured(subs) {
		if v.Type.Block != 0 {
			p, err := a.stored(v, 0)
			if err != nil {
				return err
			}
			plain[v] = p
		}
	}
	if len(plain) == 0 {
		return nil
	}
	var rewrite func(f *graph.Func)
	rewrite = func(f *graph.Func) {
		for _, sn := range f.Nodes {
			for i, v := range sn.Inputs {
				if p, ok := plain[v]; ok {
					sn.Inputs[i] = p
				}
			}
			for _, g := range sn.Subgraphs() {
				rewrite(g)
			}
		}
		for i, v := range f.Results {
			if p, ok := plain[v]; ok {
				f.Results[i] = p
			}
		}
	}
	for _, f := range subs {
		rewrite(f)
	}
	return nil
}

// captured lists the values the funcs (and the subgraphs inside them) read but do not
// define, in order of first reading.
func captured(funcs []*graph.Func) []*graph.Value {
	defined := map[*graph.Value]bool{}
	var reads []*graph.Value
	var walk func(f *graph.Func)
	walk = func(f *graph.Func) {
		for _, v := range f.Params {
			defined[v] = true
		}
		for _, v := range f.Consts {
			defined[v] = true
		}
		for _, n := range f.Nodes {
			reads = append(reads, n.Inputs...)
			for _, g := range n.Subgraphs() {
				walk(g)
			}
			for _, v := range n.Outputs {
				defined[v] = true
			}
		}
		reads = append(reads, f.Results...)
	}
	for _, f := range funcs {
		walk(f)
	}
	seen := map[*graph.Value]bool{}
	var out []*graph.Value
	for _, v := range reads {
		if v != nil && !defined[v] && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}
