package engine

import (
	"runtime/debug"
)

//go:generate go test -run TestCompilerIdentity -args -update-identity

// Identity names this compiler in cache keys: the main module's version (a VCS
// pseudo-version with +dirty for builds from a modified checkout, "(devel)" for tests)
// and the digest of every source file that shapes generated code (sourceDigest, in
// identity_gen.go: the non-test Go files of the kiln packages the compiler depends on,
// compilecache excepted, and go.mod). TestCompilerIdentity fails when the digest is
// stale; `go generate ./engine` refreshes it.
func Identity() string {
	v := "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		v = bi.Main.Version
	}
	return v + " src:" + sourceDigest
}
