package graph

import "reflect"

// The optimizers of ONNX's training domain (ai.onnx.preview.training, opset 1): each
// takes a learning rate R and an update count T (scalars), then n groups of tensors, and
// returns the n updated tensors of each group it updates. Every output is elementwise
// over its X.

// AdagradAttrs as in ONNX.
type AdagradAttrs struct {
	DecayFactor     float32 `attr:"decay_factor"`
	Epsilon         float32 `attr:"epsilon" default:"1e-6"`
	NormCoefficient float32 `attr:"norm_coefficient"`
}

// AdamAttrs as in ONNX.
type AdamAttrs struct {
	Alpha               float32 `attr:"alpha" default:"0.9"`
	Beta                float32 `attr:"beta" default:"0.999"`
	Epsilon             float32 `attr:"epsilon" default:"1e-6"`
	NormCoefficient     float32 `attr:"norm_coefficient"`
	NormCoefficientPost float32 `attr:"norm_coefficient_post"`
}

// MomentumAttrs as in ONNX; Mode is "standard" or "nesterov".
type MomentumAttrs struct {
	Alpha           float32 `attr:"alpha" required:"true"`
	Beta            float32 `attr:"beta" required:"true"`
	Mode            string  `attr:"mode" required:"true"`
	NormCoefficient float32 `attr:"norm_coefficient" required:"true"`
}

// OptimizerGroups is the number of tensor groups an optimizer reads after R and T: X and
// G, then H (Adagrad), V (Momentum) or V and H (Adam).
func OptimizerGroups(op Op) int {
	switch op {
	case OpAdagrad, OpMomentum:
		return 3
	case OpAdam:
		return 4
	}
	return 0
}

// OptimizerOutputs is the number of tensor groups an optimizer returns: X, then H
// (Adagrad), V (Momentum) or V and H (Adam).
func OptimizerOutputs(op Op) int { return OptimizerGroups(op) - 1 }

func trainingOps() []OpInfo {
	row := func(op Op, attrs reflect.Type) OpInfo {
		return OpInfo{Op: op, Domain: TrainingDomain, MinIn: 2 + OptimizerGroups(op), MaxIn: -1, MinOut: 1, MaxOut: -1, Attrs: attrs, Pattern: Opaque, Infer: inferOptimizer}
	}
	return []OpInfo{
		row(OpAdagrad, reflect.TypeFor[AdagradAttrs]()),
		row(OpAdam, reflect.TypeFor[AdamAttrs]()),
		row(OpMomentum, reflect.TypeFor[MomentumAttrs]()),
	}
}

// inferOptimizer: output group g, tensor i has the type of X_i; R and T are scalars (or
// tensors of one element) and every group's tensor i has X_i's shape.
func inferOptimizer(_ *InferCtx, n *Node) ([]Type, error) {
	groups, outs := OptimizerGroups(n.Op), OptimizerOutputs(n.Op)
	rest := len(n.Inputs) - 2
	if rest <= 0 || rest%groups != 0 {
		return nil, Inferf(n, "%d inputs after R and T, want a multiple of %d", rest, groups)
	}
	k := rest / groups
	if len(n.Outputs) != outs*k {
		return nil, Inferf(n, "%d outputs for %d tensors of %d groups, want %d", len(n.Outputs), k, groups, outs*k)
	}
	if m := n.Op; m == OpMomentum {
		if mode := n.Attrs.(*MomentumAttrs).Mode; mode != "standard" && mode != "nesterov" {
			return nil, Inferf(n, "mode %q, want \"standard\" or \"nesterov\"", mode)
		}
	}
	for i := 0; i < 2; i++ {
		t, err := TensorIn(n, i)
		if err != nil {
			return nil, err
		}
		if s, ok := t.ConstShape(); !t.UnknownRank && ok && s.NumElements() != 1 {
			return nil, Inferf(n, "input %d is %v, want a scalar", i, t)
		}
	}
	types := make([]Type, len(n.Outputs))
	for i := 0; i < k; i++ {
		x, err := TensorIn(n, 2+i)
		if err != nil {
			return nil, err
		}
		if !x.DType.IsFloat() {
			return nil, Inferf(n, "X%d is %v, want a floating-point tensor", i, x)
		}
		for g := 1; g < groups; g++ {
			y, err := TensorIn(n, 2+g*k+i)
			if err != nil {
				return nil, err
			}
			if y.DType != x.DType || (!x.UnknownRank && !y.UnknownRank && len(x.Shape) != len(y.Shape)) {
				return nil, Inferf(n, "input %d is %v, want the type of X%d (%v)", 2+g*k+i, y, i, x)
			}
		}
		x.Known = nil
		for g := 0; g < outs; g++ {
			types[g*k+i] = x
		}
	}
	return types, nil
}
