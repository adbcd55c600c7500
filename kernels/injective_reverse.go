package kernels

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// computeReverseSequence reverses the first lens[b] steps along time_axis of each batch
// entry b (batch_axis), keeping the rest. A length outside [0, T] fails the kernel: a
// negative one is sent to an index below -T, a longer one reads at T or beyond, and
// te.CheckedIndex reports both. The lengths' extent must be the batch axis's.
func computeReverseSequence(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	x, lens := in[0].T, in[1].T
	a := attrs[graph.ReverseSequenceAttrs](n)
	r := len(x.Shape)
	ta, err := NormAxis(a.TimeAxis, r)
	if err != nil {
		return nil, err
	}
	ba, err := NormAxis(a.BatchAxis, r)
	if err != nil {
		return nil, err
	}
	if ba == ta || len(lens.Shape) != 1 || !lens.DT.IsInt() {
		return nil, Unsupported("ReverseSequence with batch_axis %d, time_axis %d, lengths %v%v", a.BatchAxis, a.TimeAxis, lens.DT, lens.Shape)
	}
	if !loopir.Equal(lens.Shape[0], x.Shape[ba]) {
		return nil, Unsupported("ReverseSequence with %v lengths for a batch of %v", lens.Shape[0], x.Shape[ba])
	}
	steps := x.Shape[ta]
	out := te.Compute("reverse_sequence", x.Shape, func(i []loopir.Expr) loopir.Expr {
		l := lens.At(i[ba])
		if l.DType() != tensor.Int64 {
			l = te.Cast(tensor.Int64, l)
		}
		t := i[ta]
		src := te.Select(loopir.Bin(loopir.LT, t, l), sub(sub(l, i64(1)), t), t)
		src = te.Select(loopir.Bin(loopir.LT, l, i64(0)), sub(i64(-1), steps), src)
		idx := append([]loopir.Expr{}, i...)
		idx[ta] = te.CheckedIndex(src, steps)
		return x.At(idx...)
	})
	return []*te.Tensor{out}, nil
}
