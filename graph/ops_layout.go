package graph

import "reflect"

// LayoutTransformAttrs: Block is the channel block of the result's storage (0: plain
// NCHW).
type LayoutTransformAttrs struct {
	Block int64 `attr:"block"`
}

// layoutOps are kiln's own ops for storage layouts (docs/ARCHITECTURE.md, "Memory
// scopes and layouts"): the value passes through unchanged, only its storage order changes.
func layoutOps() []OpInfo {
	return []OpInfo{
		{Op: OpLayoutTransform, Domain: KilnDomain, MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1,
			Attrs: reflect.TypeFor[LayoutTransformAttrs](), Pattern: Injective, Infer: inferLayoutTransform},
	}
}

func inferLayoutTransform(_ *InferCtx, n *Node) ([]Type, error) {
	t, err := TensorIn(n, 0)
	if err != nil {
		return nil, err
	}
	b := n.Attrs.(*LayoutTransformAttrs).Block
	if err := CheckBlock(t, b); err != nil {
		return nil, Inferf(n, "%v", err)
	}
	t.Block, t.Known = b, nil
	return []Type{t}, nil
}

// CheckBlock reports whether a tensor of type t can be stored in channel blocks of b:
// a 4-D tensor whose channel count is a known multiple of b (b = 0, plain, always can).
func CheckBlock(t Type, b int64) error {
	if b == 0 {
		return nil
	}
	if b < 0 || t.Kind != KindTensor || t.UnknownRank || len(t.Shape) != 4 {
		return Inferf(&Node{Op: OpLayoutTransform}, "a block of %d channels needs a 4-D tensor, got %v", b, t)
	}
	c, ok := t.Shape[1].Value()
	if !ok || c%b != 0 {
		return Inferf(&Node{Op: OpLayoutTransform}, "%v channels are not a multiple of %d", t.Shape[1], b)
	}
	return nil
}
