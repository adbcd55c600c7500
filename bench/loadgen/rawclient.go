package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// rawConn is a minimal HTTP/1.1 client on one persistent loopback connection, used
// from a single goroutine: it writes a prebuilt request and reads the response in the
// caller's goroutine, so the measurement does not include net/http's client-side
// goroutine handoffs (a Go http.Client passes each request through a writer and a
// reader goroutine), the way a C++ client such as perf_analyzer would not.
type rawConn struct {
	addr string
	req  []byte
	conn net.Conn
	br   *bufio.Reader
}

func newRawConn(base, path string, body []byte, hdr map[string]string) (*rawConn, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n", path, u.Host, len(body))
	for k, v := range hdr {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n")
	b.Write(body)
	return &rawConn{addr: u.Host, req: b.Bytes()}, nil
}

// do sends the request and reads the whole response; the connection is reopened when
// the server closed it.
func (c *rawConn) do() error {
	if c.conn == nil {
		conn, err := net.Dial("tcp", c.addr)
		if err != nil {
			return err
		}
		c.conn, c.br = conn, bufio.NewReaderSize(conn, 64<<10)
	}
	if _, err := c.conn.Write(c.req); err != nil {
		c.close()
		return err
	}
	status, err := c.br.ReadString('\n')
	if err != nil {
		c.close()
		return err
	}
	length, closing := -1, false
	for {
		line, err := c.br.ReadString('\n')
		if err != nil {
			c.close()
			return err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			break
		}
		k, v, _ := strings.Cut(line, ":")
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "content-length":
			length, _ = strconv.Atoi(strings.TrimSpace(v))
		case "connection":
			closing = strings.EqualFold(strings.TrimSpace(v), "close")
		}
	}
	if length < 0 {
		c.close()
		return fmt.Errorf("response without Content-Length: %s", status)
	}
	if _, err := io.CopyN(io.Discard, c.br, int64(length)); err != nil {
		c.close()
		return err
	}
	if closing {
		c.close()
	}
	if !strings.Contains(status, " 200 ") {
		return fmt.Errorf("%s", strings.TrimSpace(status))
	}
	return nil
}

func (c *rawConn) close() {
	if c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
}

// idleRoundTrip times n bare GET /v2/health/live requests on one connection, each sent
// after idling for gap, and returns the p50 in milliseconds: what waking the server
// and the client costs on this machine, with no work in between.
func idleRoundTrip(base string, gap time.Duration, n int) (float64, error) {
	u, err := url.Parse(base)
	if err != nil {
		return 0, err
	}
	rc := &rawConn{addr: u.Host, req: []byte("GET /v2/health/live HTTP/1.1\r\nHost: " + u.Host + "\r\n\r\n")}
	defer rc.close()
	lat := make([]float64, 0, n)
	for range n {
		time.Sleep(gap)
		t0 := time.Now()
		if err := rc.do(); err != nil {
			return 0, err
		}
		lat = append(lat, float64(time.Since(t0).Microseconds())/1000)
	}
	slices.Sort(lat)
	return lat[len(lat)/2], nil
}
