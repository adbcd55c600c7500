//go:build !serveonly

package main

import (
	"github.com/spf13/cobra"

	"github.com/kilnrt/kiln/compiler"
	"github.com/kilnrt/kiln/engine"
)

// jitCompiler is the compiler half: this build compiles models on their first request.
func jitCompiler() engine.Compiler { return compiler.JIT{} }

// compilerCommands are the commands that compile models.
func compilerCommands() []*cobra.Command {
	return []*cobra.Command{inspectCmd(), runCmd(), compileCmd(), benchCmd(), conformanceCmd(), prebuildCmd(), tuneCmd(), tuneChildCmd()}
}
