package httpapi

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kilnrt/kiln/serve"
	"github.com/kilnrt/kiln/serve/servetest"
)

// x is the example model's input (3×8), and probs row sums are 1 (softmax).
var x = func() []float32 {
	v := make([]float32, 24)
	for i := range v {
		v[i] = float32(i%5) - 2
	}
	return v
}()

func startServer(t *testing.T) string {
	t.Helper()
	return startServerWith(t, nil)
}

// startServerWith is startServer with a hook on the http.Server before it starts.
func startServerWith(t *testing.T, configure func(*http.Server)) string {
	t.Helper()
	return startServerOpts(t, Options{MaxRequestBytes: 1 << 20}, func(s *httptest.Server) {
		if configure != nil {
			configure(s.Config)
		}
	}).URL
}

// startServerOpts serves the example MLP with opts (Version "test"), with a hook on
// the test server (its Config and Listener) before it starts.
func startServerOpts(t *testing.T, opts Options, configure func(*httptest.Server)) *httptest.Server {
	t.Helper()
	svc := openService(t, serve.Options{Repository: mlpRepo(t)})
	opts.Version = "test"
	srv := httptest.NewUnstartedServer(New(svc, opts))
	if configure != nil {
		configure(srv)
	}
	srv.Start()
	t.Cleanup(srv.Close) // before the service's cleanup
	return srv
}

// mlpRepo is a repository holding the example MLP as <repo>/mlp/1/model.onnx.
func mlpRepo(t testing.TB) string {
	t.Helper()
	repo := t.TempDir()
	src, err := os.ReadFile("../../examples/mlp/model.onnx")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(repo, "mlp", "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "mlp", "1", "model.onnx"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	return repo
}

// openService opens a Service with sopts on the test engine (the reference
// interpreter: no C compiler), closed when the test ends.
func openService(t *testing.T, sopts serve.Options) *serve.Service {
	t.Helper()
	if sopts.Engine == nil {
		sopts.Engine = &servetest.Engine{Delay: 150 * time.Millisecond} // a compile's stand-in: longer than the write timeouts tested
	}
	svc, err := serve.New(sopts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	return svc
}

func do(t *testing.T, method, url string, body []byte, hdr map[string]string) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, bytes.NewReader(body))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func jsonBody(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func checkProbs(t *testing.T, probs []float64) {
	t.Helper()
	if len(probs) != 12 {
		t.Fatalf("%d probabilities", len(probs))
	}
	for r := 0; r < 3; r++ {
		s := probs[4*r] + probs[4*r+1] + probs[4*r+2] + probs[4*r+3]
		if math.Abs(s-1) > 1e-5 {
			t.Fatalf("row %d sums to %v", r, s)
		}
	}
}

func TestHealthAndMetadata(t *testing.T) {
	url := startServer(t)
	for _, p := range []string{"/v2/health/live", "/v2/health/ready", "/v2/models/mlp/ready", "/v2/models/mlp/versions/1/ready"} {
		if code, _, _ := do(t, "GET", url+p, nil, nil); code != 200 {
			t.Fatalf("%s: %d", p, code)
		}
	}
	_, _, b := do(t, "GET", url+"/v2", nil, nil)
	var sm struct {
		Name       string   `json:"name"`
		Extensions []string `json:"extensions"`
	}
	json.Unmarshal(b, &sm)
	if sm.Name != "kiln" || strings.Join(sm.Extensions, ",") != "binary_tensor_data,classification,statistics,model_configuration,model_repository,system_shared_memory" {
		t.Fatalf("server metadata %s", b)
	}
	code, _, b := do(t, "GET", url+"/v2/models/mlp/config", nil, nil)
	if code != 200 || !strings.Contains(string(b), `"name":"mlp"`) || !strings.Contains(string(b), `"platform":"onnxruntime_onnx"`) || !strings.Contains(string(b), `"max_batch_size":0`) {
		t.Fatalf("config %d %s", code, b)
	}
	code, _, b = do(t, "GET", url+"/v2/models/mlp", nil, nil)
	if code != 200 || !strings.Contains(string(b), `"inputs":[{"datatype":"FP32","name":"x","shape":[-1,8]}]`) {
		t.Fatalf("model metadata %d %s", code, b)
	}
}

func TestInferJSONAndBinary(t *testing.T) {
	url := startServer(t)
	// JSON, nested data
	nested := [][]float32{x[:8], x[8:16], x[16:]}
	code, _, b := do(t, "POST", url+"/v2/models/mlp/infer", jsonBody(map[string]any{"id": "a",
		"inputs": []any{map[string]any{"name": "x", "datatype": "FP32", "shape": []int{3, 8}, "data": nested}}}), nil)
	if code != 200 {
		t.Fatalf("%d %s", code, b)
	}
	var resp struct {
		ID      string `json:"id"`
		Model   string `json:"model_name"`
		Outputs []struct {
			Name  string    `json:"name"`
			Shape []int64   `json:"shape"`
			Data  []float64 `json:"data"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(b, &resp); err != nil || resp.ID != "a" || resp.Model != "mlp" || resp.Outputs[0].Name != "probs" {
		t.Fatalf("response %s (%v)", b, err)
	}
	checkProbs(t, resp.Outputs[0].Data)
	jsonProbs := resp.Outputs[0].Data

	// binary in, binary out, gzip-encoded
	raw := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
	}
	head := jsonBody(map[string]any{"inputs": []any{map[string]any{"name": "x", "datatype": "FP32", "shape": []int{3, 8}, "parameters": map[string]any{"binary_data_size": len(raw)}}},
		"outputs": []any{map[string]any{"name": "probs", "parameters": map[string]any{"binary_data": true}}}})
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(append(append([]byte{}, head...), raw...))
	zw.Close()
	code, hdr, b := do(t, "POST", url+"/v2/models/mlp/versions/1/infer", gz.Bytes(), map[string]string{headerLength: strconv.Itoa(len(head)), "Content-Encoding": "gzip"})
	if code != 200 {
		t.Fatalf("binary: %d %s", code, b)
	}
	n, _ := strconv.Atoi(hdr.Get(headerLength))
	if n <= 0 || len(b)-n != 48 || !strings.Contains(string(b[:n]), `"binary_data_size":48`) {
		t.Fatalf("binary response: header %d of %d bytes: %s", n, len(b), b[:min(n, len(b))])
	}
	for i := range 12 {
		v := float64(math.Float32frombits(binary.LittleEndian.Uint32(b[n+4*i:])))
		if math.Abs(v-jsonProbs[i]) > 1e-6 {
			t.Fatalf("binary output %d = %v, JSON said %v", i, v, jsonProbs[i])
		}
	}
	_, _, b = do(t, "GET", url+"/v2/models/mlp/stats", nil, nil)
	if !strings.Contains(string(b), `"success":{"count":2,`) {
		t.Fatalf("stats %s", b)
	}
}

// TestMalformedRequests: each gets a 4xx whose message names the problem, and the
// server keeps serving.
func TestMalformedRequests(t *testing.T) {
	url := startServer(t)
	good := func() map[string]any {
		return map[string]any{"inputs": []any{map[string]any{"name": "x", "datatype": "FP32", "shape": []int{3, 8}, "data": x}}}
	}
	with := func(f func(in map[string]any)) []byte {
		r := good()
		f(r["inputs"].([]any)[0].(map[string]any))
		return jsonBody(r)
	}
	infer := url + "/v2/models/mlp/infer"
	type tc struct {
		name, url string
		body      []byte
		hdr       map[string]string
		code      int
		want      string
	}
	cases := []tc{
		{"wrong dtype", infer, with(func(in map[string]any) { in["datatype"] = "INT32"; in["data"] = make([]int, 24) }), nil, 400, `input \"x\" is INT32`},
		{"unknown dtype", infer, with(func(in map[string]any) { in["datatype"] = "FLOAT" }), nil, 400, `datatype \"FLOAT\"`},
		{"shape/data mismatch", infer, with(func(in map[string]any) { in["shape"] = []int{2, 8} }), nil, 400, "more elements than the shape"},
		{"too few elements", infer, with(func(in map[string]any) { in["data"] = x[:20] }), nil, 400, "20 elements for shape"},
		{"wrong static dim", infer, with(func(in map[string]any) { in["shape"] = []int{4, 6} }), nil, 400, "takes FP32[-1 8]"},
		{"wrong rank", infer, with(func(in map[string]any) { in["shape"] = []int{24} }), nil, 400, "has shape [24]"},
		{"negative dim", infer, with(func(in map[string]any) { in["shape"] = []int{-3, 8} }), nil, 400, "negative dimension"},
		{"huge shape", infer, with(func(in map[string]any) { in["shape"] = []int64{100000000000, 8} }), nil, 400, "has more than 4294967296 elements"},
		{"string in FP32 data", infer, with(func(in map[string]any) { in["data"] = []any{"a"} }), nil, 400, `at byte 1`},
		{"object as data", infer, with(func(in map[string]any) { in["data"] = map[string]int{"a": 1} }), nil, 400, "data must be an array"},
		{"no data", infer, with(func(in map[string]any) { delete(in, "data") }), nil, 400, "has no data"},
		{"no name", infer, with(func(in map[string]any) { in["name"] = "" }), nil, 400, "without a name"},
		{"unknown input", infer, with(func(in map[string]any) { in["name"] = "y" }), nil, 400, `needs input \"x\"`},
		{"unknown model", url + "/v2/models/nope/infer", jsonBody(good()), nil, 404, `unknown model (a model is a folder`},
		{"unknown version", url + "/v2/models/mlp/versions/9/infer", jsonBody(good()), nil, 404, "has no version 9"},
		{"non-numeric version", url + "/v2/models/mlp/versions/x/infer", jsonBody(good()), nil, 400, `version \"x\"`},
		{"unknown output", infer, func() []byte { r := good(); r["outputs"] = []any{map[string]any{"name": "logits"}}; return jsonBody(r) }(), nil, 400, `no output \"logits\"`},
		{"bad JSON", infer, []byte(`{"inputs": [`), nil, 400, "not valid JSON"},
		{"not JSON", infer, []byte("hello"), nil, 400, "not valid JSON"},
		{"inputs not a list", infer, []byte(`{"inputs": 3}`), nil, 400, "not an inference request: inputs: "},
		{"shape not integers", infer, []byte(`{"inputs": [{"name": "x", "shape": [3, 8.5]}]}`), nil, 400, "inputs[0].shape[1]: 8.5 is not a 64-bit integer"},
		{"empty body", infer, nil, nil, 400, "not valid JSON"},
		{"oversize body", infer, bytes.Repeat([]byte(" "), 2<<20), nil, 413, "exceeds"},
		{"oversize after gzip", infer, gzipped(bytes.Repeat([]byte(" "), 2<<20)), map[string]string{"Content-Encoding": "gzip"}, 413, "exceeds"},
		{"truncated gzip", infer, gzipped(jsonBody(good()))[:20], map[string]string{"Content-Encoding": "gzip"}, 400, "reading the body"},
		{"unknown encoding", infer, jsonBody(good()), map[string]string{"Content-Encoding": "br"}, 400, "Content-Encoding"},
		{"bad header length", infer, jsonBody(good()), map[string]string{headerLength: "abc"}, 400, `\"abc\" is not a byte count`},
		{"header length past the body", infer, jsonBody(good()), map[string]string{headerLength: "99999"}, 400, "99999 is more than the"},
		{"header length beyond body", infer, jsonBody(good()), map[string]string{headerLength: "999999"}, 400, headerLength},
		{"binary size beyond body", infer, binaryReq(96, 40), map[string]string{headerLength: strconv.Itoa(len(binaryHead(96)))}, 400, "binary_data_size 96"},
		{"binary size not matching shape", infer, binaryReq(40, 40), map[string]string{headerLength: strconv.Itoa(len(binaryHead(40)))}, 400, "40 bytes of data"},
		{"leftover binary bytes", infer, binaryReq(96, 100), map[string]string{headerLength: strconv.Itoa(len(binaryHead(96)))}, 400, "no input claims"},
		{"negative binary size", infer, binaryReq(-4, 0), map[string]string{headerLength: strconv.Itoa(len(binaryHead(-4)))}, 400, "not a byte count"},
		{"truncated JSON body", infer, jsonBody(good())[:50], nil, 400, "not valid JSON"},
		{"bad BOOL", infer, with(func(in map[string]any) { in["datatype"] = "BOOL"; in["data"] = make([]int, 24) }), nil, 400, "element 0 is 0, want true or false"},
		{"unknown endpoint", url + "/v2/models/mlp/explode", nil, nil, 404, "no such endpoint"},
		{"wrong method", url + "/v2/health/live", nil, nil, 405, "not allowed"},
	}
	for _, c := range cases {
		method := "POST"
		if c.name == "wrong method" {
			method = "DELETE"
		}
		code, _, b := do(t, method, c.url, c.body, c.hdr)
		if code != c.code || !strings.Contains(string(b), c.want) || !strings.HasPrefix(string(b), `{"error":`) {
			t.Errorf("%s: %d %s; want %d and %q", c.name, code, b, c.code, c.want)
		}
	}
	if code, _, b := do(t, "POST", infer, jsonBody(good()), nil); code != 200 {
		t.Fatalf("after %d malformed requests: %d %s", len(cases), code, b)
	}
	t.Logf("%d malformed requests answered", len(cases))
	if code, _, b := do(t, "POST", url+"/v2/repository/models/mlp/unload", nil, nil); code != 403 || !strings.Contains(string(b), "explicit model control is off (start the server with --model-control-mode explicit)") {
		t.Fatalf("unload without repository control: %d %s", code, b)
	}
}

func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func binaryHead(size int) []byte {
	return jsonBody(map[string]any{"inputs": []any{map[string]any{"name": "x", "datatype": "FP32", "shape": []int{3, 8}, "parameters": map[string]any{"binary_data_size": size}}}})
}

func binaryReq(size, have int) []byte {
	return append(binaryHead(size), make([]byte, have)...)
}
