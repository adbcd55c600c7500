//go:build serveonly

package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/kilnrt/kiln/compilecache"
	"github.com/kilnrt/kiln/configs"
	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/serve"
)

// The serve-only build (go build -tags serveonly ./cmd/kiln) links the runtime half
// only: it serves models from executables a full kiln put in the journal (`kiln
// prebuild`) and refuses to compile, answering a model or shape the journal lacks with
// an error naming the missing entry. It has no compile commands.

// jitCompiler is nil: this build does not compile.
func jitCompiler() engine.Compiler { return nil }

// compilerCommands is empty: this build does not compile.
func compilerCommands() []*cobra.Command { return nil }

// serveTuning refuses background tuning: this build does not compile.
func serveTuning(c configs.Tune, _ *compilecache.Journal, _ int) (serve.TuneOptions, error) {
	if c.Mode != "background" {
		return serve.TuneOptions{}, nil
	}
	return serve.TuneOptions{}, usageError{errors.New("tune.mode background (--tune background) needs a kiln that compiles; this is the serve-only build")}
}
