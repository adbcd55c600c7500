package engine

import (
	"fmt"
	"strings"
)

// Level is a graph optimization level. The zero value is the default, O3, so that a
// zero Recipe is the default build.
type Level int8

const (
	LevelDefault Level = iota // O3
	O0
	O1
	O2
	O3
)

// LevelOf returns the level for -O n (0 to 3).
func LevelOf(n int) (Level, error) {
	if n < 0 || n > 3 {
		return 0, fmt.Errorf("optimization level %d: want 0, 1, 2 or 3", n)
	}
	return O0 + Level(n), nil
}

// Int is the level as -O takes it (0 to 3); the default is 3.
func (l Level) Int() int {
	if l == LevelDefault {
		return 3
	}
	return int(l - O0)
}

func (l Level) String() string { return fmt.Sprintf("O%d", l.Int()) }

// Recipe is every compile option that changes the generated code, resolved once: the
// same value keys the journal entry and drives the compile (the compiler derives its
// graph pipeline from Level and NoFusion, and nothing else). Options that do not change
// the code (threads, progress, dumps, timeouts, memory limits) are not part of it.
type Recipe struct {
	// Level is the graph optimization level (the pipeline of graph/passes.Level).
	Level Level
	// NoFusion lowers every node to a kernel of its own (the pipeline without
	// fuse-ops): for comparisons.
	NoFusion bool
	// PlainLayout keeps every tensor in plain NCHW order (no alter-layout): for
	// comparisons.
	PlainLayout bool
	// BoundsCheck builds every kernel with each buffer access checked against its
	// buffer's extent: a debug build, slower, in which an access outside a buffer fails
	// the call with vm.ErrOutOfBounds.
	BoundsCheck bool
	// TextureLimit, when positive, lowers the device's image2d limits to TextureLimit
	// texels a side for annotate-scopes, so that larger tensors stay in global memory:
	// to test the fallback. Only a backend with a texture scope policy reads it.
	TextureLimit int64
	// NoTextures keeps every tensor of a texture-capable backend (OpenCL) in global
	// buffers: the buffer path, for comparisons and for drivers whose images misbehave.
	NoTextures bool
}

// String is the canonical text form used in journal keys, e.g. "O3 layout=blocked";
// no-fusion, bounds-check and texture-limit are named only when on, so that the default build's key
// does not depend on options added later.
func (r Recipe) String() string {
	parts := []string{r.Level.String()}
	if r.NoFusion {
		parts = append(parts, "no-fusion")
	}
	layout := "blocked"
	if r.PlainLayout {
		layout = "plain"
	}
	parts = append(parts, "layout="+layout)
	if r.BoundsCheck {
		parts = append(parts, "bounds-check")
	}
	if r.NoTextures {
		parts = append(parts, "textures=off")
	}
	if r.TextureLimit != 0 {
		parts = append(parts, fmt.Sprintf("texture-limit=%d", r.TextureLimit))
	}
	return strings.Join(parts, " ")
}
