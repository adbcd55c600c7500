package serve

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics exposes the service to Prometheus: Triton's nv_inference_* counters per model
// and version, with Triton's names (read from the statistics at scrape time, so there
// is one bookkeeping), and the gauge nv_inference_pending_request_count (requests
// waiting for an instance or in the batcher's queue); a model's per-version series
// leave with its unloading (the repository index keeps it as kiln_model_state),
// kiln_compile_seconds (a histogram of times to an executable, journal hits included,
// labelled by outcome), kiln_journal_{hits,misses,corrupt}_total,
// kiln_model_state (1 for the state a model version is in), and
// kiln_device_exec_count (executions per device a version's instances run on:
// device="cpu", "opencl:0").
type Metrics struct {
	svc *Service
}

var (
	labels = []string{"model", "version"}
	descs  = map[string]*prometheus.Desc{
		"success":  prometheus.NewDesc("nv_inference_request_success", "Successful inference requests.", labels, nil),
		"failure":  prometheus.NewDesc("nv_inference_request_failure", "Failed inference requests.", labels, nil),
		"count":    prometheus.NewDesc("nv_inference_count", "Inferences performed (a batch of n counts n).", labels, nil),
		"exec":     prometheus.NewDesc("nv_inference_exec_count", "Model executions (a batch counts once).", labels, nil),
		"request":  prometheus.NewDesc("nv_inference_request_duration_us", "Cumulative successful request duration, microseconds.", labels, nil),
		"queue":    prometheus.NewDesc("nv_inference_queue_duration_us", "Cumulative time requests waited for an instance, microseconds.", labels, nil),
		"input":    prometheus.NewDesc("nv_inference_compute_input_duration_us", "Cumulative time preparing inputs for the model, microseconds.", labels, nil),
		"compute":  prometheus.NewDesc("nv_inference_compute_infer_duration_us", "Cumulative compute time, microseconds.", labels, nil),
		"output":   prometheus.NewDesc("nv_inference_compute_output_duration_us", "Cumulative time taking the outputs out of the model, microseconds.", labels, nil),
		"pending":  prometheus.NewDesc("nv_inference_pending_request_count", "Requests waiting now for an instance or in the batcher's queue.", labels, nil),
		"hits":     prometheus.NewDesc("kiln_journal_hits_total", "Journal lookups that found an entry (executables and kernels).", nil, nil),
		"misses":   prometheus.NewDesc("kiln_journal_misses_total", "Journal lookups that found no usable entry.", nil, nil),
		"corrupt":  prometheus.NewDesc("kiln_journal_corrupt_total", "Journal entries found damaged, quarantined and rebuilt.", nil, nil),
		"state":    prometheus.NewDesc("kiln_model_state", "1 for the lifecycle state each model version is in.", []string{"model", "version", "state"}, nil),
		"compiled": prometheus.NewDesc("kiln_model_executables", "Executables loaded per model version (per device, one per input shape signature).", labels, nil),
		"device":   prometheus.NewDesc("kiln_device_exec_count", "Model executions per device the version's instances run on (a batch counts once).", []string{"model", "version", "device"}, nil),
	}
)

// newCompileHistogram is kiln_compile_seconds.
func newCompileHistogram() *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "kiln_compile_seconds",
		Help:    "Time to an executable when a model (shape) is first needed: a compile, or a journal load.",
		Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300},
	}, []string{"model", "journal"})
}

// Metrics returns the service's Prometheus collector.
func (s *Service) Metrics() *Metrics { return &Metrics{svc: s} }

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range descs {
		ch <- d
	}
	m.svc.compileHist.Describe(ch)
	m.svc.tuner.describe(ch)
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	s := m.svc
	counter := func(d string, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(descs[d], prometheus.CounterValue, v, lv...)
	}
	st, _ := s.Stats("", "") // the loaded versions: an unloaded model's series are gone
	for _, x := range st {
		counter("success", float64(x.Success.Count), x.Name, x.Version)
		counter("failure", float64(x.Fail.Count), x.Name, x.Version)
		counter("count", float64(x.InferenceCount), x.Name, x.Version)
		counter("exec", float64(x.ExecutionCount), x.Name, x.Version)
		counter("request", float64(x.Success.Ns)/1e3, x.Name, x.Version)
		counter("queue", float64(x.Queue.Ns)/1e3, x.Name, x.Version)
		counter("input", float64(x.ComputeInput.Ns)/1e3, x.Name, x.Version)
		counter("compute", float64(x.Compute.Ns)/1e3, x.Name, x.Version)
		counter("output", float64(x.ComputeOut.Ns)/1e3, x.Name, x.Version)
		ch <- prometheus.MustNewConstMetric(descs["pending"], prometheus.GaugeValue, float64(x.Pending), x.Name, x.Version)
	}
	js := s.engine.JournalStats()
	counter("hits", float64(js.Hits))
	counter("misses", float64(js.Misses))
	counter("corrupt", float64(js.Corrupt))
	for _, st := range s.Index() {
		for _, state := range []State{StateUnavailable, StateLoading, StateReady} {
			v := 0.0
			if st.State == state {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(descs["state"], prometheus.GaugeValue, v, st.Name, st.Version, string(state))
		}
		if st.Version != "" { // not an unloaded model
			ch <- prometheus.MustNewConstMetric(descs["compiled"], prometheus.GaugeValue, float64(st.Compiled), st.Name, st.Version)
		}
	}
	for _, m := range s.allModels() {
		for _, p := range m.places { // an unloaded model's placeholder has none
			counter("device", float64(p.runs.Load()), m.name, m.versionString(), p.dev.name)
		}
	}
	s.compileHist.Collect(ch)
	s.tuner.collect(ch)
}
