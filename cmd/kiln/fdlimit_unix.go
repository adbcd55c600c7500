//go:build unix

package main

import "syscall"

// openFileLimit is the process's soft limit on open files (Go's runtime raises it to
// the hard limit at start), or 0 when it cannot be read.
func openFileLimit() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur > 1<<30 {
		return 0
	}
	return int(lim.Cur)
}
