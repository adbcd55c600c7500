package serve

import (
	"context"

	"github.com/kilnrt/kiln/compilecache"
	"github.com/kilnrt/kiln/engine"
)

// Engine is what the service needs to turn a model version into something that runs:
// package engine's *Engine (with a compiler, or serve-only with prebuilt executables),
// or a test engine (serve/servetest) that needs no C compiler.
type Engine interface {
	// Open reads a model version's file once: interface, signature, digest, stamp.
	Open(name, path string) (*engine.Model, error)
	// Load returns the model's executable for the input shapes (nil: the generic one,
	// every shape) loaded and ready to run; progress follows a compile.
	Load(ctx context.Context, m *engine.Model, shapes map[string][]int64, progress func(engine.Progress)) (*engine.Loaded, error)
	// JournalStats are the executable journal's counters, for metrics.
	JournalStats() compilecache.Stats
}
