package httpapi

import (
	"context"
	"net"
	"net/http"
	"syscall"
)

// connKey is the context key under which ConnContext keeps a request's connection.
type connKey struct{}

// ConnContext is the http.Server.ConnContext hook that lets handlers reach their
// connection (for corked). Without it, corked just writes.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// corked runs write, which writes a whole response, and flushes it to the connection
// with the connection's TCP sends held back until both are done (TCP_CORK on Linux), so
// that a response larger than net/http's 4 KiB buffers — its header and the first bytes
// in one write syscall, the middle in another, the tail left in the buffer until the
// handler returns — reaches the client as one send: the client wakes once instead of
// two or three times. The flush is inside the cork: left to net/http after the handler,
// the tail (1 KiB of bert_tiny's 33 KB response) went out alone after the uncork.
// Corking alone measured ~0.03 ms per 33 KB response on the VM of BENCHMARKS.md (0.386
// against 0.419 ms, means of 8 alternations of 1000 requests). Connections that are not
// plain TCP (TLS) just write and flush.
func corked(r *http.Request, w http.ResponseWriter, write func()) {
	if sc, ok := r.Context().Value(connKey{}).(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil && setCork(rc, true) {
			defer setCork(rc, false) // after the flush below
		}
	}
	write()
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}
