package httpapi

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/kilnrt/kiln/serve"
)

// startWith serves the example MLP (as <repo>/mlp/1/model.onnx) with the given
// options on a real loopback socket.
func startWith(t *testing.T, opts Options) string {
	url, _ := startService(t, opts)
	return url
}

func startService(t *testing.T, opts Options) (string, *serve.Service) {
	t.Helper()
	svc := openService(t, serve.Options{Repository: mlpRepo(t)})
	opts.Version = "test"
	srv := httptest.NewServer(New(svc, opts))
	t.Cleanup(srv.Close)
	return srv.URL, svc
}

func inferBody() []byte {
	return jsonBody(map[string]any{"inputs": []any{map[string]any{"name": "x", "datatype": "FP32", "shape": []int{3, 8}, "data": x}}})
}

// TestBearerAuth: with a token, every route but the two health probes needs
// "Authorization: Bearer <token>"; missing or wrong tokens get 401 with a JSON error
// and a WWW-Authenticate challenge, unknown paths included.
func TestBearerAuth(t *testing.T) {
	const token = "s3cret-t0ken"
	url := startWith(t, Options{BearerToken: token})
	for _, p := range []string{"/v2/health/live", "/v2/health/ready"} {
		if code, _, b := do(t, "GET", url+p, nil, nil); code != 200 {
			t.Errorf("%s without a token: %d %s, want 200 (probes stay open)", p, code, b)
		}
	}
	refused := []struct {
		name, method, path string
		auth, challenge    string
	}{
		{"missing", "GET", "/v2", "", `Bearer realm="kiln"`},
		{"missing, model", "GET", "/v2/models/mlp", "", `Bearer realm="kiln"`},
		{"missing, model ready", "GET", "/v2/models/mlp/ready", "", `Bearer realm="kiln"`},
		{"missing, unknown path", "GET", "/v2/nope", "", `Bearer realm="kiln"`},
		{"missing, infer", "POST", "/v2/models/mlp/infer", "", `Bearer realm="kiln"`},
		{"other scheme", "GET", "/v2", "Basic " + token, `Bearer realm="kiln"`},
		{"empty bearer", "GET", "/v2", "Bearer ", `Bearer realm="kiln"`},
		{"wrong", "GET", "/v2", "Bearer nope", `Bearer realm="kiln", error="invalid_token"`},
		{"prefix of the token", "GET", "/v2", "Bearer s3cret", `Bearer realm="kiln", error="invalid_token"`},
		{"token and more", "POST", "/v2/models/mlp/infer", "Bearer " + token + "x", `Bearer realm="kiln", error="invalid_token"`},
	}
	for _, c := range refused {
		hdr := map[string]string{}
		if c.auth != "" {
			hdr["Authorization"] = c.auth
		}
		code, h, b := do(t, c.method, url+c.path, inferBody(), hdr)
		if code != 401 || h.Get("WWW-Authenticate") != c.challenge || !regexp.MustCompile(`^\{"error":"[^"]+"\}$`).Match(b) {
			t.Errorf("%s: %d, WWW-Authenticate %q, body %s; want 401, %q, {\"error\": ...}", c.name, code, h.Get("WWW-Authenticate"), b, c.challenge)
		}
	}
	for _, auth := range []string{"Bearer " + token, "bearer " + token, "Bearer  " + token + " "} {
		hdr := map[string]string{"Authorization": auth}
		if code, _, b := do(t, "GET", url+"/v2", nil, hdr); code != 200 {
			t.Errorf("GET /v2 with %q: %d %s", auth, code, b)
		}
		if code, _, b := do(t, "POST", url+"/v2/models/mlp/infer", inferBody(), hdr); code != 200 {
			t.Errorf("infer with %q: %d %s", auth, code, b)
		}
	}
	// without a token configured, nothing is asked
	open := startWith(t, Options{})
	if code, _, b := do(t, "GET", open+"/v2", nil, nil); code != 200 {
		t.Errorf("no token configured: %d %s", code, b)
	}
}

// TestRequestIDAndAccessLog: X-Request-ID is kept (or generated) and echoed, and
// every request logs one line with its id, method, path, status, duration, model and
// bytes; probes log at debug level.
func TestRequestIDAndAccessLog(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	url := startWith(t, Options{Log: zap.New(core), BearerToken: "tok"})
	auth := map[string]string{"Authorization": "Bearer tok", RequestIDHeader: "client-id-42"}
	body := inferBody()
	code, h, b := do(t, "POST", url+"/v2/models/mlp/versions/1/infer", body, auth)
	if code != 200 || h.Get(RequestIDHeader) != "client-id-42" {
		t.Fatalf("infer: %d, X-Request-ID %q: %s", code, h.Get(RequestIDHeader), b)
	}
	gen := regexp.MustCompile(`^[0-9a-f]{16}$`)
	_, h2, _ := do(t, "GET", url+"/v2/health/ready", nil, nil)
	_, h3, _ := do(t, "GET", url+"/v2", nil, map[string]string{RequestIDHeader: "has space"})
	_, h4, _ := do(t, "GET", url+"/v2", nil, map[string]string{RequestIDHeader: strings.Repeat("a", 129)})
	for i, got := range []string{h2.Get(RequestIDHeader), h3.Get(RequestIDHeader), h4.Get(RequestIDHeader)} {
		if !gen.MatchString(got) {
			t.Errorf("request %d: generated X-Request-ID %q, want 16 hex digits", i+2, got)
		}
	}
	if h3.Get(RequestIDHeader) == h4.Get(RequestIDHeader) {
		t.Errorf("two generated ids are equal: %q", h3.Get(RequestIDHeader))
	}
	lines := logs.FilterMessage("request").All()
	if len(lines) != 4 {
		t.Fatalf("%d request lines, want 4: %v", len(lines), lines)
	}
	infer := lines[0].ContextMap()
	want := map[string]any{"request_id": "client-id-42", "method": "POST", "path": "/v2/models/mlp/versions/1/infer", "status": int64(200),
		"model": "mlp", "version": "1", "device": "cpu", "bytes_in": int64(len(body)), "bytes_out": int64(len(b))}
	for k, v := range want {
		if infer[k] != v {
			t.Errorf("infer line: %s = %v (%T), want %v", k, infer[k], infer[k], v)
		}
	}
	if d, ok := infer["duration"].(time.Duration); !ok || d <= 0 {
		t.Errorf("infer line: duration %v", infer["duration"])
	}
	if lines[0].Level != zapcore.InfoLevel || lines[1].Level != zapcore.DebugLevel {
		t.Errorf("levels: infer %v, probe %v; want info, debug", lines[0].Level, lines[1].Level)
	}
	if m := lines[1].ContextMap(); m["path"] != "/v2/health/ready" || m["request_id"] != h2.Get(RequestIDHeader) {
		t.Errorf("probe line: %v", m)
	}
	// refused requests are logged too, with their status
	if m := lines[2].ContextMap(); m["status"] != int64(401) || m["request_id"] != h3.Get(RequestIDHeader) {
		t.Errorf("refused request's line: %v", m)
	}
	// an info-level logger drops the probe lines
	core2, logs2 := observer.New(zapcore.InfoLevel)
	url2 := startWith(t, Options{Log: zap.New(core2)})
	do(t, "GET", url2+"/v2/health/live", nil, nil)
	do(t, "GET", url2+"/v2/models/mlp", nil, nil)
	if n := logs2.Len(); n != 1 {
		t.Errorf("info logger: %d lines, want 1 (the probe at debug is dropped)", n)
	}
}

// TestRequestTimeout: Options.RequestTimeout bounds an inference; past it the answer
// is 504 naming the model, and the server goes on.
func TestRequestTimeout(t *testing.T) {
	url, svc := startService(t, Options{RequestTimeout: time.Nanosecond})
	code, _, b := do(t, "POST", url+"/v2/models/mlp/infer", inferBody(), nil)
	if code != http.StatusGatewayTimeout || !strings.Contains(string(b), `model \"mlp\"`) {
		t.Fatalf("1 ns timeout: %d %s, want 504 naming the model", code, b)
	}
	// the compile that request started goes on; wait for it through a server without
	// a timeout on the same service (so that it is not cut by the cleanup)
	plain := httptest.NewServer(New(svc, Options{}))
	defer plain.Close()
	if code, _, b := do(t, "POST", plain.URL+"/v2/models/mlp/infer", inferBody(), nil); code != 200 {
		t.Fatalf("no timeout, same service: %d %s", code, b)
	}
	if code, _, _ := do(t, "GET", url+"/v2/health/live", nil, nil); code != 200 {
		t.Fatalf("live after a timeout: %d", code)
	}
	long := startWith(t, Options{RequestTimeout: time.Minute})
	if code, _, b := do(t, "POST", long+"/v2/models/mlp/infer", inferBody(), nil); code != 200 {
		t.Fatalf("1 min timeout: %d %s", code, b)
	}
}
