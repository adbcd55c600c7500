package httpapi

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/kilnrt/kiln/internal/testdata"
	"github.com/kilnrt/kiln/serve"
)

func startShmServer(t *testing.T) string {
	t.Helper()
	svc := openService(t, serve.Options{Repository: mlpRepo(t)})
	srv := httptest.NewServer(New(svc, Options{MaxRequestBytes: 1 << 20, Version: "test"}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func register(t *testing.T, base, region, key string, offset, size uint64) (int, string) {
	t.Helper()
	code, _, b := do(t, "POST", base+"/v2/systemsharedmemory/region/"+url.PathEscape(region)+"/register",
		jsonBody(map[string]any{"key": key, "offset": offset, "byte_size": size}), nil)
	return code, string(b)
}

// shmInfer is the MLP's request with x read from region at 0 (96 bytes) and probs
// written to it at outAt (room for room bytes).
func shmInfer(region string, outAt, room int) []byte {
	return jsonBody(map[string]any{
		"inputs": []any{map[string]any{"name": "x", "datatype": "FP32", "shape": []int{3, 8},
			"parameters": map[string]any{"shared_memory_region": region, "shared_memory_byte_size": 96}}},
		"outputs": []any{map[string]any{"name": "probs",
			"parameters": map[string]any{"shared_memory_region": region, "shared_memory_offset": outAt, "shared_memory_byte_size": room}}},
	})
}

// TestSystemSharedMemoryInferEqualsThePlainRequest: a region registered over REST
// serves an inference's input and takes its output (not in the body), with the plain
// request's results; status lists the region until it is unregistered; the server
// advertises the extension.
func TestSystemSharedMemoryInferEqualsThePlainRequest(t *testing.T) {
	base := startShmServer(t)
	key, path := testdata.SharedMemoryObject(t, 4096)
	obj := make([]byte, 4096)
	for i, v := range x {
		binary.LittleEndian.PutUint32(obj[128+4*i:], math.Float32bits(v))
	}
	if err := os.WriteFile(path, obj, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, b := register(t, base, "io", key, 128, 1024); code != 200 {
		t.Fatalf("register: %d %s", code, b)
	}

	code, _, b := do(t, "POST", base+"/v2/models/mlp/infer", jsonBody(map[string]any{
		"inputs": []any{map[string]any{"name": "x", "datatype": "FP32", "shape": []int{3, 8}, "data": x}}}), nil)
	if code != 200 {
		t.Fatalf("plain: %d %s", code, b)
	}
	var plain struct {
		Outputs []struct {
			Data []float64 `json:"data"`
		} `json:"outputs"`
	}
	json.Unmarshal(b, &plain)
	checkProbs(t, plain.Outputs[0].Data)

	code, _, b = do(t, "POST", base+"/v2/models/mlp/infer", shmInfer("io", 512, 100), nil)
	if code != 200 {
		t.Fatalf("shared memory: %d %s", code, b)
	}
	var resp struct {
		Outputs []struct {
			Name       string         `json:"name"`
			Data       any            `json:"data"`
			Parameters map[string]any `json:"parameters"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(b, &resp); err != nil || len(resp.Outputs) != 1 || resp.Outputs[0].Data != nil ||
		resp.Outputs[0].Parameters["shared_memory_region"] != "io" || resp.Outputs[0].Parameters["shared_memory_byte_size"] != float64(48) {
		t.Fatalf("response %s", b)
	}
	obj, _ = os.ReadFile(path)
	for i, want := range plain.Outputs[0].Data {
		got := math.Float32frombits(binary.LittleEndian.Uint32(obj[128+512+4*i:]))
		if math.Abs(float64(got)-want) > 1e-6 {
			t.Fatalf("probs[%d] in shared memory %v, plain request %v", i, got, want)
		}
	}

	for _, p := range []string{"/v2/systemsharedmemory/status", "/v2/systemsharedmemory/region/io/status"} {
		code, _, b = do(t, "GET", base+p, nil, nil)
		if want := fmt.Sprintf(`[{"byte_size":1024,"key":%q,"name":"io","offset":128}]`, key); code != 200 || string(b) != want {
			t.Fatalf("%s: %d %s, want %s", p, code, b, want)
		}
	}
	if code, _, b = do(t, "GET", base+"/v2", nil, nil); !strings.Contains(string(b), `"system_shared_memory"`) || strings.Contains(string(b), "cuda") {
		t.Fatalf("server metadata %s", b)
	}
	if code, _, b = do(t, "POST", base+"/v2/systemsharedmemory/region/io/unregister", nil, nil); code != 200 {
		t.Fatalf("unregister: %d %s", code, b)
	}
	if code, _, b = do(t, "GET", base+"/v2/systemsharedmemory/status", nil, nil); code != 200 || string(b) != "[]" {
		t.Fatalf("status after unregister: %d %s", code, b)
	}
	if code, _, b = do(t, "GET", base+"/v2/systemsharedmemory/region/io/status", nil, nil); code != 404 || !strings.Contains(string(b), `\"io\"`) {
		t.Fatalf("status of an unregistered region: %d %s", code, b)
	}
	if code, _, b = do(t, "POST", base+"/v2/models/mlp/infer", shmInfer("io", 512, 100), nil); code != 400 || !strings.Contains(string(b), `region \"io\"`) {
		t.Fatalf("inference on an unregistered region: %d %s", code, b)
	}
	// unregister all
	register(t, base, "a", key, 0, 64)
	register(t, base, "b", key, 64, 64)
	if code, _, b = do(t, "POST", base+"/v2/systemsharedmemory/unregister", nil, nil); code != 200 {
		t.Fatalf("unregister all: %d %s", code, b)
	}
	if _, _, b = do(t, "GET", base+"/v2/systemsharedmemory/status", nil, nil); string(b) != "[]" {
		t.Fatalf("status after unregistering all: %s", b)
	}
}

// TestHostileSharedMemoryOverREST: hostile keys (traversals, separators, a symlink to
// a file outside /dev/shm, a FIFO), a region larger than its object, an inference
// past its region and an object truncated after registration answer 400 naming the
// region; the file outside is untouched and the server keeps serving.
func TestHostileSharedMemoryOverREST(t *testing.T) {
	base := startShmServer(t)
	hostile, outside := testdata.HostileSharedMemory(t)
	before, _ := os.ReadFile(outside)
	keys := append([]string{"../etc", "a/b", "/../etc/passwd", "", strings.Repeat("k", 300)}, hostile["symlink"], hostile["fifo"], hostile["dir"])
	for _, key := range keys {
		if code, b := register(t, base, "bad", key, 0, 16); code != 400 || !strings.Contains(b, `region \"bad\"`) {
			t.Errorf("key %q: %d %s", key, code, b)
		}
	}
	small, _ := testdata.SharedMemoryObject(t, 64)
	if code, b := register(t, base, "small", small, 32, 64); code != 400 || !strings.Contains(b, `region \"small\"`) {
		t.Errorf("a region past its object: %d %s", code, b)
	}
	if code, b := register(t, base, "small", small, 0, 64); code != 200 {
		t.Fatalf("register: %d %s", code, b)
	}
	if code, _, b := do(t, "POST", base+"/v2/models/mlp/infer", shmInfer("small", 0, 64), nil); code != 400 || !strings.Contains(string(b), `region \"small\"`) {
		t.Errorf("an input past its region: %d %s", code, b)
	}
	wrongSize := jsonBody(map[string]any{"inputs": []any{map[string]any{"name": "x", "datatype": "FP32", "shape": []int{3, 8},
		"parameters": map[string]any{"shared_memory_region": "small", "shared_memory_byte_size": 64}}}})
	if code, _, b := do(t, "POST", base+"/v2/models/mlp/infer", wrongSize, nil); code != 400 || !strings.Contains(string(b), "takes 96 bytes") {
		t.Errorf("a byte size that is not the tensor's: %d %s", code, b)
	}
	big, bigPath := testdata.SharedMemoryObject(t, 4096)
	if code, b := register(t, base, "shrinks", big, 0, 4096); code != 200 {
		t.Fatalf("register: %d %s", code, b)
	}
	os.Truncate(bigPath, 16)
	if code, _, b := do(t, "POST", base+"/v2/models/mlp/infer", shmInfer("shrinks", 512, 100), nil); code != 400 || !strings.Contains(string(b), `region \"shrinks\"`) {
		t.Errorf("a truncated object: %d %s", code, b)
	}
	if code, b := register(t, base, "..%2Fevil", small, 0, 64); code != 400 || strings.Contains(b, "evil") {
		t.Errorf("a region name with a separator: %d %s", code, b)
	}
	if after, _ := os.ReadFile(outside); !bytes.Equal(before, after) {
		t.Fatal("the file outside /dev/shm changed")
	}
	if code, _, _ := do(t, "GET", base+"/v2/health/live", nil, nil); code != 200 {
		t.Fatal("the server stopped serving")
	}
}

// TestCUDASharedMemoryIsRefusedByName: every CUDA shared memory endpoint answers 501
// saying that kiln does not implement it.
func TestCUDASharedMemoryIsRefusedByName(t *testing.T) {
	base := startShmServer(t)
	for _, e := range []struct{ method, path string }{
		{"GET", "/v2/cudasharedmemory/status"}, {"GET", "/v2/cudasharedmemory/region/r/status"},
		{"POST", "/v2/cudasharedmemory/register"}, {"POST", "/v2/cudasharedmemory/region/r/register"},
		{"POST", "/v2/cudasharedmemory/unregister"}, {"POST", "/v2/cudasharedmemory/region/r/unregister"},
	} {
		code, _, b := do(t, e.method, base+e.path, []byte(`{"raw_handle":{"b64":"AA=="},"device_id":0,"byte_size":4}`), nil)
		if code != 501 || !strings.Contains(string(b), "kiln does not implement CUDA shared memory") {
			t.Errorf("%s %s: %d %s", e.method, e.path, code, b)
		}
	}
}

// TestSharedMemoryUnregisterDuringInferences: inferences on a region while it is
// unregistered and registered again answer 200 or 400, never anything else, and each
// 200 leaves a softmax in the region.
func TestSharedMemoryUnregisterDuringInferences(t *testing.T) {
	base := startShmServer(t)
	key, path := testdata.SharedMemoryObject(t, 4096)
	obj := make([]byte, 4096)
	for i, v := range x {
		binary.LittleEndian.PutUint32(obj[4*i:], math.Float32bits(v))
	}
	os.WriteFile(path, obj, 0o600)
	register(t, base, "flaky", key, 0, 4096)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 50 {
			do(t, "POST", base+"/v2/systemsharedmemory/region/flaky/unregister", nil, nil)
			register(t, base, "flaky", key, 0, 4096)
		}
	}()
	ok := 0
	for i := 0; ; i++ {
		select {
		case <-done:
			if ok == 0 {
				t.Log("no inference found the region registered")
			}
			return
		default:
		}
		code, _, b := do(t, "POST", base+"/v2/models/mlp/infer", shmInfer("flaky", 1024, 48), nil)
		switch {
		case code == 200:
			ok++
			out, _ := os.ReadFile(path)
			probs := make([]float64, 12)
			for j := range probs {
				probs[j] = float64(math.Float32frombits(binary.LittleEndian.Uint32(out[1024+4*j:])))
			}
			checkProbs(t, probs)
		case code != 400 || !strings.Contains(string(b), `region \"flaky\"`):
			t.Fatalf("inference %d: %d %s", i, code, b)
		}
	}
}

// TestHostileRegionNameIsNotLogged: the access log shows the route's pattern, not a
// region name that is not a valid name.
func TestHostileRegionNameIsNotLogged(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	svc := openService(t, serve.Options{Repository: mlpRepo(t)})
	srv := httptest.NewServer(New(svc, Options{Log: zap.New(core)}))
	t.Cleanup(srv.Close)
	for _, name := range []string{"%1b[31mred", "..%2Fevil", "a%0Ab"} {
		if code, _, b := do(t, "POST", srv.URL+"/v2/systemsharedmemory/region/"+name+"/register", []byte(`{"key":"/k","byte_size":4}`), nil); code != 400 {
			t.Fatalf("%s: %d %s", name, code, b)
		}
	}
	for _, e := range logs.All() {
		if p := e.ContextMap()["path"]; p != "/v2/systemsharedmemory/region/:region/register" {
			t.Errorf("logged path %q", p)
		}
	}
}

// TestHostileRegionNamesGetOneRefusal: every hostile name that is not a valid name,
// escaped into the path of every region endpoint, gets the same 400 and body, which
// does not echo it, and nothing is registered.
func TestHostileRegionNamesGetOneRefusal(t *testing.T) {
	base := startShmServer(t)
	key, _ := testdata.SharedMemoryObject(t, 64)
	body := jsonBody(map[string]any{"key": key, "offset": 0, "byte_size": 64})
	var want string
	tried := 0
	for _, name := range testdata.HostileModelNames {
		if serve.ValidModelName(name) {
			continue
		}
		tried++
		r := "/v2/systemsharedmemory/region/" + url.PathEscape(name)
		for _, ep := range []struct{ method, path string }{{"POST", r + "/register"}, {"POST", r + "/unregister"}, {"GET", r + "/status"}} {
			code, _, b := do(t, ep.method, base+ep.path, body, nil)
			if want == "" {
				want = string(b)
			}
			if code != 400 || string(b) != want || !strings.Contains(want, "region name") {
				t.Errorf("%s %q: %d %s, want 400 %s", ep.method, ep.path, code, b, want)
			}
		}
	}
	if _, _, b := do(t, "GET", base+"/v2/systemsharedmemory/status", nil, nil); tried < 30 || string(b) != "[]" {
		t.Fatalf("%d names tried; regions %s", tried, b)
	}
}
