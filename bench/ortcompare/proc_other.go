//go:build !unix

package main

import "os/exec"

// ownGroup is a no-op where process groups do not exist: cancellation kills the
// direct child only.
func ownGroup(*exec.Cmd) {}
