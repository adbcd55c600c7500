package kernels

import (
	"math"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// The loss ops: NegativeLogLikelihoodLoss on log-probabilities and
// SoftmaxCrossEntropyLoss on scores (LogSoftmax over the class axis, then the same loss).
// Inputs are [N, C, d1..dk] with targets [N, d1..dk] of class indices (int32 or int64)
// and optional per-class weights [C]. A target equal to ignore_index contributes
// nothing, to the loss or to the weight total; any other target outside [0, C) fails the
// kernel (an input error naming the node, as the reference refuses it) and reads class 0
// meanwhile. Reductions: none ([N, d1..dk]), sum, and mean (the sum divided by the total
// weight of the targets not ignored; 0 when every target is ignored, NaN when there are
// none).

// lossComputes: the loss family.
func lossComputes() map[graph.Op]ComputeFunc {
	return map[graph.Op]ComputeFunc{
		graph.OpNegativeLogLikelihoodLoss: computeNLLLoss,
		graph.OpSoftmaxCrossEntropyLoss:   computeSCELoss,
	}
}

func computeNLLLoss(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	if err := lossInputs(n, in); err != nil {
		return nil, err
	}
	loss, err := NLLLoss(in[0].T, in[1].T, lossWeight(in), attrs[graph.LossAttrs](n))
	if err != nil {
		return nil, err
	}
	return []*te.Tensor{loss}, nil
}

func computeSCELoss(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	if err := lossInputs(n, in); err != nil {
		return nil, err
	}
	logProb, err := SoftmaxAxis(in[0].T, 1, graph.OpLogSoftmax)
	if err != nil {
		return nil, err
	}
	loss, err := NLLLoss(logProb, in[1].T, lossWeight(in), attrs[graph.LossAttrs](n))
	if err != nil {
		return nil, err
	}
	return []*te.Tensor{loss, logProb}, nil
}

// lossInputs checks the element types and ranks a loss definition handles.
func lossInputs(n *graph.Node, in []Input) error {
	x, target := in[0].T, in[1].T
	if !plainFloat(x.DT) {
		return Unsupported("%v on %v", n.Op, x.DT)
	}
	if len(x.Shape) < 2 || len(target.Shape) != len(x.Shape)-1 {
		return Unsupported("%v on input of rank %d with target of rank %d", n.Op, len(x.Shape), len(target.Shape))
	}
	if !target.DT.IsInt() {
		return Unsupported("%v with %v targets", n.Op, target.DT)
	}
	if w := lossWeight(in); w != nil && (w.DT != x.DT || len(w.Shape) != 1) {
		return Unsupported("%v with weights of %v and rank %d on %v", n.Op, w.DT, len(w.Shape), x.DT)
	}
	return nil
}

// lossWeight is the optional weight input, or nil.
func lossWeight(in []Input) *te.Tensor {
	if len(in) > 2 && in[2].Present() {
		return in[2].T
	}
	return nil
}

// NLLLoss is the negative log-likelihood loss of log-probabilities lp [N, C, d1..dk]
// against target [N, d1..dk], with optional weights [C], under a's reduction and
// ignore_index.
func NLLLoss(lp, target, weight *te.Tensor, a *graph.LossAttrs) (*te.Tensor, error) {
	dt := lp.DT
	classes := lp.Shape[1]
	zero := loopir.Float(0, dt)
	// ignored reports a target that contributes nothing; class is the class a target
	// reads, checked against [0, C) (the check's extent is 0 for a negative target, so
	// that every negative one fails; an ignored target reads class 0 unchecked)
	ignored := func(t loopir.Expr) loopir.Expr {
		if a.IgnoreIndex == graph.AbsentInt {
			return nil
		}
		return loopir.Bin(loopir.EQ, t, i64(a.IgnoreIndex))
	}
	class := func(t loopir.Expr) loopir.Expr {
		if ign := ignored(t); ign != nil {
			t = te.Select(ign, i64(0), t)
		}
		extent := te.Select(loopir.Bin(loopir.LT, t, i64(0)), i64(0), classes)
		return te.CheckedIndex(t, extent)
	}
	// at is the index into lp of the target's class for target index i
	at := func(i []loopir.Expr, c loopir.Expr) []loopir.Expr {
		return append([]loopir.Expr{i[0], c}, i[1:]...)
	}
	targetAt := func(i []loopir.Expr) loopir.Expr { return te.Cast(tensor.Int64, target.At(i...)) }
	weightOf := func(c loopir.Expr) loopir.Expr {
		if weight == nil {
			return loopir.Float(1, dt)
		}
		return weight.At(c)
	}
	keep := func(t, v loopir.Expr) loopir.Expr {
		if ign := ignored(t); ign != nil {
			return te.Select(ign, zero, v)
		}
		return v
	}
	term := func(i []loopir.Expr) loopir.Expr {
		t := targetAt(i)
		c := class(t)
		return keep(t, te.Mul(te.Sub(zero, lp.At(at(i, c)...)), weightOf(c)))
	}
	switch a.Reduction {
	case "none":
		return te.Compute("nll_loss", target.Shape, term), nil
	case "sum", "mean":
	default:
		return nil, Unsupported("loss with reduction %q", a.Reduction)
	}
	all := make([]bool, len(target.Shape))
	for k := range all {
		all[k] = true
	}
	r := Reduction{X: target, Axes: all}
	sum := r.Compute("nll_sum", te.Sum, func(x, _ []loopir.Expr) loopir.Expr { return term(x) })
	if a.Reduction == "sum" {
		return sum, nil
	}
	wsum := r.Compute("nll_weight", te.Sum, func(x, _ []loopir.Expr) loopir.Expr {
		t := targetAt(x)
		return keep(t, weightOf(class(t)))
	})
	empty := loopir.Bin(loopir.EQ, r.Count(), i64(0))
	return r.Apply("nll_mean", func(i []loopir.Expr) loopir.Expr {
		w := wsum.At(i...)
		none := te.Select(empty, loopir.Float(math.NaN(), dt), zero)
		return te.Select(loopir.Bin(loopir.EQ, w, zero), none, te.Div(sum.At(i...), w))
	}), nil
}
