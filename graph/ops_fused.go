package graph

import (
	"reflect"
	"strings"
)

// FusedAttrs: Body is the group's primitive function. Its parameters stand for the
// node's inputs, in order; its results are the node's outputs. Anchor names the op whose
// schedule rule lowers the whole body (docs/ARCHITECTURE.md, "Fusion"): the first
// OutEWiseFusable member, else the first member.
type FusedAttrs struct {
	Anchor string `attr:"anchor"`
	Body   *Func  `attr:"body"`
}

// fusedOps: kiln.Fused is one future kernel, made by the fuse-ops pass.
func fusedOps() []OpInfo {
	return []OpInfo{
		{Op: OpFused, Domain: KilnDomain, MinIn: 0, MaxIn: -1, MinOut: 1, MaxOut: -1,
			Attrs: reflect.TypeFor[FusedAttrs](), Pattern: Opaque, Flags: HasSubgraphs, Infer: inferFused},
	}
}

func inferFused(_ *InferCtx, n *Node) ([]Type, error) {
	body := n.Attrs.(*FusedAttrs).Body
	if body == nil || len(body.Params) != len(n.Inputs) || len(body.Results) != len(n.Outputs) {
		return nil, Inferf(n, "body signature does not match %d inputs and %d outputs", len(n.Inputs), len(n.Outputs))
	}
	for i, p := range body.Params {
		if in := n.Inputs[i]; in == nil || !p.Type.Equal(in.Type) {
			return nil, Inferf(n, "input %d does not have the body parameter's type %v", i, p.Type)
		}
	}
	out := make([]Type, len(body.Results))
	for i, r := range body.Results {
		out[i] = r.Type
	}
	return out, nil
}

// FusedName names a fused group after its members' ops, as TVM does:
// "fused_conv_add_relu".
func FusedName(members []*Node) string {
	parts := []string{"fused"}
	for _, n := range members {
		parts = append(parts, strings.ToLower(n.Op.String()))
	}
	return strings.Join(parts, "_")
}
