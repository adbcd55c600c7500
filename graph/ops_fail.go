package graph

import "reflect"

// FailAttrs: Message is the error the node stops the run with; Type is its output's
// type, which it never produces.
type FailAttrs struct {
	Message string `attr:"message" required:"true"`
	Type    *Type  `attr:"type" required:"true"`
}

// failOps: kiln.Fail stands for a value that cannot be computed for the bound shapes. A
// pass puts it in the branch of an If that does not type (passes.StubBranches): the
// branch then has its results' types from the other branch, and running it stops the
// run with Message instead of computing them. It takes no input and is never folded or
// fused; the compiler emits it as the VM's Fatal instruction.
func failOps() []OpInfo {
	return []OpInfo{
		{Op: OpFail, Domain: KilnDomain, MinIn: 0, MaxIn: 0, MinOut: 1, MaxOut: 1,
			Attrs: reflect.TypeFor[FailAttrs](), Pattern: Opaque, Flags: HostOnly, Infer: inferFail},
	}
}

func inferFail(_ *InferCtx, n *Node) ([]Type, error) {
	t := n.Attrs.(*FailAttrs).Type
	if t == nil {
		return nil, Inferf(n, "no type")
	}
	return []Type{*t}, nil
}
