package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/serve"
	"github.com/kilnrt/kiln/serve/servetest"
)

// TestFullQueueIs503AndStatisticsShowEveryPhase: while the model's one instance is
// busy (its first batch waits for a compile) and max_queue_size requests wait, one more
// is answered 503 at once with Triton's text; once the compile is done the queued
// request is served, and the statistics report compute_input and compute_output with
// time in them, the executions, and the refusal as a failure.
func TestFullQueueIs503AndStatisticsShowEveryPhase(t *testing.T) {
	repo := mlpRepo(t)
	config := `
max_batch_size: 4
dynamic_batching { default_queue_policy { max_queue_size: 1 } }
instance_group [ { count: 1 kind: KIND_CPU } ]
`
	if err := os.WriteFile(filepath.Join(repo, "mlp", "config.pbtxt"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var compiling atomic.Bool
	svc := openService(t, serve.Options{Repository: repo, Engine: &servetest.Engine{Hook: func(ctx context.Context, _ *engine.Model) error {
		compiling.Store(true)
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}})
	srv := httptest.NewServer(New(svc, Options{Version: "test"}))
	t.Cleanup(srv.Close)
	url := srv.URL + "/v2/models/mlp/infer"
	body := jsonBody(map[string]any{"inputs": []any{map[string]any{"name": "x", "datatype": "FP32", "shape": []int{1, 8}, "data": make([]float32, 8)}}})

	codes := make(chan int, 2)
	send := func() {
		code, _, _ := do(t, "POST", url, body, nil)
		codes <- code
	}
	go send() // runs, holding the instance while it compiles
	waitFor(t, compiling.Load)
	go send() // waits in the queue
	waitFor(t, func() bool { return pending(svc) == 1 })
	start := time.Now()
	code, _, b := do(t, "POST", url, body, nil)
	if code != http.StatusServiceUnavailable || !strings.Contains(string(b), "Exceeds maximum queue size") {
		t.Fatalf("a request beyond max_queue_size: %d %s, want 503 Exceeds maximum queue size", code, b)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("the refusal took %v", took)
	}
	close(release)
	for range 2 {
		if code := <-codes; code != http.StatusOK {
			t.Fatalf("a request before the queue was full: %d", code)
		}
	}

	_, _, b = do(t, "GET", srv.URL+"/v2/models/mlp/stats", nil, nil)
	var st struct {
		ModelStats []struct {
			InferenceCount int64 `json:"inference_count"`
			ExecutionCount int64 `json:"execution_count"`
			InferenceStats map[string]struct {
				Count int64 `json:"count"`
				Ns    int64 `json:"ns"`
			} `json:"inference_stats"`
			BatchStats []struct {
				BatchSize    int `json:"batch_size"`
				ComputeInput struct {
					Count int64 `json:"count"`
					Ns    int64 `json:"ns"`
				} `json:"compute_input"`
			} `json:"batch_stats"`
		} `json:"model_stats"`
	}
	if err := json.Unmarshal(b, &st); err != nil || len(st.ModelStats) != 1 {
		t.Fatalf("stats %s: %v", b, err)
	}
	m := st.ModelStats[0]
	is := m.InferenceStats
	if is["success"].Count != 2 || is["fail"].Count != 1 || is["compute_input"].Ns <= 0 || is["compute_output"].Ns <= 0 || is["compute_input"].Count != 2 {
		t.Errorf("inference_stats %+v", is)
	}
	if m.InferenceCount != 2 || m.ExecutionCount < 1 || m.ExecutionCount > 2 || len(m.BatchStats) == 0 || m.BatchStats[0].ComputeInput.Ns <= 0 {
		t.Errorf("counts: %d inferences, %d executions, batch_stats %+v", m.InferenceCount, m.ExecutionCount, m.BatchStats)
	}
}

func pending(svc *serve.Service) int64 {
	st, err := svc.Stats("mlp", "")
	if err != nil || len(st) == 0 {
		return -1
	}
	return st[0].Pending
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for range 1000 {
		if cond() {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("timed out waiting")
}
