//go:build !linux

// Command httpfloor runs on Linux only (its C servers use futexes and TCP_CORK).
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "httpfloor: Linux only")
	os.Exit(1)
}
