//go:build !serveonly

package main

import (
	"github.com/kilnrt/kiln/compiler"
	"github.com/kilnrt/kiln/engine"
)

// jitCompiler is the compiler half: this build compiles models on their first request.
func jitCompiler() engine.Compiler { return compiler.JIT{} }
