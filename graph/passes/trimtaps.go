package passes

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

// TrimConvTaps drops the kernel taps of a Conv that read only padding. Along a spatial
// axis of input extent H, output extent O, stride s, dilation d and begin padding pb,
// tap t reads input o·s − pb + t·d for output o; a tap no output reads inside [0, H)
// adds only zeros. Where the taps that do read inside are t ∈ [lo, hi] and some are
// not, the Conv becomes one with kernel hi−lo+1, the weights sliced to those taps,
// begin padding pb − lo·d and end padding pe − (k−1−hi)·d (the output extent is
// unchanged), dilation 1 where one tap is left. It applies to a Conv of a static input
// and a constant float32 weight, any padding mode (resolved over the static extents
// into explicit pads), and only where the new pads are not negative.
//
// Where the outputs along an axis fall into runs (bands) that read different taps, and
// a heavy Conv (at least bandMinMACs multiply-adds) would compute at most
// bandMaxShare of its products in them, the Conv is split along that axis into one Conv
// per band over the input rows the band reads (a Slice), each with its own taps, and a
// Concat of their outputs; the bands are trimmed and split along the next axis in turn.
//
// Atrous convolutions over small maps are where this matters: DeepLabV3's ASPP runs
// 3×3 convolutions with dilations 12, 24 and 36 over a 14×14 map padded by as much.
// Those of 24 and 36 read the input with their centre tap only and become 1×1
// convolutions (the pointwise strategy; the dilated 3×3 ran on the generic rule: 30 ms
// each); the one of 12 reads it with every tap but from few outputs each: 18 of the 42
// (output, tap) pairs per axis, which its 3×3 bands compute.
func TrimConvTaps(_ *Context, m *graph.Module) error {
	names := moduleNames(m)
	replaceNodes(m, func(f *graph.Func, n *graph.Node) []*graph.Node {
		c := resolveConvTaps(n)
		if c == nil {
			return nil
		}
		var repl []*graph.Node
		if t := c.trim(f, names); t != nil {
			repl, c = []*graph.Node{t}, resolveConvTaps(t)
		}
		if c != nil {
			if b := c.band(f, names, true); b != nil {
				return b
			}
		}
		return repl
	})
	return nil
}

const (
	// bandMinMACs: a Conv of fewer multiply-adds is not split in bands (the kernels
	// and the Concat it would add cost more than the products it saves).
	bandMinMACs = 1 << 24
	// bandMaxShare: a Conv is split in bands only where they compute at most this
	// share of its products.
	bandMaxShare = 0.75
	// maxBands: no Conv is split in more bands than this along an axis.
	maxBands = 4
	// maxBandWeights: along an axis, the bands' taps together (each band keeps its own
	// slice of the weights) are at most this many halves of the kernel's, so that a
	// model cannot make the split multiply its weights' memory by more than 2.5 an axis
	// (DeepLabV3's atrous 3×3: 5/3 an axis).
	maxBandWeights = 5
	// maxConvRank: Convs of more spatial axes are left as they are.
	maxConvRank = 3
)

// convTaps is a Conv the pass takes, resolved over its static input: kernel extents,
// window, each axis's output and padding and its bands.
type convTaps struct {
	n      *graph.Node
	x      *graph.Value
	w      *tensor.Tensor
	xs     tensor.Shape
	kernel []int64
	win    graph.Window
	axes   []graph.WindowAxis
	bands  [][]tapBand
}

// resolveConvTaps is n resolved, or nil when n is not a Conv of a static plain input
// and a constant float32 weight.
func resolveConvTaps(n *graph.Node) *convTaps {
	a, _ := n.Attrs.(*graph.ConvAttrs)
	if n.Op != graph.OpConv || a == nil || len(n.Outputs) != 1 {
		return nil
	}
	x, w := n.Input(0), n.ConstInput(1)
	if x == nil || w == nil || w.DType != tensor.Float32 || len(w.Shape) < 3 || len(w.Shape) > 2+maxConvRank || x.Type.Block != 0 {
		return nil
	}
	xs, ok := x.Type.ConstShape()
	if !ok || len(xs) != len(w.Shape) {
		return nil
	}
	c := &convTaps{n: n, x: x, w: w, xs: xs}
	for _, e := range w.Shape[2:] {
		c.kernel = append(c.kernel, int64(e))
	}
	if len(a.KernelShape) != 0 && !slices.Equal(a.KernelShape, c.kernel) {
		return nil
	}
	win, err := graph.ConvWindow(a, c.kernel)
	if err != nil {
		return nil
	}
	c.win = win
	for d := range c.kernel {
		ax := win.Axis(d, int64(xs[2+d]))
		if ax.Out <= 0 {
			return nil
		}
		c.axes = append(c.axes, ax)
		c.bands = append(c.bands, tapBands(c.kernel[d], int64(xs[2+d]), win.Strides[d], win.Dilations[d], ax))
	}
	return c
}

// explicit is the Conv's attributes with its padding resolved into explicit pads.
func (c *convTaps) explicit() *graph.ConvAttrs {
	rank := len(c.kernel)
	a := &graph.ConvAttrs{AutoPad: "NOTSET", Group: c.n.Attrs.(*graph.ConvAttrs).Group, KernelShape: slices.Clone(c.kernel),
		Strides: slices.Clone(c.win.Strides), Dilations: slices.Clone(c.win.Dilations), Pads: make([]int64, 2*rank)}
	for d, ax := range c.axes {
		a.Pads[d], a.Pads[rank+d] = ax.PadBegin, ax.PadEnd
	}
	return a
}

// setTaps makes axis d of a read taps [lo, hi] of the original kernel with pads pb, pe.
func setTaps(a *graph.ConvAttrs, d int, lo, hi, pb, pe int64) {
	a.KernelShape[d], a.Pads[d], a.Pads[len(a.KernelShape)+d] = hi-lo+1, pb, pe
	if hi == lo {
		a.Dilations[d] = 1
	}
}

// weights is a constant holding c's weights sliced to taps [lo[d], hi[d]].
func (c *convTaps) weights(f *graph.Func, names *freshNames, lo, hi []int64) *graph.Value {
	wc := graph.NewConst(names.fresh(c.n.Inputs[1].Name+"_taps"), sliceTaps(c.w, lo, hi))
	f.Consts = append(f.Consts, wc)
	return wc
}

// trim returns the Conv replacing c with its padding-only taps dropped, or nil when it
// has none (or every output reads only padding: the output is the bias, left as is).
func (c *convTaps) trim(f *graph.Func, names *freshNames) *graph.Node {
	rank := len(c.kernel)
	lo, hi := make([]int64, rank), make([]int64, rank)
	attrs := c.explicit()
	trimmed := false
	for d, ax := range c.axes {
		l, h, any := tapUnion(c.bands[d])
		if !any {
			return nil
		}
		dl := c.win.Dilations[d]
		pb, pe := ax.PadBegin-l*dl, ax.PadEnd-(c.kernel[d]-1-h)*dl
		if pb < 0 || pe < 0 {
			return nil
		}
		lo[d], hi[d] = l, h
		setTaps(attrs, d, l, h, pb, pe)
		trimmed = trimmed || h-l+1 < c.kernel[d]
	}
	if !trimmed {
		return nil
	}
	inputs := slices.Clone(c.n.Inputs)
	inputs[1] = c.weights(f, names, lo, hi)
	t := &graph.Node{Op: graph.OpConv, Name: c.n.Name, Inputs: inputs, Outputs: c.n.Outputs, Attrs: attrs}
	c.n.Outputs[0].Def = t
	return t
}

// macs is the Conv's multiply-adds.
func (c *convTaps) macs() int64 {
	v := int64(c.w.Shape.NumElements()) // M · C/g · taps
	for _, ax := range c.axes {
		v *= ax.Out
	}
	return v
}

// bandAxis is the axis whose bands save the most products (within maxBands and
// maxBandWeights, every band reading some input, at most bandMaxShare of them
// computed), or -1; with heavy,
// -1 for a Conv of fewer than bandMinMACs multiply-adds.
func (c *convTaps) bandAxis(heavy bool) int {
	if heavy && c.macs() < bandMinMACs {
		return -1
	}
	best, bestShare := -1, bandMaxShare
	for d, bands := range c.bands {
		if len(bands) < 2 || len(bands) > maxBands {
			continue
		}
		var kept, taps int64
		for _, b := range bands {
			if b.Lo > b.Hi {
				kept = -1
				break
			}
			kept += (b.O1 - b.O0) * (b.Hi - b.Lo + 1)
			taps += b.Hi - b.Lo + 1
		}
		if kept < 0 || 2*taps > maxBandWeights*c.kernel[d] {
			continue
		}
		if share := float64(kept) / float64(c.axes[d].Out*c.kernel[d]); share <= bestShare {
			best, bestShare = d, share
		}
	}
	return best
}

// band returns the Slices, Convs and Concat replacing c split in its bands along
// bandAxis, each band split along its other axes in turn, or nil where no axis gains.
// With heavy, only a Conv of at least bandMinMACs multiply-adds is split (its bands,
// lighter, are split whatever their size).
func (c *convTaps) band(f *graph.Func, names *freshNames, heavy bool) []*graph.Node {
	d := c.bandAxis(heavy)
	if d < 0 {
		return nil
	}
	rank, axis := len(c.kernel), int64(2+d)
	in, s, dl := int64(c.xs[axis]), c.win.Strides[d], c.win.Dilations[d]
	ints := func(name string, v int64) *graph.Value { return int64Const(f, names.fresh(name), v) }
	out := c.n.Outputs[0]
	var nodes []*graph.Node
	var parts []*graph.Value
	for i, b := range c.bands[d] {
		// the band reads input [in0, in1): its first output's lowest tap to its last
		// output's highest, clipped to the input
		first, last := b.O0*s-c.axes[d].PadBegin+b.Lo*dl, (b.O1-1)*s-c.axes[d].PadBegin+b.Hi*dl
		in0, in1 := max(0, first), min(in, last+1)
		k := b.Hi - b.Lo + 1
		pb := in0 - first
		pe := (b.O1-b.O0-1)*s + dl*(k-1) + 1 - (in1 - in0) - pb
		if pb < 0 || pe < 0 || in1 <= in0 {
			panic(fmt.Sprintf("BUG: trim-conv-taps: band %+v of %v reads [%d, %d) with pads %d, %d", b, c.n, in0, in1, pb, pe))
		}
		tag := fmt.Sprintf("%s/band%d_%d", cmp.Or(c.n.Name, out.Name), d, i)
		x := c.x
		if in0 > 0 || in1 < in {
			shape := typeShape(c.xs)
			shape[axis] = graph.Const(in1 - in0)
			x = &graph.Value{Name: names.fresh(c.x.Name + "_band"), Type: graph.TensorType(c.x.Type.DType, shape...)}
			sl := &graph.Node{Op: graph.OpSlice, Name: tag + "/rows", Outputs: []*graph.Value{x},
				Inputs: []*graph.Value{c.x, ints(tag+"_start", in0), ints(tag+"_end", in1), ints(tag+"_axis", axis)}}
			x.Def = sl
			nodes = append(nodes, sl)
		}
		lo, hi := make([]int64, rank), make([]int64, rank)
		for e := range rank {
			lo[e], hi[e] = 0, c.kernel[e]-1
		}
		lo[d], hi[d] = b.Lo, b.Hi
		attrs := c.explicit()
		setTaps(attrs, d, b.Lo, b.Hi, pb, pe)
		inputs := slices.Clone(c.n.Inputs)
		inputs[0], inputs[1] = x, c.weights(f, names, lo, hi)
		shape := slices.Clone(out.Type.Shape)
		shape[axis] = graph.Const(b.O1 - b.O0)
		y := &graph.Value{Name: names.fresh(out.Name + "_band"), Type: graph.TensorType(out.Type.DType, shape...)}
		conv := &graph.Node{Op: graph.OpConv, Name: tag, Inputs: inputs, Outputs: []*graph.Value{y}, Attrs: attrs}
		y.Def = conv
		if sub := resolveConvTaps(conv); sub != nil {
			if split := sub.band(f, names, false); split != nil {
				nodes, parts = append(nodes, split...), append(parts, y)
				continue
			}
		}
		nodes, parts = append(nodes, conv), append(parts, y)
	}
	cat := &graph.Node{Op: graph.OpConcat, Name: cmp.Or(c.n.Name, out.Name) + "/bands", Inputs: parts, Outputs: []*graph.Value{out}, Attrs: &graph.AxisAttrs{Axis: axis}}
	out.Def = cat
	return append(nodes, cat)
}

// typeShape is a static shape as dims.
func typeShape(s tensor.Shape) []graph.Dim {
	dims := make([]graph.Dim, len(s))
	for i, e := range s {
		dims[i] = graph.Const(int64(e))
	}
	return dims
}

// tapBand is a run of outputs [O0, O1) along one axis that read inside the input with
// the same taps [Lo, Hi] (Lo > Hi: none, the outputs read only padding).
type tapBand struct{ O0, O1, Lo, Hi int64 }

// tapBands are the runs of outputs of ax, in order, that read inside an input of extent
// in with the same taps of a kernel of k taps: output o's tap t reads o·s − pb + t·d,
// inside where 0 ≤ o·s − pb + t·d < in, an interval of taps.
func tapBands(k, in, stride, dilation int64, ax graph.WindowAxis) []tapBand {
	var bands []tapBand
	for o := range ax.Out {
		at := o*stride - ax.PadBegin // where tap 0 reads
		lo := max(0, ceilDiv(-at, dilation))
		hi := min(k-1, floorDiv(in-1-at, dilation))
		if lo > hi {
			lo, hi = 1, 0 // one form for "none", so that such outputs make one band
		}
		if l := len(bands) - 1; l >= 0 && bands[l].Lo == lo && bands[l].Hi == hi {
			bands[l].O1 = o + 1
			continue
		}
		bands = append(bands, tapBand{O0: o, O1: o + 1, Lo: lo, Hi: hi})
	}
	return bands
}

// tapUnion is the smallest tap range holding every band's taps; ok is false where every
// output reads only padding.
func tapUnion(bands []tapBand) (lo, hi int64, ok bool) {
	lo, hi = -1, -1
	for _, b := range bands {
		if b.Lo > b.Hi {
			continue
		}
		if lo < 0 || b.Lo < lo {
			lo = b.Lo
		}
		hi = max(hi, b.Hi)
	}
	return lo, hi, lo >= 0
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func ceilDiv(a, b int64) int64 { return -floorDiv(-a, b) }

// sliceTaps is the float32 weight w [M, C/g, k…] restricted to taps [lo[d], hi[d]]
// along each spatial axis d.
func sliceTaps(w *tensor.Tensor, lo, hi []int64) *tensor.Tensor {
	src := w.Data.([]float32)
	shape := slices.Clone(w.Shape)
	for d := range lo {
		shape[2+d] = int(hi[d] - lo[d] + 1)
	}
	out := make([]float32, shape.NumElements())
	idx := make([]int, len(shape))
	for i := range out {
		// idx is the multi-index of out[i]; its source index adds lo along the taps
		off := 0
		for d := range shape {
			v := idx[d]
			if d >= 2 {
				v += int(lo[d-2])
			}
			off = off*w.Shape[d] + v
		}
		out[i] = src[off]
		for d := len(shape) - 1; d >= 0; d-- {
			if idx[d]++; idx[d] < shape[d] {
				break
			}
			idx[d] = 0
		}
	}
	return tensor.MustFromSlice(shape, out)
}
