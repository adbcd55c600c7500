package passes

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

// ConvTransposeAsConv rewrites a 2-D ConvTranspose whose windows do not overlap (stride
// equal to a square kernel b×b, no padding, dilation or output padding, one group, a
// constant float32 weight) into a 1×1 Conv to M·b·b channels followed by a CRD
// DepthToSpace of block b. Each output pixel (b·h+i, b·w+j) of channel m then reads
// exactly one input pixel (h, w):
//
//	y[n, m, b·h+i, b·w+j] = Σc x[n, c, h, w]·W[c, m, i, j] + B[m]
//	                      = conv1x1(x, W')[n, m·b·b + i·b + j, h, w]
//
// with W'[m·b·b + i·b + j, c] = W[c, m, i, j] and the bias repeated b·b times: the
// same products, summed over c. The Conv takes the blocked matrix-product strategies and the
// DepthToSpace is a copy the readers' elementwise ops fuse into; the transposed
// convolution's own kernel is a gather the generic schedule cannot vectorize.
func ConvTransposeAsConv(_ *Context, m *graph.Module) error {
	names := moduleNames(m)
	replaceNodes(m, func(f *graph.Func, n *graph.Node) []*graph.Node {
		if n.Op != graph.OpConvTranspose {
			return nil
		}
		return transposedAsConv(f, n, names)
	})
	return nil
}

// transposedAsConv returns the nodes replacing n (a Conv and, for a block above 1, a
// DepthToSpace writing n's output), or nil when n is not a non-overlapping ConvTranspose.
func transposedAsConv(f *graph.Func, n *graph.Node, names *freshNames) []*graph.Node {
	b, ok := nonOverlappingBlock(n)
	if !ok {
		return nil
	}
	w := n.ConstInput(1)
	c, mo := int64(w.Shape[0]), int64(w.Shape[1])
	x := n.Input(0)
	if v, ok := x.Type.Shape[1].Value(); !ok || v != c {
		return nil
	}
	var bias []float64
	if n.Input(2) != nil {
		bt := n.ConstInput(2)
		if bt == nil || bt.DType != tensor.Float32 || int64(bt.Len()) != mo {
			return nil
		}
		bias = bt.Float64s()
	}
	bb := b * b
	wv := w.Float64s()
	nw := make([]float64, len(wv))
	for ci := range c {
		for m := range mo {
			for k := range bb {
				nw[((m*bb+k)*c)+ci] = wv[(ci*mo+m)*bb+k]
			}
		}
	}
	out := n.Outputs[0]
	wc := graph.NewConst(names.fresh(n.Inputs[1].Name+"_1x1"), tensor.FromFloat64s(tensor.Float32, tensor.Shape{int(mo * bb), int(c), 1, 1}, nw))
	f.Consts = append(f.Consts, wc)
	inputs := []*graph.Value{x, wc}
	if bias != nil {
		nb := make([]float64, mo*bb)
		for i := range nb {
			nb[i] = bias[int64(i)/bb]
		}
		bc := graph.NewConst(names.fresh(n.Inputs[2].Name+"_1x1"), tensor.FromFloat64s(tensor.Float32, tensor.Shape{int(mo * bb)}, nb))
		f.Consts = append(f.Consts, bc)
		inputs = append(inputs, bc)
	}
	conv := &graph.Node{Op: graph.OpConv, Name: n.Name, Inputs: inputs, Attrs: &graph.ConvAttrs{
		AutoPad: "NOTSET", Group: 1, KernelShape: []int64{1, 1}, Strides: []int64{1, 1},
		Dilations: []int64{1, 1}, Pads: []int64{0, 0, 0, 0},
	}}
	if b == 1 {
		conv.Outputs = []*graph.Value{out}
		out.Def = conv
		return []*graph.Node{conv}
	}
	xs := x.Type.Shape
	mid := &graph.Value{
		Name: names.fresh(out.Name + "_blocks"),
		Type: graph.TensorType(tensor.Float32, xs[0], graph.Const(mo*bb), xs[2], xs[3]),
		Def:  conv,
	}
	conv.Outputs = []*graph.Value{mid}
	d2s := &graph.Node{Op: graph.OpDepthToSpace, Inputs: []*graph.Value{mid}, Outputs: []*graph.Value{out},
		Attrs: &graph.DepthToSpaceAttrs{BlockSize: b, Mode: "CRD"}}
	if n.Name != "" {
		d2s.Name = n.Name + "/depth_to_space"
	}
	out.Def = d2s
	return []*graph.Node{conv, d2s}
}

// nonOverlappingBlock is b when n is a 2-D, one-group ConvTranspose of a float32 NCHW
// input with a constant [C, M, b, b] float32 weight, stride b on both axes and no
// padding, dilation, output padding or output shape.
func nonOverlappingBlock(n *graph.Node) (int64, bool) {
	a, _ := n.Attrs.(*graph.ConvTransposeAttrs)
	x, w := n.Input(0), n.ConstInput(1)
	if a == nil || len(n.Outputs) != 1 || x == nil || w == nil || w.DType != tensor.Float32 || len(w.Shape) != 4 ||
		x.Type.DType != tensor.Float32 || len(x.Type.Shape) != 4 || x.Type.Block != 0 {
		return 0, false
	}
	b := int64(w.Shape[2])
	if int64(w.Shape[3]) != b || a.Group != 1 || len(a.OutputShape) != 0 {
		return 0, false
	}
	// with stride = kernel and no explicit pads, every auto_pad mode pads nothing:
	// the full extent s·(in−1)+k is already in·s
	all := func(v []int64, want int64, n int) bool {
		if len(v) == 0 {
			return true
		}
		if len(v) != n {
			return false
		}
		for _, e := range v {
			if e != want {
				return false
			}
		}
		return true
	}
	if !all(a.KernelShape, b, 2) || !all(a.Dilations, 1, 2) || !all(a.Pads, 0, 4) || !all(a.OutputPadding, 0, 2) {
		return 0, false
	}
	if len(a.Strides) != 2 || a.Strides[0] != b || a.Strides[1] != b {
		if b != 1 || !all(a.Strides, 1, 2) {
			return 0, false
		}
	}
	return b, true
}
