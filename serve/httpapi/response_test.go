package httpapi

import (
	"encoding/json"
	"math"
	"regexp"
	"strconv"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/kilnrt/kiln/serve"
)

// TestResponseHeadIsTheMapEncoding: the typed response head encodes byte for byte as
// the same fields in a map (keys sorted), for outputs as JSON data, as binary data and
// in shared memory, with and without a request id.
func TestResponseHeadIsTheMapEncoding(t *testing.T) {
	ref := &serve.SharedMemoryRef{Region: "r<1>", Offset: 64, ByteSize: 48}
	for _, id := range []string{"", "req-7&<x>"} {
		typed := jsonResponse{ID: id, Model: "m", Version: "2", Outputs: []jsonOutput{
			{Name: "probs", Datatype: "FP32", Shape: []int64{3, 4}, Data: json.RawMessage(`[0.5,1]`)},
			{Name: "ids", Datatype: "INT64", Shape: []int64{2}, Parameters: binaryDataSize{16}},
			{Name: "out", Datatype: "FP32", Shape: []int64{}, Parameters: shmParams(ref)},
		}}
		mapped := gin.H{"model_name": "m", "model_version": "2", "outputs": []gin.H{
			{"name": "probs", "datatype": "FP32", "shape": []int64{3, 4}, "data": json.RawMessage(`[0.5,1]`)},
			{"name": "ids", "datatype": "INT64", "shape": []int64{2}, "parameters": gin.H{"binary_data_size": 16}},
			{"name": "out", "datatype": "FP32", "shape": []int64{}, "parameters": shmParams(ref)},
		}}
		if id != "" {
			mapped["id"] = id
		}
		got, err := json.Marshal(&typed)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(mapped)
		if string(got) != string(want) {
			t.Errorf("typed head\n%s\nwant the map's\n%s", got, want)
		}
	}
}

// TestInferResponseCarriesServerTiming: a response's Server-Timing header gives its
// execution time as "infer;dur=MS", the same span the statistics count as
// compute_infer (one request: the same nanoseconds, to the microsecond printed).
func TestInferResponseCarriesServerTiming(t *testing.T) {
	url := startServer(t)
	body := jsonBody(map[string]any{"inputs": []any{map[string]any{"name": "x", "datatype": "FP32", "shape": []int{3, 8}, "data": x}}})
	code, h, b := do(t, "POST", url+"/v2/models/mlp/infer", body, nil)
	if code != 200 {
		t.Fatalf("infer: %d %s", code, b)
	}
	m := regexp.MustCompile(`^infer;dur=(\d+\.\d{3})$`).FindStringSubmatch(h.Get("Server-Timing"))
	if m == nil {
		t.Fatalf("Server-Timing %q, want infer;dur=MS with three decimals", h.Get("Server-Timing"))
	}
	ms, _ := strconv.ParseFloat(m[1], 64)
	_, _, b = do(t, "GET", url+"/v2/models/mlp/stats", nil, nil)
	var st struct {
		ModelStats []struct {
			InferenceStats struct {
				ComputeInfer struct {
					Count int64 `json:"count"`
					Ns    int64 `json:"ns"`
				} `json:"compute_infer"`
			} `json:"inference_stats"`
		} `json:"model_stats"`
	}
	if err := json.Unmarshal(b, &st); err != nil || len(st.ModelStats) != 1 {
		t.Fatalf("stats %s: %v", b, err)
	}
	ci := st.ModelStats[0].InferenceStats.ComputeInfer
	if ci.Count != 1 || math.Abs(float64(ci.Ns)/1e6-ms) > 0.0005 {
		t.Fatalf("Server-Timing says %.3f ms; the statistics' compute_infer %d ns over %d executions", ms, ci.Ns, ci.Count)
	}
}
