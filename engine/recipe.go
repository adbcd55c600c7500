package engine

import (
	"errors"
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
	// Precision is the arithmetic of float32 matrix products: PrecisionFP32 ("" or
	// "fp32": exact float32, the default) or PrecisionTF32 (float32 products on CUDA
	// tensor cores with inputs rounded to TF32, 10-bit mantissas, accumulated in
	// float32). Backends without tensor cores (the CPU, OpenCL) build exact float32
	// whatever it says. ParsePrecision checks a user's value.
	Precision Precision
}

// Precision is the arithmetic a compile may use for float32 matrix products.
type Precision string

const (
	PrecisionFP32 Precision = "fp32"
	PrecisionTF32 Precision = "tf32"
)

// ErrPrecision: a precision kiln does not build.
var ErrPrecision = errors.New("unsupported precision")

// ParsePrecision checks a precision named by a user ("" is fp32, the default).
func ParsePrecision(s string) (Precision, error) {
	switch Precision(s) {
	case "", PrecisionFP32:
		return PrecisionFP32, nil
	case PrecisionTF32:
		return PrecisionTF32, nil
	case "fp16":
		return "", fmt.Errorf("%w: precision fp16 is not built yet (fp32 or tf32)", ErrPrecision)
	}
	return "", fmt.Errorf("%w: precision %q: want fp32 or tf32", ErrPrecision, s)
}

// TF32 reports whether the recipe allows TF32 tensor-core products.
func (r Recipe) TF32() bool { return r.Precision == PrecisionTF32 }

// String is the canonical text form used in journal keys, e.g. "O3 layout=blocked";
// no-fusion, bounds-check, texture-limit and a precision other than fp32 are named only
// when on, so that the default build's key
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
	if r.Precision != "" && r.Precision != PrecisionFP32 {
		parts = append(parts, "precision="+string(r.Precision))
	}
	return strings.Join(parts, " ")
}
