package httpapi

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kilnrt/kiln/internal/membudget"
)

// rawConn dials srv and returns the connection with a reader for its responses.
func rawConn(t *testing.T, srv *httptest.Server) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second))
	return c, bufio.NewReader(c)
}

// readResp reads one response and its body.
func readResp(t *testing.T, br *bufio.Reader) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading a response: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// closedWithin reports whether the server closes the connection within d.
func closedWithin(c net.Conn, br *bufio.Reader, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := br.ReadByte()
	return err == io.EOF || err != nil && !isTimeout(err)
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

const inferHead = "POST /v2/models/mlp/infer HTTP/1.1\r\nHost: kiln\r\nContent-Type: application/json\r\n"

// TestDeclaredLengthAboveTheLimitIsRefusedAtOnce: Content-Length 10^12 with 10
// bytes sent gets 413 at once, without the server waiting for the body, and the
// connection is closed.
func TestDeclaredLengthAboveTheLimitIsRefusedAtOnce(t *testing.T) {
	srv := startServerOpts(t, Options{MaxRequestBytes: 1 << 20, ReadTimeout: time.Minute}, nil)
	c, br := rawConn(t, srv)
	start := time.Now()
	fmt.Fprint(c, inferHead+"Content-Length: 1000000000000\r\n\r\n0123456789")
	resp, body := readResp(t, br)
	took := time.Since(start)
	t.Logf("413 after %v", took)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(body, "Content-Length 1000000000000 exceeds the limit of 1048576 bytes") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if took > 2*time.Second {
		t.Fatalf("413 after %v, want at once", took)
	}
	if !closedWithin(c, br, 2*time.Second) {
		t.Fatal("the connection stays open after the 413")
	}
}

// TestTrickledBodyIsCutAtTheReadTimeout: a body sent at 1 byte a second gets 408
// when the read timeout has passed since its request started, and the connection
// is closed.
func TestTrickledBodyIsCutAtTheReadTimeout(t *testing.T) {
	const timeout = 1500 * time.Millisecond
	srv := startServerOpts(t, Options{MaxRequestBytes: 1 << 20, ReadTimeout: timeout}, nil)
	c, br := rawConn(t, srv)
	start := time.Now()
	fmt.Fprint(c, inferHead+"Content-Length: 100\r\n\r\n{")
	go func() {
		for range 99 {
			time.Sleep(time.Second)
			if _, err := c.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	resp, body := readResp(t, br)
	took := time.Since(start)
	t.Logf("%d after %v (read timeout %v)", resp.StatusCode, took, timeout)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(body, "read timeout") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if took < timeout-100*time.Millisecond || took > timeout+time.Second {
		t.Fatalf("answered after %v, want about %v", took, timeout)
	}
	if !closedWithin(c, br, 2*time.Second) {
		t.Fatal("the connection stays open after the 408")
	}
}

// TestBodiesWaitForTheMemoryBudget: an inference reserves its body's size of the
// budget; with the budget taken it waits until the body's read deadline and gets
// 503, and once the budget is free it runs and gives the bytes back.
func TestBodiesWaitForTheMemoryBudget(t *testing.T) {
	budget := membudget.New(1<<20, membudget.Options{})
	srv := startServerOpts(t, Options{MaxRequestBytes: 1 << 20, ReadTimeout: 300 * time.Millisecond, Budget: budget}, nil)
	req := jsonBody(map[string]any{"inputs": []any{map[string]any{"name": "x", "datatype": "FP32", "shape": []int{3, 8}, "data": x}}})
	taken, _ := budget.Reserve(t.Context(), int64(1<<20-len(req)+1))
	start := time.Now()
	code, _, b := do(t, "POST", srv.URL+"/v2/models/mlp/infer", req, nil)
	if code != http.StatusServiceUnavailable || !strings.Contains(string(b), "retry") {
		t.Fatalf("with the budget taken: %d %s", code, b)
	}
	t.Logf("503 after %v", time.Since(start))
	taken.Release()
	if code, _, b := do(t, "POST", srv.URL+"/v2/models/mlp/infer", req, nil); code != 200 {
		t.Fatalf("with the budget free: %d %s", code, b)
	}
	if budget.InUse() != 0 {
		t.Fatalf("%d bytes still reserved", budget.InUse())
	}
}

// TestWriteTimeoutCountsFromTheEndOfTheInference: the first inference compiles the
// model, far longer than a 20 ms write timeout, and its response still arrives: the
// write timeout bounds writing the response, not the inference.
func TestWriteTimeoutCountsFromTheEndOfTheInference(t *testing.T) {
	const timeout = 20 * time.Millisecond
	srv := startServerOpts(t, Options{MaxRequestBytes: 1 << 20, WriteTimeout: timeout}, nil)
	start := time.Now()
	code, _, b := do(t, "POST", srv.URL+"/v2/models/mlp/infer", jsonBody(map[string]any{"inputs": []any{map[string]any{"name": "x", "datatype": "FP32", "shape": []int{3, 8}, "data": x}}}), nil)
	took := time.Since(start)
	t.Logf("first inference (compiling) answered after %v with a %v write timeout", took, timeout)
	if code != 200 {
		t.Fatalf("%d %s", code, b)
	}
	if took < 5*timeout {
		t.Fatalf("the inference took only %v: the test needs one longer than the write timeout", took)
	}
}

// TestProbesAnswerAtTheConnectionCap: with a cap of 8 connections, 300 idle
// keep-alive connections leave at most 8 open (the longest idle are closed for new
// ones) and the probes answer; with all 8 busy, a probe is answered on a reserve
// connection, which answers nothing else and closes after one response, and beyond
// the reserve a connection is closed at once.
func TestProbesAnswerAtTheConnectionCap(t *testing.T) {
	var lim *Conns
	srv := startServerOpts(t, Options{MaxRequestBytes: 1 << 20, ReadTimeout: time.Minute}, func(s *httptest.Server) {
		lim = LimitConns(s.Listener, ConnLimits{Max: 8, ProbeReserve: 2})
		s.Listener, s.Config.ConnState, s.Config.ConnContext = lim, lim.ConnState, ConnContext
	})
	get := func(path string) (*http.Response, string) {
		t.Helper()
		c, br := rawConn(t, srv)
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: kiln\r\n\r\n", path)
		return readResp(t, br)
	}

	type client struct {
		c  net.Conn
		br *bufio.Reader
	}
	var idle []client
	for range 300 {
		c, br := rawConn(t, srv)
		fmt.Fprint(c, "GET /v2 HTTP/1.1\r\nHost: kiln\r\n\r\n")
		if resp, body := readResp(t, br); resp.StatusCode != 200 {
			t.Fatalf("GET /v2: %d %s", resp.StatusCode, body)
		}
		idle = append(idle, client{c, br})
	}
	if n := lim.Open(); n > 8 {
		t.Fatalf("%d connections open with a cap of 8", n)
	}
	for _, p := range []string{"/v2/health/live", "/v2/health/ready"} {
		if resp, body := get(p); resp.StatusCode != 200 {
			t.Fatalf("%s with 300 idle connections made: %d %s", p, resp.StatusCode, body)
		}
	}
	closed := 0
	for _, cl := range idle {
		if closedWithin(cl.c, cl.br, 10*time.Millisecond) {
			closed++
		}
		cl.c.Close()
	}
	t.Logf("of 300 idle keep-alive connections, the server closed %d; %d open", closed, lim.Open())
	if closed < 300-8 {
		t.Fatalf("the server closed %d of 300 idle connections, want at least 292", closed)
	}

	// every connection busy: 8 bodies that have not arrived
	time.Sleep(100 * time.Millisecond) // the closes above reach the server
	for range 8 {
		c, _ := rawConn(t, srv)
		fmt.Fprint(c, inferHead+"Content-Length: 100\r\n\r\n{")
	}
	time.Sleep(100 * time.Millisecond)
	resp, body := get("/v2/health/ready")
	if resp.StatusCode != 200 || !resp.Close {
		t.Fatalf("probe with every connection busy: %d (close %v) %s", resp.StatusCode, resp.Close, body)
	}
	resp, body = get("/v2")
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "connection limit") {
		t.Fatalf("GET /v2 on a reserve connection: %d %s", resp.StatusCode, body)
	}
	time.Sleep(100 * time.Millisecond)
	for range 2 { // the reserve, taken by connections that send nothing
		rawConn(t, srv)
	}
	time.Sleep(100 * time.Millisecond)
	c, br := rawConn(t, srv)
	if !closedWithin(c, br, 2*time.Second) {
		t.Fatal("a connection beyond the cap and the reserve stays open")
	}
}
