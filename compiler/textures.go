package compiler

import (
	"fmt"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/graph/passes"
	"github.com/kilnrt/kiln/target"
)

// TextureScopes is annotate-scopes' policy for a GPU target whose kernels read and
// write textures as writes and reads say (the texture schedules' applicability): images
// up to the device's image2d limits (target.GPUFacts). Nil when the device has no
// images, so that every tensor stays global. A backend's ScopePolicy returns it;
// Options.Recipe.TextureLimit lowers the limits for one compile.
func TextureScopes(t target.Target, writes func(n *graph.Node, p graph.Packing) bool, reads func(n *graph.Node, input int, p graph.Packing) bool) *passes.ScopePolicy {
	if t.GPU.ImageMaxWidth <= 0 || t.GPU.ImageMaxHeight <= 0 || writes == nil || reads == nil {
		return nil
	}
	return &passes.ScopePolicy{Writes: writes, Reads: reads,
		MaxWidth: int64(t.GPU.ImageMaxWidth), MaxHeight: int64(t.GPU.ImageMaxHeight)}
}

// scopePolicy is the backend's scope policy for the compile, its image limits lowered
// to the recipe's TextureLimit (nil: every tensor global).
func (c *compile) scopePolicy() (*passes.ScopePolicy, error) {
	limit := c.opts.Recipe.TextureLimit
	if limit < 0 {
		return nil, fmt.Errorf("texture limit %d: want a positive number of texels, or 0 for the device's", limit)
	}
	if c.be.ScopePolicy == nil {
		return nil, nil
	}
	pol := c.be.ScopePolicy(c.t, c.registry)
	if pol == nil || limit == 0 {
		return pol, nil
	}
	lowered := *pol
	lowered.MaxWidth, lowered.MaxHeight = min(pol.MaxWidth, limit), min(pol.MaxHeight, limit)
	return &lowered, nil
}
