package httpapi

import (
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestLargeBinaryResponseCorked: with ConnContext installed, a binary response larger
// than net/http's 4 KiB connection buffer (2000 rows of the example's 4 probabilities,
// 32000 bytes) arrives whole and right, and the connection is uncorked afterwards: a
// health request after it on the same connection is answered at once, not after
// TCP_CORK's 200 ms hold.
func TestLargeBinaryResponseCorked(t *testing.T) {
	base := startServerWith(t, func(s *http.Server) { s.ConnContext = ConnContext })
	const rows = 2000
	raw := make([]byte, 4*rows*8)
	for i := range rows * 8 {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(float32(i%7)-3))
	}
	head := jsonBody(map[string]any{"inputs": []any{map[string]any{"name": "x", "datatype": "FP32", "shape": []int{rows, 8}, "parameters": map[string]any{"binary_data_size": len(raw)}}},
		"parameters": map[string]any{"binary_data_output": true}})
	for round := range 3 {
		code, hdr, b := do(t, "POST", base+"/v2/models/mlp/infer", append(append([]byte{}, head...), raw...), map[string]string{headerLength: strconv.Itoa(len(head))})
		if code != 200 {
			t.Fatalf("round %d: %d %s", round, code, b)
		}
		n, _ := strconv.Atoi(hdr.Get(headerLength))
		if n <= 0 || len(b)-n != 4*rows*4 || !strings.Contains(string(b[:n]), `"binary_data_size":32000`) {
			t.Fatalf("round %d: header %d of %d bytes: %.200s", round, n, len(b), b)
		}
		if cl := hdr.Get("Content-Length"); cl != strconv.Itoa(len(b)) {
			t.Fatalf("round %d: Content-Length %q for %d bytes", round, cl, len(b))
		}
		for r := range rows {
			sum := 0.0
			for c := range 4 {
				sum += float64(math.Float32frombits(binary.LittleEndian.Uint32(b[n+16*r+4*c:])))
			}
			if math.Abs(sum-1) > 1e-5 {
				t.Fatalf("round %d: row %d of the probabilities sums to %v", round, r, sum)
			}
		}
		// a small response on the same keep-alive connection: a corked socket would
		// hold it for 200 ms
		start := time.Now()
		if code, _, b := do(t, "GET", base+"/v2/health/ready", nil, nil); code != 200 {
			t.Fatalf("round %d: ready: %d %s", round, code, b)
		}
		if d := time.Since(start); d > 150*time.Millisecond {
			t.Errorf("round %d: a health request after it took %v: the connection stayed corked", round, d)
		}
	}
}

// TestCorkedFlushesTheWholeResponseBeforeItReturns: a response larger than net/http's
// buffers reaches the client whole while its handler is still running after corked
// returns: nothing of it (the tail net/http would otherwise flush after the handler)
// goes out alone after the uncork.
func TestCorkedFlushesTheWholeResponseBeforeItReturns(t *testing.T) {
	const size = 33*1024 + 300 // header and first bytes in one write, a middle, a 1 KiB tail
	received := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(size))
		corked(r, w, func() { // as infer writes: a small JSON header, then each output
			w.WriteHeader(http.StatusOK)
			body := bytes.Repeat([]byte{'k'}, size)
			for _, part := range [][]byte{body[:300], body[300 : size-1024], body[size-1024:]} {
				w.Write(part)
			}
		})
		select { // the handler holds on until the client has every byte
		case <-received:
		case <-time.After(5 * time.Second):
		}
	}))
	srv.Config.ConnContext = ConnContext
	srv.Start()
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	start := time.Now()
	b, err := io.ReadAll(resp.Body)
	close(received)
	if err != nil || len(b) != size {
		t.Fatalf("read %d of %d bytes: %v", len(b), size, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the body's last bytes came %v later, when the handler returned: corked did not flush them", d)
	}
}
