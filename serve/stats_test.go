package serve

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/kilnrt/kiln/serve/servetest"
	"github.com/kilnrt/kiln/tensor"
)

// TestStatisticsMeasureEveryPhase: compute_input and compute_output are measured
// (non-zero) beside queue and compute_infer; a model without a batch dim counts one
// inference and one execution per request, of batch size 1; a model with
// max_batch_size but no dynamic batching counts a request's rows as inferences and the
// request as one execution of its batch size.
func TestStatisticsMeasureEveryPhase(t *testing.T) {
	repo := queueRepo(t, "max_batch_size: 0", "max_batch_size: 8")
	s, _ := openOnDevices(t, repo, &servetest.Engine{})
	for range 3 {
		if _, err := s.Infer(context.Background(), marked("mlp", 1, nil)); err != nil {
			t.Fatal(err)
		}
	}
	st, _ := s.Stats("mlp", "")
	m := st[0]
	for name, c := range map[string]Counter{"compute_input": m.ComputeInput, "compute_infer": m.Compute, "compute_output": m.ComputeOut, "queue": m.Queue} {
		if c.Count != 3 || (c.Ns <= 0 && name != "queue") {
			t.Errorf("%s = %+v: want 3 requests with their time", name, c)
		}
	}
	if m.InferenceCount != 3 || m.ExecutionCount != 3 || len(m.Batches) != 1 || m.Batches[1].ComputeInfer.Count != 3 || m.Batches[1].ComputeOutput.Ns <= 0 {
		t.Errorf("without a batch dim: %d inferences, %d executions, batches %+v; want 3, 3, {1: 3}", m.InferenceCount, m.ExecutionCount, m.Batches)
	}
	if total := m.Queue.Ns + m.ComputeInput.Ns + m.Compute.Ns + m.ComputeOut.Ns; total > m.Success.Ns {
		t.Errorf("the phases (%d ns) take longer than the requests (%d ns)", total, m.Success.Ns)
	}

	x := tensor.New(tensor.Float32, tensor.Shape{5, 8})
	req := request(x)
	req.Model = "mlp2"
	if _, err := s.Infer(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	st, _ = s.Stats("mlp2", "")
	if m := st[0]; m.InferenceCount != 5 || m.ExecutionCount != 1 || m.Batches[5].ComputeInfer.Count != 1 || m.ComputeInput.Ns <= 0 {
		t.Errorf("a 5-row request: %d inferences, %d executions, batches %+v; want 5, 1, {5: 1}", m.InferenceCount, m.ExecutionCount, m.Batches)
	}
}

// TestBatchedStatisticsCountExecutionsAndRows: requests joined into one batch count
// their rows as inferences and the batch as one execution, with the batch's compute
// times measured.
func TestBatchedStatisticsCountExecutionsAndRows(t *testing.T) {
	repo := queueRepo(t, `
max_batch_size: 4
dynamic_batching { preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 10000000 }
instance_group [ { count: 1 kind: KIND_CPU } ]
`, "")
	s, _ := openOnDevices(t, repo, &servetest.Engine{})
	var dones []<-chan error
	for i := range 4 { // 4 rows fill the batch: it runs without waiting out the delay
		dones = append(dones, inferAsync(s, marked("mlp", float32(i), nil)))
	}
	for _, done := range dones {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	st, _ := s.Stats("mlp", "")
	m := st[0]
	if m.InferenceCount != 4 || m.ExecutionCount != 1 || m.Batches[4].ComputeInfer.Count != 1 {
		t.Fatalf("4 one-row requests in one batch: %d inferences, %d executions, batches %+v", m.InferenceCount, m.ExecutionCount, m.Batches)
	}
	b := m.Batches[4]
	if b.ComputeInput.Ns <= 0 || b.ComputeOutput.Ns <= 0 || m.ComputeInput.Count != 4 || m.ComputeOut.Ns <= 0 {
		t.Fatalf("compute times of the batch %+v, of the requests input %+v output %+v", b, m.ComputeInput, m.ComputeOut)
	}
}

// tritonMetrics are the per-model metric families Triton exports, by their names.
var tritonMetrics = []string{
	"nv_inference_compute_infer_duration_us", "nv_inference_compute_input_duration_us", "nv_inference_compute_output_duration_us",
	"nv_inference_count", "nv_inference_exec_count", "nv_inference_pending_request_count", "nv_inference_queue_duration_us",
	"nv_inference_request_duration_us", "nv_inference_request_failure", "nv_inference_request_success",
}

// TestMetricsHaveTritonsNamesAndLeaveWithTheModel: the nv_inference_* families are
// exactly Triton's; the pending gauge counts the requests waiting in the queue; after
// an unload the model has no per-model series left.
func TestMetricsHaveTritonsNamesAndLeaveWithTheModel(t *testing.T) {
	repo := queueRepo(t, `
max_batch_size: 1
dynamic_batching { }
instance_group [ { count: 1 kind: KIND_CPU } ]
`, "")
	s, err := New(Options{Repository: repo, Engine: &servetest.Engine{}, Log: zap.NewNop(), RepositoryControl: true, Load: []string{"mlp"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.Metrics())
	// series per family for the model
	series := func() map[string]map[string]float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]map[string]float64{}
		for _, mf := range mfs {
			for _, m := range mf.Metric {
				for _, l := range m.Label {
					if l.GetName() == "model" && l.GetValue() == "mlp" {
						if out[mf.GetName()] == nil {
							out[mf.GetName()] = map[string]float64{}
						}
						v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
						out[mf.GetName()][m.String()] = v
					}
				}
			}
		}
		return out
	}
	m, release := holdInstance(t, s, "mlp")
	a, b := inferAsync(s, marked("mlp", 1, nil)), inferAsync(s, marked("mlp", 2, nil))
	waitQueued(t, m, 2)
	got := series()
	var nv []string
	for name := range got {
		if strings.HasPrefix(name, "nv_") {
			nv = append(nv, name)
		}
	}
	slices.Sort(nv)
	if !slices.Equal(nv, tritonMetrics) {
		t.Errorf("nv_ families %v, want Triton's %v", nv, tritonMetrics)
	}
	for _, v := range got["nv_inference_pending_request_count"] {
		if v != 2 {
			t.Errorf("nv_inference_pending_request_count = %v with two requests queued", v)
		}
	}
	release()
	for _, done := range []<-chan error{a, b} {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range series()["nv_inference_compute_output_duration_us"] {
		if v <= 0 {
			t.Errorf("nv_inference_compute_output_duration_us = %v after three requests", v)
		}
	}
	if err := s.UnloadModel("mlp"); err != nil {
		t.Fatal(err)
	}
	for name := range series() {
		if name != "kiln_model_state" {
			t.Errorf("after the unload the model still has %s", name)
		}
	}
}

// TestSequenceStatisticsMeasureComputeInputAndOutput: requests of a sequence, batched
// (the oldest strategy joins rows) or not, count compute_input (checking the inputs,
// joining them with the controls and states) and compute_output (keeping the states,
// splitting the rows, picking the outputs) with their time, per request and per
// execution.
func TestSequenceStatisticsMeasureComputeInputAndOutput(t *testing.T) {
	for name, config := range map[string]string{
		"batched":   "",
		"unbatched": strings.NewReplacer("max_batch_size: 4", "max_batch_size: 0", "dims: [ 4 ]", "dims: [ 1, 4 ]").Replace(servetest.StatefulConfig),
	} {
		t.Run(name, func(t *testing.T) {
			s := statefulService(t, config)
			const steps = 3
			if _, err := runSequence(t, s, 0, steps, uint64(9)); err != nil {
				t.Fatal(err)
			}
			st, _ := s.Stats("stateful", "1")
			m := st[0]
			for name, c := range map[string]Counter{"compute_input": m.ComputeInput, "compute_infer": m.Compute, "compute_output": m.ComputeOut} {
				if c.Count != steps || c.Ns <= 0 {
					t.Errorf("%s = %+v: want %d requests with their time", name, c, steps)
				}
			}
			b := m.Batches[1]
			if b.ComputeInput.Count != steps || b.ComputeInput.Ns <= 0 || b.ComputeOutput.Ns <= 0 {
				t.Errorf("executions of batch size 1: %+v; want %d with compute_input and compute_output time", b, steps)
			}
			if total := m.Queue.Ns + m.ComputeInput.Ns + m.Compute.Ns + m.ComputeOut.Ns; total > m.Success.Ns {
				t.Errorf("the phases (%d ns) take longer than the requests (%d ns)", total, m.Success.Ns)
			}
		})
	}
}
