package passes

import (
	"fmt"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

// maxPadWaste bounds pad-channels: a region's channels M pad to M' only when
// M' ≤ M + M/maxPadWaste (a fifth more work at most: 40 → 48, 72 → 80, 120 → 128,
// 184 → 192, 200 → 208 on AVX-512, not 24 → 32). 40 → 48 pays: a 40-channel
// projection at 28×28 computes 48 channels in its tiles anyway and, unpadded, unpacks
// them to NCHW. Padded, MnasNet's took 0.70× (120 → 40) and 0.59× (72 → 40) the time
// per launch at two threads (AVX-512), EfficientNet-B0's 0.70× and 0.77×.
const maxPadWaste = 5

// PadChannels widens the channel axis of the values inside a convolution network that
// no vector divides to the next multiple of LayoutPolicy.ChannelMultiple, as ONNX
// Runtime's NCHWc transformer does, so that they are stored and computed in whole
// vector blocks. A region is a set of float32 4-D values of M channels joined by the
// ops that keep channels apart: depthwise convolutions, the elementwise ops of
// elementwiseChannelOps (their other operands in the region, or constants per channel
// or of one element) and global average pools. Every value of a region is written by
// a convolution of one group (its filters padded with zero filters and zero bias), or
// by one of those ops; every reader is one of those ops or a convolution of one group
// (its weights padded with zero input channels). A region with any other writer or
// reader (a reshape, a concat, a graph input or result) is left alone.
//
// The padded channels hold zeros through a 1×1 or depthwise convolution and f(0)
// through an activation f (HardSigmoid's 0.5): finite values that the zero weights of
// the region's reading convolutions multiply away, so every other value is what it
// was. (An input holding an infinity or NaN makes the padded channels NaN where it
// reaches them, as it makes the real ones infinite or NaN.) Modules with subgraphs are
// left alone.
func PadChannels(ctx *Context, m *graph.Module) error {
	if ctx.Layout == nil || ctx.Layout.ChannelMultiple <= 1 {
		return nil
	}
	mult := ctx.Layout.ChannelMultiple
	f := m.Main
	for _, n := range f.Nodes {
		if len(n.Subgraphs()) > 0 {
			return nil
		}
	}
	p := &padder{f: f, names: moduleNames(m), readers: map[*graph.Value][]*graph.Node{}, results: map[*graph.Value]bool{}, seen: map[*graph.Value]bool{}}
	for _, n := range f.Nodes {
		for _, v := range n.Inputs {
			if v != nil {
				p.readers[v] = append(p.readers[v], n)
			}
		}
	}
	for _, r := range f.Results {
		p.results[r] = true
	}
	for _, n := range f.Nodes {
		if n.Op != graph.OpConv || len(n.Outputs) != 1 || p.seen[n.Outputs[0]] {
			continue
		}
		r, ok := p.region(n.Outputs[0])
		if !ok {
			continue
		}
		to := (r.m + mult - 1) / mult * mult
		if to == r.m || (to-r.m)*maxPadWaste > r.m {
			continue
		}
		if err := p.apply(r, to); err != nil {
			return err
		}
	}
	return nil
}

// elementwiseChannelOps are the ops a padded region passes through: each output
// channel depends on the same channel of its inputs.
var elementwiseChannelOps = map[graph.Op]bool{
	graph.OpRelu: true, graph.OpHardSwish: true, graph.OpHardSigmoid: true, graph.OpSigmoid: true,
	graph.OpTanh: true, graph.OpClip: true, graph.OpLeakyRelu: true,
	graph.OpAdd: true, graph.OpSub: true, graph.OpMul: true,
}

type padder struct {
	f       *graph.Func
	names   *freshNames
	readers map[*graph.Value][]*graph.Node
	results map[*graph.Value]bool
	seen    map[*graph.Value]bool
}

// padRegion is one region: its values, channel count and the nodes to rewrite.
type padRegion struct {
	m      int64
	values []*graph.Value
	in     map[*graph.Value]bool
	nodes  map[*graph.Node]bool // writers and readers of the region's values
}

// region collects the region of v, false when it cannot be padded.
func (p *padder) region(v *graph.Value) (*padRegion, bool) {
	m, ok := channels(v)
	if !ok {
		p.seen[v] = true
		return nil, false
	}
	r := &padRegion{m: m, in: map[*graph.Value]bool{}, nodes: map[*graph.Node]bool{}}
	work := []*graph.Value{v}
	r.in[v] = true
	good := true
	add := func(x *graph.Value) {
		if x != nil && !r.in[x] {
			r.in[x] = true
			work = append(work, x)
		}
	}
	for len(work) > 0 {
		x := work[len(work)-1]
		work = work[:len(work)-1]
		r.values = append(r.values, x)
		p.seen[x] = true
		if c, ok := channels(x); !ok || c != m || p.results[x] || x.Def == nil {
			good = false
			continue
		}
		if !p.writer(x.Def, r, add) {
			good = false
		}
		for _, n := range p.readers[x] {
			if !p.reader(n, x, r, add) {
				good = false
			}
		}
	}
	return r, good
}

// writer takes the node writing a region value: a convolution of one group (padded
// filters), a depthwise one or a channel-wise op (their inputs join the region).
func (p *padder) writer(n *graph.Node, r *padRegion, add func(*graph.Value)) bool {
	r.nodes[n] = true
	switch {
	case n.Op == graph.OpConv:
		switch convKind(n) {
		case convDense:
			return true
		case convDepthwise:
			add(n.Inputs[0])
			return true
		}
		return false
	case n.Op == graph.OpGlobalAveragePool:
		add(n.Inputs[0])
		return true
	case elementwiseChannelOps[n.Op]:
		return p.channelOperands(n, r, add)
	}
	return false
}

// reader takes a node reading the region value x: a convolution of one group reading
// it as its data (padded input channels), a depthwise one, a pool or a channel-wise op
// (their outputs and other inputs join the region).
func (p *padder) reader(n *graph.Node, x *graph.Value, r *padRegion, add func(*graph.Value)) bool {
	r.nodes[n] = true
	switch {
	case n.Op == graph.OpConv:
		for i, in := range n.Inputs {
			if in == x && i != 0 {
				return false
			}
		}
		switch convKind(n) {
		case convDense:
			return true
		case convDepthwise:
			add(n.Outputs[0])
			return true
		}
		return false
	case n.Op == graph.OpGlobalAveragePool:
		add(n.Outputs[0])
		return true
	case elementwiseChannelOps[n.Op]:
		return p.channelOperands(n, r, add)
	}
	return false
}

// channelOperands checks an elementwise op (one output, which joins the region) and its
// inputs: values of the region's channels join it, constants must be of one element or per channel (padded by apply); the
// min and max of Clip are constants of one element.
func (p *padder) channelOperands(n *graph.Node, r *padRegion, add func(*graph.Value)) bool {
	if len(n.Outputs) != 1 {
		return false
	}
	add(n.Outputs[0])
	for _, v := range n.Inputs {
		switch {
		case v == nil:
		case v.Const != nil:
			if _, ok := perChannel(v.Const, r.m); !ok {
				return false
			}
		default:
			add(v)
		}
	}
	return true
}

type convClass int

const (
	convOther     convClass = iota
	convDense               // one group, constant float32 weights and bias
	convDepthwise           // one group per channel, no multiplier, constant weights and bias
)

func convKind(n *graph.Node) convClass {
	a, _ := n.Attrs.(*graph.ConvAttrs)
	w := n.ConstInput(1)
	if a == nil || w == nil || w.DType != tensor.Float32 || len(w.Shape) != 4 || len(n.Outputs) != 1 {
		return convOther
	}
	if len(n.Inputs) > 2 && n.Inputs[2] != nil && n.ConstInput(2) == nil {
		return convOther
	}
	c, ok := channels(n.Inputs[0])
	switch {
	case a.Group == 1:
		return convDense
	case ok && a.Group == c && w.Shape[1] == 1 && int64(w.Shape[0]) == c:
		return convDepthwise
	}
	return convOther
}

// channels is the channel count of a float32 4-D value of static shape.
func channels(v *graph.Value) (int64, bool) {
	if v == nil || v.Type.DType != tensor.Float32 || v.Type.UnknownRank || len(v.Type.Shape) != 4 {
		return 0, false
	}
	if _, ok := v.Type.ConstShape(); !ok {
		return 0, false
	}
	return v.Type.Shape[1].Value()
}

// perChannel reports how a constant operand broadcasts against [N, m, H, W]: the axis
// of its shape that holds the m channels (-1: one element everywhere, nothing to pad).
func perChannel(t *tensor.Tensor, m int64) (int, bool) {
	if t.DType != tensor.Float32 || len(t.Shape) > 4 {
		return 0, false
	}
	axis := -1
	for i, d := range t.Shape {
		pos := 4 - len(t.Shape) + i // numpy broadcasting aligns on the right
		switch {
		case d == 1:
		case pos == 1 && int64(d) == m:
			axis = i
		default:
			return 0, false
		}
	}
	return axis, true
}

// apply pads the region r to `to` channels.
func (p *padder) apply(r *padRegion, to int64) error {
	for _, n := range p.f.Nodes {
		if !r.nodes[n] {
			continue
		}
		switch {
		case n.Op == graph.OpConv:
			if err := p.padConv(n, r, to); err != nil {
				return err
			}
		case elementwiseChannelOps[n.Op]:
			for i, v := range n.Inputs {
				if v == nil || v.Const == nil {
					continue
				}
				axis, _ := perChannel(v.Const, r.m)
				if axis < 0 {
					continue
				}
				t, err := padAxis(v.Const, axis, to)
				if err != nil {
					return err
				}
				p.setConst(n, i, v.Name, t)
			}
		}
	}
	for _, v := range r.values {
		shape := append([]graph.Dim(nil), v.Type.Shape...)
		shape[1] = graph.Const(to)
		v.Type.Shape = shape
	}
	return nil
}

// padConv pads a convolution's weights and bias where its output (filters) or its data
// (input channels) is in the region; a depthwise one's group follows its channels.
func (p *padder) padConv(n *graph.Node, r *padRegion, to int64) error {
	kind := convKind(n)
	w := n.ConstInput(1)
	var err error
	if r.in[n.Outputs[0]] {
		if w, err = padAxis(w, 0, to); err != nil {
			return err
		}
		if b := n.ConstInput(2); b != nil {
			nb, err := padAxis(b, 0, to)
			if err != nil {
				return err
			}
			p.setConst(n, 2, n.Inputs[2].Name, nb)
		}
		if kind == convDepthwise {
			a := *n.Attrs.(*graph.ConvAttrs)
			a.Group = to
			n.Attrs = &a
		}
	}
	if r.in[n.Inputs[0]] && kind == convDense {
		if w, err = padAxis(w, 1, to); err != nil {
			return err
		}
	}
	p.setConst(n, 1, n.Inputs[1].Name, w)
	return nil
}

// setConst makes input i of n a new constant t (the old one may have other readers).
func (p *padder) setConst(n *graph.Node, i int, name string, t *tensor.Tensor) {
	c := graph.NewConst(p.names.fresh(name+"_padded"), t)
	p.f.Consts = append(p.f.Consts, c)
	in := append([]*graph.Value(nil), n.Inputs...)
	in[i] = c
	n.Inputs = in
}

// padAxis returns t (float32) with axis extended to `to` by zeros.
func padAxis(t *tensor.Tensor, axis int, to int64) (*tensor.Tensor, error) {
	if t.DType != tensor.Float32 || axis >= len(t.Shape) || int64(t.Shape[axis]) > to {
		return nil, fmt.Errorf("BUG: pad-channels: %v%v axis %d to %d", t.DType, t.Shape, axis, to)
	}
	src := t.Float64s()
	outer, inner := 1, 1
	for i, d := range t.Shape {
		if i < axis {
			outer *= d
		} else if i > axis {
			inner *= d
		}
	}
	from := t.Shape[axis]
	out := make([]float64, outer*int(to)*inner)
	for o := 0; o < outer; o++ {
		copy(out[o*int(to)*inner:], src[o*from*inner:(o+1)*from*inner])
	}
	shape := t.Shape.Clone()
	shape[axis] = int(to)
	return tensor.FromFloat64s(tensor.Float32, shape, out), nil
}
