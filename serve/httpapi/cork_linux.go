package httpapi

import "syscall"

// setCork sets or clears TCP_CORK and reports whether the socket took it.
func setCork(rc syscall.RawConn, on bool) bool {
	v := 0
	if on {
		v = 1
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CORK, v)
	}); err != nil {
		return false
	}
	return serr == nil
}
