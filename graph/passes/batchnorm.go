package passes

import (
	"math"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

// FoldBatchNorm folds an inference-mode BatchNormalization into the Conv before it
// (when the Conv's result has no other reader and the weights, bias and normalization
// parameters are constants): W' = W·s and b' = (b − mean)·s + B per output channel,
// with s = scale/√(var + ε). The Conv then produces the BatchNormalization's output. An
// inference-mode BatchNormalization that folds into no Conv, with constant float
// parameters, becomes x·s + (B − mean·s) with constants of shape [C, 1, ...]: two
// elementwise ops that fuse into the kernel producing x, where the BatchNormalization
// would be a kernel of its own.
func FoldBatchNorm(_ *Context, m *graph.Module) error {
	names := moduleNames(m)
	uses := map[*graph.Value]int{}
	m.Main.Funcs(func(f *graph.Func) {
		for _, n := range f.Nodes {
			for _, v := range n.Inputs {
				uses[v]++
			}
		}
		for _, r := range f.Results {
			uses[r] += 2
		}
	})
	m.Main.Funcs(func(f *graph.Func) {
		kept := f.Nodes[:0:0]
		for _, n := range f.Nodes {
			if n.Op == graph.OpBatchNormalization && foldInto(f, n, uses) {
				continue // the Conv now writes its output
			}
			if n.Op == graph.OpBatchNormalization {
				if affine := batchNormAffine(f, n, names); affine != nil {
					kept = append(kept, affine...)
					continue
				}
			}
			kept = append(kept, n)
		}
		f.Nodes = kept
	})
	return nil
}

// foldInto folds bn into the Conv producing its input; false leaves both unchanged.
func foldInto(f *graph.Func, bn *graph.Node, uses map[*graph.Value]int) bool {
	a, _ := bn.Attrs.(*graph.BatchNormAttrs)
	x := bn.Input(0)
	if a == nil || a.TrainingMode != 0 || len(bn.Outputs) != 1 || x == nil || x.Def == nil || x.Def.Op != graph.OpConv || uses[x] != 1 {
		return false
	}
	conv := x.Def
	w := conv.ConstInput(1)
	if w == nil || w.DType != tensor.Float32 || len(w.Shape) < 3 {
		return false
	}
	mch := w.Shape[0]
	params := make([][]float64, 4)
	for i := range params {
		c := bn.ConstInput(1 + i)
		if c == nil || c.Len() != mch || !c.DType.IsFloat() {
			return false
		}
		params[i] = c.Float64s()
	}
	scale, shift, mean, variance := params[0], params[1], params[2], params[3]
	bias := make([]float64, mch)
	if b := conv.ConstInput(2); b != nil {
		if b.Len() != mch || b.DType != tensor.Float32 {
			return false
		}
		copy(bias, b.Float64s())
	} else if conv.Input(2) != nil {
		return false // a bias computed at run time
	}
	per := w.Len() / mch
	wv := w.Float64s()
	nw := make([]float64, len(wv))
	nb := make([]float64, mch)
	for o := 0; o < mch; o++ {
		s := scale[o] / math.Sqrt(variance[o]+float64(a.Epsilon))
		for k := 0; k < per; k++ {
			nw[o*per+k] = wv[o*per+k] * s
		}
		nb[o] = (bias[o]-mean[o])*s + shift[o]
	}
	wc := graph.NewConst(conv.Inputs[1].Name+"_bn", tensor.FromFloat64s(tensor.Float32, w.Shape.Clone(), nw))
	bc := graph.NewConst(bn.Outputs[0].Name+"_bias", tensor.FromFloat64s(tensor.Float32, tensor.Shape{mch}, nb))
	f.Consts = append(f.Consts, wc, bc)
	inputs := append([]*graph.Value{}, conv.Inputs...)
	for len(inputs) < 3 {
		inputs = append(inputs, nil)
	}
	inputs[1], inputs[2] = wc, bc
	conv.Inputs = inputs
	out := bn.Outputs[0]
	out.Def = conv
	conv.Outputs[0] = out
	return true
}

// batchNormAffine returns the Mul and Add computing the inference-mode bn as
// x·s + t, s = scale/√(var + ε) and t = B − mean·s per channel (axis 1), or nil when bn
// is in training mode, its input is not a float32 tensor of rank 2 or more with a known
// channel count, or a parameter is not a float constant of C elements.
func batchNormAffine(f *graph.Func, bn *graph.Node, names *freshNames) []*graph.Node {
	a, _ := bn.Attrs.(*graph.BatchNormAttrs)
	x := bn.Input(0)
	if a == nil || a.TrainingMode != 0 || len(bn.Outputs) != 1 || x == nil || x.Type.DType != tensor.Float32 ||
		x.Type.UnknownRank || len(x.Type.Shape) < 2 {
		return nil
	}
	ch, ok := x.Type.Shape[1].Value()
	if !ok {
		return nil
	}
	params := make([][]float64, 4)
	for i := range params {
		c := bn.ConstInput(1 + i)
		if c == nil || int64(c.Len()) != ch || !c.DType.IsFloat() {
			return nil
		}
		params[i] = c.Float64s()
	}
	scale, shift, mean, variance := params[0], params[1], params[2], params[3]
	s, t := make([]float64, ch), make([]float64, ch)
	for o := range s {
		s[o] = scale[o] / math.Sqrt(variance[o]+float64(a.Epsilon))
		t[o] = shift[o] - mean[o]*s[o]
	}
	shape := tensor.Shape{int(ch)}
	for range len(x.Type.Shape) - 2 {
		shape = append(shape, 1)
	}
	out := bn.Outputs[0]
	sc := graph.NewConst(names.fresh(out.Name+"_bn_scale"), tensor.FromFloat64s(tensor.Float32, shape, s))
	tc := graph.NewConst(names.fresh(out.Name+"_bn_shift"), tensor.FromFloat64s(tensor.Float32, shape.Clone(), t))
	f.Consts = append(f.Consts, sc, tc)
	mul := &graph.Node{Op: graph.OpMul, Inputs: []*graph.Value{x, sc}}
	if bn.Name != "" {
		mul.Name = bn.Name + "/scale"
	}
	scaled := &graph.Value{Name: names.fresh(out.Name + "_scaled"), Type: out.Type, Def: mul}
	mul.Outputs = []*graph.Value{scaled}
	add := &graph.Node{Op: graph.OpAdd, Name: bn.Name, Inputs: []*graph.Value{scaled, tc}, Outputs: []*graph.Value{out}}
	out.Def = add
	return []*graph.Node{mul, add}
}
