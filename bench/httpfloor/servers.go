//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/ebitengine/purego"
)

// computeFunc binds kiln_floor_compute from the shared object built from csrc/compute.c and
// calls it the way kiln's CPU device launches a kernel: purego.SyscallN, no cgo. With
// fixed the compute does the work that takes us back to back, else it lasts us.
func computeFunc(lib string, us, footprint int, fixed bool) (func(), error) {
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("httpfloor: %s: %w", lib, err)
	}
	fn, err := purego.Dlsym(h, "kiln_floor_compute")
	if err != nil {
		return nil, fmt.Errorf("httpfloor: %s: %w", lib, err)
	}
	f := uintptr(0)
	if fixed {
		f = 1
	}
	return func() { purego.SyscallN(fn, uintptr(us), uintptr(footprint), f) }, nil
}

// serveGoTCP answers requests on raw TCP from one goroutine per connection: headers
// read with bufio, the body with io.ReadFull into the connection's buffer, the whole
// response in one Write. It is the least a Go server does: the runtime's netpoller and
// scheduler, no HTTP library.
//
// Every floor lands the body in memory, as the C server does and as a server must that
// hands the request's tensors to its compute: read through a small buffer and thrown
// away, a 602 KB image request never leaves the cache (on squeezenet1_1's request the
// net/http floor measured +0.346 ms over in process that way, +0.361 landing it: 60
// rounds each, machine D).
func serveGoTCP(ln net.Listener, compute func(), body int) error {
	resp := append([]byte(fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n", body)), make([]byte, body)...)
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			br := bufio.NewReader(c)
			var buf []byte
			for {
				n := 0
				for {
					line, err := br.ReadSlice('\n')
					if err != nil {
						return
					}
					line = bytes.TrimRight(line, "\r\n")
					if len(line) == 0 {
						break
					}
					if k, v, ok := strings.Cut(string(line), ":"); ok && strings.EqualFold(k, "Content-Length") {
						n, _ = strconv.Atoi(strings.TrimSpace(v))
					}
				}
				if cap(buf) < n {
					buf = make([]byte, n)
				}
				if _, err := io.ReadFull(br, buf[:n]); err != nil {
					return
				}
				compute()
				if _, err := c.Write(resp); err != nil {
					return
				}
			}
		}()
	}
}

type connKey struct{}

// serveNetHTTP answers with net/http the way kiln's REST server writes a binary
// response: Content-Length set, the body written under TCP_CORK and flushed, so header
// and body leave in one segment train (serve/httpapi/cork.go).
func serveNetHTTP(ln net.Listener, compute func(), body int) error {
	payload := make([]byte, body)
	size := strconv.Itoa(body)
	var bodies sync.Pool // *[]byte: request bodies, landed in memory
	srv := &http.Server{
		ConnContext: func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, connKey{}, c) },
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			bp, _ := bodies.Get().(*[]byte)
			if bp == nil {
				bp = new([]byte)
			}
			defer bodies.Put(bp)
			if n := int(r.ContentLength); n > cap(*bp) {
				*bp = make([]byte, n)
			}
			if _, err := io.ReadFull(r.Body, (*bp)[:max(r.ContentLength, 0)]); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			compute()
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Content-Length", size)
			cork := func(on int) {}
			if sc, ok := r.Context().Value(connKey{}).(syscall.Conn); ok {
				if rc, err := sc.SyscallConn(); err == nil {
					cork = func(on int) {
						_ = rc.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CORK, on) })
					}
				}
			}
			cork(1)
			_, _ = w.Write(payload)
			w.(http.Flusher).Flush()
			cork(0)
		}),
	}
	return srv.Serve(ln)
}
