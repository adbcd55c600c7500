//go:build !linux

package httpapi

import "syscall"

// setCork: TCP_CORK is Linux's; elsewhere responses are written as net/http writes them.
func setCork(syscall.RawConn, bool) bool { return false }
