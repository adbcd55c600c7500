package graph

import (
	"reflect"

	"github.com/kilnrt/kiln/tensor"
)

// AttentionMaskAttrs: Value is the scale of the masked positions; To is the result's
// tensor.DType number (f32 or f64), as in CastAttrs.
type AttentionMaskAttrs struct {
	Value float32 `attr:"value"`
	To    int64   `attr:"to" required:"true"`
}

// attentionMaskOps: kiln.AttentionMask is the additive attention mask of BERT-style
// models, y = (1 − Cast(m, to))·value elementwise, computed in the output dtype, for a
// mask m of any numeric or bool dtype (its values need not be 0 or 1). Recognize makes it
// from the exported Cast → Sub(1, ·) → Mul(·, value) chain; it is ElemWise, so fusion
// puts it into the group of the Add that reads it.
func attentionMaskOps() []OpInfo {
	return []OpInfo{
		{Op: OpAttentionMask, Domain: KilnDomain, MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1,
			Attrs: reflect.TypeFor[AttentionMaskAttrs](), Pattern: ElemWise, Infer: inferAttentionMask},
	}
}

// inferAttentionMask: the mask's shape with the dtype To.
func inferAttentionMask(_ *InferCtx, n *Node) ([]Type, error) {
	t, err := TensorIn(n, 0)
	if err != nil {
		return nil, err
	}
	if !t.DType.IsNumeric() && t.DType != tensor.Bool {
		return nil, Inferf(n, "mask of %v, want a numeric or bool tensor", t.DType)
	}
	to := tensor.DType(n.Attrs.(*AttentionMaskAttrs).To)
	if to != tensor.Float32 && to != tensor.Float64 {
		return nil, Inferf(n, "to=%d (%v), want f32 or f64", int64(to), to)
	}
	t.DType, t.Known = to, nil
	return []Type{t}, nil
}
