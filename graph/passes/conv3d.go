package passes

import (
	"cmp"
	"strconv"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

// Conv3DAsConv2D rewrites a 3-D Conv (a float32 [N, C, T, H, W] input of static shape,
// a constant float32 [M, C/g, kT, kH, kW] weight) into one 2-D Conv over the frames of
// its output, each frame's input the kT frames its window reads stacked on the channel
// axis:
//
//	y[n, m, t, :, :] = conv2d(z[n·T' + t], W')   z[n·T' + t, c·kT + d] = xp[n, c, t·sT + d·dT]
//
// where xp is x padded with zero frames along T and W'[m, c·kT + d] = W[m, c, d]
// (channel-major, so each group's channels stay contiguous and groups carry over). The
// graph: Pad along T (when padded), Transpose to [N, T, C, H, W], one strided Slice of
// T per temporal tap, Unsqueeze and Concat on a new axis after C (when kT > 1), Reshape
// to [N·T', C·kT, H, W], the 2-D Conv with the spatial kernel, strides, dilations, pads
// and bias, Reshape to [N, T', M, H', W'] and Transpose back. The 2-D Conv takes the
// CPU's blocked strategies, where the 3-D one ran on the generic rule: r3d_18's
// inference took 3.9 s at two threads there, 19 times ONNX Runtime's. The stacked
// input is kT times the input's size.
func Conv3DAsConv2D(_ *Context, m *graph.Module) error {
	names := moduleNames(m)
	replaceNodes(m, func(f *graph.Func, n *graph.Node) []*graph.Node {
		if n.Op != graph.OpConv {
			return nil
		}
		return conv3DAsConv2D(f, n, names)
	})
	return nil
}

// maxStackedTaps and maxStackedBytes bound the rewrite: it adds three nodes per
// temporal tap and a stacked input kT times the input's size, so a Conv with a longer
// temporal kernel (video networks use 3 to 7), or whose stacked input would exceed
// 1 GiB, stays 3-D on the generic rule rather than let a small model file ask for
// millions of nodes or a huge tensor.
const (
	maxStackedTaps  = 16
	maxStackedBytes = 1 << 30
)

// conv3DAsConv2D returns the nodes replacing n, or nil when n is not a 3-D Conv of a
// static float32 input with a constant float32 weight, or exceeds the bounds above.
func conv3DAsConv2D(f *graph.Func, n *graph.Node, names *freshNames) []*graph.Node {
	c := resolveConvTaps(n)
	if c == nil || len(c.kernel) != 3 || c.x.Type.DType != tensor.Float32 {
		return nil
	}
	out := n.Outputs[0]
	ys, ok := out.Type.ConstShape()
	if !ok || len(ys) != 5 {
		return nil
	}
	xs, w := c.xs, c.w
	nb, ch, tIn, h, wd := int64(xs[0]), int64(xs[1]), int64(xs[2]), int64(xs[3]), int64(xs[4])
	kt, st, dt, ta := c.kernel[0], c.win.Strides[0], c.win.Dilations[0], c.axes[0]
	to, m, ho, wo := ta.Out, int64(ys[1]), int64(ys[3]), int64(ys[4])
	if int64(ys[2]) != to || int64(ys[0]) != nb {
		return nil
	}
	if kt > maxStackedTaps || float64(nb)*float64(to)*float64(ch)*float64(kt)*float64(h)*float64(wd)*4 > maxStackedBytes {
		return nil
	}
	tag := cmp.Or(n.Name, out.Name)
	ints := func(name string, v ...int64) *graph.Value { return int64Const(f, names.fresh(name), v...) }
	value := func(name string, dims ...int64) *graph.Value {
		return &graph.Value{Name: names.fresh(name), Type: graph.TensorType(tensor.Float32, shapeDims(dims)...)}
	}
	var nodes []*graph.Node
	add := func(op graph.Op, name string, attrs any, o *graph.Value, in ...*graph.Value) *graph.Value {
		nd := &graph.Node{Op: op, Name: tag + "/" + name, Inputs: in, Outputs: []*graph.Value{o}, Attrs: attrs}
		o.Def = nd
		nodes = append(nodes, nd)
		return o
	}

	x, tp := c.x, tIn+ta.PadBegin+ta.PadEnd
	if ta.PadBegin > 0 || ta.PadEnd > 0 {
		pads := ints(tag+"_frame_pads", 0, 0, ta.PadBegin, 0, 0, 0, 0, ta.PadEnd, 0, 0)
		x = add(graph.OpPad, "frame_pad", &graph.PadAttrs{Mode: "constant"}, value(x.Name+"_framepad", nb, ch, tp, h, wd), x, pads)
	}
	x = add(graph.OpTranspose, "frames", &graph.TransposeAttrs{Perm: []int64{0, 2, 1, 3, 4}}, value(x.Name+"_frames", nb, tp, ch, h, wd), x)
	taps := make([]*graph.Value, kt)
	for d := range kt {
		lo, span := d*dt, st*(to-1)+1
		tx := x
		if lo > 0 || lo+span < tp || st > 1 {
			tx = add(graph.OpSlice, "tap"+strconv.FormatInt(d, 10), nil, value(x.Name+"_tap", nb, to, ch, h, wd),
				x, ints(tag+"_tap_start", lo), ints(tag+"_tap_end", lo+span), ints(tag+"_tap_axis", 1), ints(tag+"_tap_step", st))
		}
		taps[d] = tx
	}
	stacked := taps[0]
	if kt > 1 {
		axis := ints(tag+"_tap_axis3", 3)
		for d, tx := range taps {
			taps[d] = add(graph.OpUnsqueeze, "tap"+strconv.Itoa(d)+"_axis", nil, value(tx.Name+"_u", nb, to, ch, 1, h, wd), tx, axis)
		}
		stacked = add(graph.OpConcat, "taps", &graph.AxisAttrs{Axis: 3}, value(x.Name+"_taps", nb, to, ch, kt, h, wd), taps...)
	}
	z := add(graph.OpReshape, "stack", &graph.ReshapeAttrs{}, value(x.Name+"_stacked", nb*to, ch*kt, h, wd), stacked, ints(tag+"_stack_shape", nb*to, ch*kt, h, wd))

	w4, err := w.Reshape(tensor.Shape{w.Shape[0], w.Shape[1] * int(kt), w.Shape[3], w.Shape[4]})
	if err != nil {
		return nil
	}
	wc := graph.NewConst(names.fresh(n.Inputs[1].Name+"_2d"), w4)
	f.Consts = append(f.Consts, wc)
	e := c.explicit()
	attrs := &graph.ConvAttrs{AutoPad: "NOTSET", Group: e.Group, KernelShape: e.KernelShape[1:], Strides: e.Strides[1:],
		Dilations: e.Dilations[1:], Pads: []int64{e.Pads[1], e.Pads[2], e.Pads[4], e.Pads[5]}}
	inputs := []*graph.Value{z, wc}
	if len(n.Inputs) > 2 && n.Inputs[2] != nil {
		inputs = append(inputs, n.Inputs[2])
	}
	y := value(out.Name+"_frames", nb*to, m, ho, wo)
	conv := &graph.Node{Op: graph.OpConv, Name: n.Name, Inputs: inputs, Outputs: []*graph.Value{y}, Attrs: attrs}
	y.Def = conv
	nodes = append(nodes, conv)
	y = add(graph.OpReshape, "unstack", &graph.ReshapeAttrs{}, value(out.Name+"_byframe", nb, to, m, ho, wo), y, ints(tag+"_unstack_shape", nb, to, m, ho, wo))
	back := &graph.Node{Op: graph.OpTranspose, Name: tag + "/unframes", Inputs: []*graph.Value{y}, Outputs: []*graph.Value{out},
		Attrs: &graph.TransposeAttrs{Perm: []int64{0, 2, 1, 3, 4}}}
	out.Def = back
	return append(nodes, back)
}

// shapeDims is a static shape as dims.
func shapeDims(v []int64) []graph.Dim {
	dims := make([]graph.Dim, len(v))
	for i, e := range v {
		dims[i] = graph.Const(e)
	}
	return dims
}
