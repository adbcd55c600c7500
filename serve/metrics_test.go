package serve

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestMetrics(t *testing.T) {
	repo, x, _ := testRepo(t)
	s := openService(t, repo, t.TempDir())
	for range 3 {
		if _, err := s.Infer(context.Background(), request(x)); err != nil {
			t.Fatal(err)
		}
	}
	s.Infer(context.Background(), &InferRequest{Model: "mlp"}) // a failure
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.Metrics())
	want := `
# HELP nv_inference_request_failure Failed inference requests.
# TYPE nv_inference_request_failure counter
nv_inference_request_failure{model="broken",version="1"} 0
nv_inference_request_failure{model="mlp",version="1"} 1
# HELP nv_inference_request_success Successful inference requests.
# TYPE nv_inference_request_success counter
nv_inference_request_success{model="broken",version="1"} 0
nv_inference_request_success{model="mlp",version="1"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "nv_inference_request_success", "nv_inference_request_failure"); err != nil {
		t.Fatal(err)
	}
	n, err := testutil.GatherAndCount(reg, "kiln_compile_seconds", "kiln_journal_misses_total", "kiln_model_state", "nv_inference_compute_infer_duration_us")
	if err != nil || n < 4 {
		t.Fatalf("%d series: %v", n, err)
	}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "kiln_compile_seconds" && mf.Metric[0].GetHistogram().GetSampleCount() != 1 {
			t.Fatalf("kiln_compile_seconds has %d observations, want the one compile", mf.Metric[0].GetHistogram().GetSampleCount())
		}
		if mf.GetName() == "kiln_model_state" {
			ready := 0.0
			for _, m := range mf.Metric {
				for _, l := range m.Label {
					if l.GetName() == "state" && l.GetValue() == "READY" {
						ready += m.GetGauge().GetValue()
					}
				}
			}
			if ready != 1 {
				t.Fatalf("%v model versions READY, want 1 (mlp; broken is UNAVAILABLE)", ready)
			}
		}
	}
}
