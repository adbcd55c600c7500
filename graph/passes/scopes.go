package passes

import "github.com/kilnrt/kiln/graph"

// ScopePolicy says which nodes of a target read and write tensors in texture memory
// (OpenCL image2d). Nil functions accept nothing.
type ScopePolicy struct {
	// Writes: the node's kernel can write output 0 to a texture.
	Writes func(n *graph.Node) bool
	// Reads: the node's kernel can read input i from a texture.
	Reads func(n *graph.Node, input int) bool
	// Fits: the tensor's image (height N·C/4·H, width W, in texels) is within the
	// device's image limits.
	Fits func(t graph.Type) bool
}

// AnnotateScopes sets every tensor's memory scope (docs/ARCHITECTURE.md, "Memory
// scopes and layouts"). Global is the default; with a Context.Scopes policy, a node output goes to a texture when its
// value is stored in blocks of 4 channels (one RGBA texel), fits the device's image
// limits, its producer writes textures, and every reader takes a texture at that input;
// a Func result, a value read by a subgraph or by a fused body's caller that cannot take
// one stays global. The CPU has no policy: everything stays global.
func AnnotateScopes(ctx *Context, m *graph.Module) error {
	pol := ctx.Scopes
	bodies := map[*graph.Func]bool{} // a fused body's values never reach memory
	m.Main.Funcs(func(f *graph.Func) {
		for _, n := range f.Nodes {
			if n.Op == graph.OpFused {
				bodies[n.Attrs.(*graph.FusedAttrs).Body] = true
			}
		}
	})
	m.Main.Funcs(func(f *graph.Func) {
		for _, n := range f.Nodes {
			for _, o := range n.Outputs {
				o.Type.Scope = graph.ScopeGlobal
			}
		}
	})
	if pol == nil || pol.Writes == nil || pol.Reads == nil {
		return nil
	}
	type use struct {
		n *graph.Node
		i int
	}
	uses := map[*graph.Value][]use{}
	escapes := map[*graph.Value]bool{}
	m.Main.Funcs(func(f *graph.Func) {
		if bodies[f] {
			return
		}
		local := map[*graph.Value]bool{}
		for _, n := range f.Nodes {
			for _, o := range n.Outputs {
				local[o] = true
			}
		}
		for _, p := range f.Params {
			local[p] = true
		}
		for _, n := range f.Nodes {
			for i, v := range n.Inputs {
				if v == nil {
					continue
				}
				uses[v] = append(uses[v], use{n, i})
				if !local[v] {
					escapes[v] = true // read by a subgraph: stays global
				}
			}
		}
		for _, r := range f.Results {
			escapes[r] = true
		}
	})
	m.Main.Funcs(func(f *graph.Func) {
		if bodies[f] {
			return
		}
		for _, n := range f.Nodes {
			if len(n.Outputs) != 1 || !pol.Writes(n) {
				continue
			}
			o := n.Outputs[0]
			t := o.Type
			if t.Kind != graph.KindTensor || t.Block != 4 || escapes[o] || len(uses[o]) == 0 || pol.Fits != nil && !pol.Fits(t) {
				continue
			}
			ok := true
			for _, u := range uses[o] {
				ok = ok && pol.Reads(u.n, u.i)
			}
			if ok {
				o.Type.Scope = graph.ScopeTexture
			}
		}
	})
	// a fused body sees its parameters and results where its caller keeps them
	m.Main.Funcs(func(f *graph.Func) {
		for _, n := range f.Nodes {
			if n.Op != graph.OpFused {
				continue
			}
			body := n.Attrs.(*graph.FusedAttrs).Body
			for i, p := range body.Params {
				p.Type.Scope = n.Inputs[i].Type.Scope
			}
			for i, r := range body.Results {
				r.Type.Scope = n.Outputs[i].Type.Scope
			}
		}
	})
	return nil
}
