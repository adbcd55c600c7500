package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/kilnrt/kiln/serve"
	"github.com/kilnrt/kiln/serve/servetest"
)

// FuzzInferRequest sends arbitrary bodies, with and without the binary extension's
// header length, to the example MLP's infer endpoint. Whatever the bytes, the server
// answers: 200 with a JSON response, or a client error (400, 404, 413) whose body is a
// JSON error; never a 500, never a panic, and the model keeps serving.
func FuzzInferRequest(f *testing.F) {
	good := jsonBody(map[string]any{"inputs": []any{map[string]any{"name": "x", "datatype": "FP32", "shape": []int{3, 8}, "data": x}}})
	f.Add(good, -1)
	f.Add(binaryReq(96, 96), len(binaryHead(96)))
	f.Add(binaryReq(96, 40), len(binaryHead(96)))
	f.Add(binaryReq(-4, 0), len(binaryHead(-4)))
	f.Add([]byte(`{"inputs":[{"name":"x","datatype":"BYTES","shape":[3,8],"data":["a"]}]}`), -1)
	f.Add([]byte(`{"inputs":[{"name":"x","datatype":"FP32","shape":[100000000000,8],"data":[1]}]}`), -1)
	f.Add([]byte(`{"inputs":[{"name":"x","datatype":"FP32","shape":[3,8],"parameters":{"shared_memory_region":"r","shared_memory_byte_size":96}}]}`), -1)
	f.Add([]byte(`{"parameters":{"sequence_id":18446744073709551615,"sequence_start":true},"inputs":[]}`), -1)
	f.Add([]byte(`{"inputs":[{"name":"x","datatype":"FP32","shape":[3,8],"data":[[1,2],[3]]}],"outputs":[{"name":"probs","parameters":{"classification":3}}]}`), -1)

	svc, err := serve.New(serve.Options{Repository: mlpRepo(f), Engine: &servetest.Engine{}})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { svc.Close() })
	h := New(svc, Options{MaxRequestBytes: 1 << 16, Version: "test"})
	post := func(body []byte, headerLen int) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/v2/models/mlp/infer", bytes.NewReader(body))
		if headerLen >= 0 {
			req.Header.Set(headerLength, strconv.Itoa(headerLen))
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	f.Fuzz(func(t *testing.T, body []byte, headerLen int) {
		rec := post(body, headerLen)
		switch rec.Code {
		case http.StatusOK:
			if headerLen < 0 && !json.Valid(rec.Body.Bytes()) {
				t.Fatalf("200 with a body that is not JSON: %q", rec.Body.Bytes())
			}
		case http.StatusBadRequest, http.StatusNotFound, http.StatusRequestEntityTooLarge:
			var e struct {
				Error string `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == "" {
				t.Fatalf("%d without a JSON error: %q", rec.Code, rec.Body.Bytes())
			}
		default:
			t.Fatalf("status %d for a client's bytes: %s", rec.Code, rec.Body.Bytes())
		}
		if rec := post(good, -1); rec.Code != http.StatusOK {
			t.Fatalf("the model stopped serving after that request: %d %s", rec.Code, rec.Body.Bytes())
		}
	})
}
