package passes

import (
	"fmt"
	"math/bits"
	"strings"

	"github.com/kilnrt/kiln/graph"
)

// ScopePolicy says which kernels of a target read and write tensors in texture memory
// (OpenCL image2d), in which packings, and how large an image the device takes. Nil
// functions accept nothing.
type ScopePolicy struct {
	// Writes: the node's kernel can write output 0 as a texture of packing p.
	Writes func(n *graph.Node, p graph.Packing) bool
	// Reads: the node's kernel can read input i as a texture of packing p.
	Reads func(n *graph.Node, input int, p graph.Packing) bool
	// MaxWidth and MaxHeight bound an image in texels: the device's image2d limits, or
	// lower ones to test the fallback (0: no image fits).
	MaxWidth, MaxHeight int64
}

// ScopeCause says why annotate-scopes left a value where it is.
type ScopeCause uint8

const (
	CauseTexture    ScopeCause = iota // it is in a texture
	CauseNotBlocked                   // not stored in blocks of 4 channels, or not 4-D
	CauseEscapes                      // a function result, or read by a subgraph
	CauseUnread                       // no kernel reads it
	CauseReader                       // a reader takes no texture in a packing its producer writes
	CauseDynamic                      // its shape is not static, so its image is unknown
	CauseTooLarge                     // no packing's image fits the device's limits
)

func (c ScopeCause) String() string {
	switch c {
	case CauseTexture:
		return "in a texture"
	case CauseNotBlocked:
		return "not a 4-D tensor in blocks of 4 channels"
	case CauseEscapes:
		return "a function result or read by a subgraph"
	case CauseUnread:
		return "read by no kernel"
	case CauseReader:
		return "a reader takes no texture in a packing its producer writes"
	case CauseDynamic:
		return "its shape is not static"
	case CauseTooLarge:
		return "no packing fits the device's images"
	}
	return fmt.Sprintf("cause(%d)", uint8(c))
}

// ScopeDecision is annotate-scopes' answer for one value that a policy could have put
// in a texture (its producer writes one, or it is a constant a reader takes as one):
// the scope and packing chosen with the image's size, or the cause it stays global
// with the detail (the reader, the images measured).
type ScopeDecision struct {
	Value         *graph.Value
	Scope         graph.MemScope
	Packing       graph.Packing
	Width, Height int64
	Cause         ScopeCause
	Detail        string
}

// String is the decision as kiln inspect prints it: "texture-nhwc 56x112" or
// "global: no packing fits the device's images (texture 56x7168 ...)".
func (d ScopeDecision) String() string {
	if d.Cause == CauseTexture {
		return fmt.Sprintf("%v %dx%d", d.Packing, d.Width, d.Height)
	}
	s := fmt.Sprintf("%v: %v", d.Scope, d.Cause)
	if d.Detail != "" {
		s += " (" + d.Detail + ")"
	}
	return s
}

// activationPackings are those a node output may take (alter-layout blocked it);
// weightPackings those a constant may take.
var (
	activationPackings = []graph.Packing{graph.PackNCHW4c, graph.PackNHWC4c}
	weightPackings     = []graph.Packing{graph.PackOIHW4o}
)

// AnnotateScopes sets every tensor's memory scope (docs/ARCHITECTURE.md, "Memory
// scopes and layouts"). Global is the default; with a Context.Scopes policy, a node
// output stored in blocks of 4 channels goes to a texture of a packing that its
// producer writes and every reader reads, and a 4-D constant (a weight) to a
// texture-weight every reader reads, when the packing's image fits the policy's limits.
// Among the packings that fit, the most balanced image wins (width/height closest to 1;
// on a tie, the earlier in graph.Packings). A Func result, a value read by a subgraph
// or by a fused body's caller that cannot take one stays global. Every value the policy
// could have put in a texture gets a ScopeDecision (Context.Scoped). A fused body's
// constants (the weights of a fused convolution) are placed like the others, read by
// the body's nodes. The CPU has no policy: everything stays global.
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
				o.Type.Scope, o.Type.Packing = graph.ScopeGlobal, 0
			}
		}
		for _, c := range f.Consts {
			if c.Type.Scope == graph.ScopeTexture {
				c.Type.Scope, c.Type.Packing, c.Type.Block = graph.ScopeGlobal, 0, 0
			}
		}
	})
	defer mirrorBodies(m)
	if pol == nil || pol.Writes == nil || pol.Reads == nil {
		return nil
	}
	s := &scoper{pol: pol, ctx: ctx, uses: map[*graph.Value][]use{}, escapes: map[*graph.Value]bool{}}
	m.Main.Funcs(s.collect)
	m.Main.Funcs(func(f *graph.Func) {
		for _, c := range f.Consts {
			s.place(c, weightPackings, func(graph.Packing) bool { return true })
		}
		if bodies[f] {
			return // a fused body's weights are its constants; its values never reach memory
		}
		for _, n := range f.Nodes {
			if len(n.Outputs) == 1 {
				s.place(n.Outputs[0], activationPackings, func(p graph.Packing) bool { return pol.Writes(n, p) })
			}
		}
	})
	return nil
}

// mirrorBodies gives a fused body's parameters and results the storage of its
// caller's inputs and outputs.
func mirrorBodies(m *graph.Module) {
	m.Main.Funcs(func(f *graph.Func) {
		for _, n := range f.Nodes {
			if n.Op != graph.OpFused {
				continue
			}
			body := n.Attrs.(*graph.FusedAttrs).Body
			for i, p := range body.Params {
				in := n.Inputs[i].Type
				p.Type.Scope, p.Type.Packing = in.Scope, in.Packing
				if n.Inputs[i].Const != nil {
					p.Type.Block = in.Block // a weight is blocked only in a texture
				}
			}
			for i, r := range body.Results {
				r.Type.Scope, r.Type.Packing = n.Outputs[i].Type.Scope, n.Outputs[i].Type.Packing
			}
		}
	})
}

type use struct {
	n *graph.Node
	i int
}

type scoper struct {
	pol     *ScopePolicy
	ctx     *Context
	uses    map[*graph.Value][]use
	escapes map[*graph.Value]bool
}

// collect records the readers of f's values and the values that escape f.
func (s *scoper) collect(f *graph.Func) {
	local := map[*graph.Value]bool{}
	for _, n := range f.Nodes {
		for _, o := range n.Outputs {
			local[o] = true
		}
	}
	for _, p := range f.Params {
		local[p] = true
	}
	for _, c := range f.Consts {
		local[c] = true
	}
	for _, n := range f.Nodes {
		for i, v := range n.Inputs {
			if v == nil {
				continue
			}
			s.uses[v] = append(s.uses[v], use{n, i})
			if !local[v] {
				s.escapes[v] = true // read by a subgraph: stays global
			}
		}
	}
	for _, r := range f.Results {
		s.escapes[r] = true
	}
}

// place puts v in a texture of one of the packings its producer writes (writes) and
// every reader reads, when one fits, and reports the decision.
func (s *scoper) place(v *graph.Value, packings []graph.Packing, writes func(graph.Packing) bool) {
	var cands []graph.Packing
	for _, p := range packings {
		if writes(p) {
			cands = append(cands, p)
		}
	}
	if v.Const != nil {
		// a constant is a candidate when some reader takes it as a texture
		var read []graph.Packing
		for _, p := range cands {
			for _, u := range s.uses[v] {
				if s.pol.Reads(u.n, u.i, p) {
					read = append(read, p)
					break
				}
			}
		}
		cands = read
	}
	if len(cands) == 0 || v.Type.Kind != graph.KindTensor {
		return // no texture was possible: not a decision
	}
	d := s.decide(v, cands)
	if d.Cause == CauseTexture {
		v.Type.Scope, v.Type.Packing, v.Type.Block = graph.ScopeTexture, d.Packing, graph.TexelChannels
	}
	if s.ctx.Scoped != nil {
		s.ctx.Scoped(d)
	}
}

func (s *scoper) decide(v *graph.Value, cands []graph.Packing) ScopeDecision {
	d := ScopeDecision{Value: v, Scope: graph.ScopeGlobal}
	t := v.Type
	if v.Const == nil && t.Block != graph.TexelChannels {
		d.Cause = CauseNotBlocked
		return d
	}
	if s.escapes[v] {
		d.Cause = CauseEscapes
		return d
	}
	if len(s.uses[v]) == 0 {
		d.Cause = CauseUnread
		return d
	}
	var read []graph.Packing
	var refused *graph.Node
	for _, p := range cands {
		ok := true
		for _, u := range s.uses[v] {
			if !s.pol.Reads(u.n, u.i, p) {
				ok, refused = false, u.n
				break
			}
		}
		if ok {
			read = append(read, p)
		}
	}
	if len(read) == 0 {
		d.Cause, d.Detail = CauseReader, readerName(refused)+" reads it from global memory"
		return d
	}
	var measured []string
	found, measurable := false, 0
	for _, p := range read {
		tt := t
		tt.Scope, tt.Packing, tt.Block = graph.ScopeTexture, p, graph.TexelChannels
		w, h, ok := graph.ImageSize(tt)
		if !ok {
			if !t.IsStatic() {
				d.Cause = CauseDynamic
				return d
			}
			continue // the packing's blocked axis is no multiple of 4
		}
		measurable++
		measured = append(measured, fmt.Sprintf("%v %dx%d", p, w, h))
		if w < 1 || h < 1 || w > s.pol.MaxWidth || h > s.pol.MaxHeight {
			continue
		}
		if !found || balancedBefore(w, h, d.Width, d.Height) {
			d.Packing, d.Width, d.Height, found = p, w, h, true
		}
	}
	switch {
	case measurable == 0:
		d.Cause = CauseNotBlocked
		return d
	case !found:
		d.Cause, d.Detail = CauseTooLarge, fmt.Sprintf("%s; the limit is %dx%d", strings.Join(measured, ", "), s.pol.MaxWidth, s.pol.MaxHeight)
		return d
	}
	d.Scope, d.Cause = graph.ScopeTexture, CauseTexture
	return d
}

// balancedBefore reports whether a w1×h1 image is strictly closer to square than a
// w2×h2 one: max1/min1 < max2/min2, compared exactly as max1·min2 < max2·min1 (all
// sides at least 1).
func balancedBefore(w1, h1, w2, h2 int64) bool {
	max1, min1 := max(w1, h1), min(w1, h1)
	max2, min2 := max(w2, h2), min(w2, h2)
	hi1, lo1 := bits.Mul64(uint64(max1), uint64(min2))
	hi2, lo2 := bits.Mul64(uint64(max2), uint64(min1))
	return hi1 < hi2 || hi1 == hi2 && lo1 < lo2
}

// readerName names a node by its op and first output ("the Mul that writes %d").
func readerName(n *graph.Node) string {
	if len(n.Outputs) == 0 || n.Outputs[0] == nil {
		return fmt.Sprintf("a %v", n.Op)
	}
	return fmt.Sprintf("the %v that writes %%%s", n.Op, n.Outputs[0].Name)
}
