package passes

import (
	"math"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

// FoldBatchNorm folds an inference-mode BatchNormalization into the Conv before it
// (when the Conv's result has no other reader and the weights, bias and normalization
// parameters are constants): W' = W·s and b' = (b − mean)·s + B per output channel,
// with s = scale/√(var + ε). The Conv then produces the BatchNormalization's output.
func FoldBatchNorm(_ *Context, m *graph.Module) error {
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
