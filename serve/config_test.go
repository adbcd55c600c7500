package serve

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnrt/kiln/tensor"
)

func writeConfig(t *testing.T, repo, model, text string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(repo, model, "config.pbtxt"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestConfigDynamicBatching: a Triton config.pbtxt turns on dynamic batching and two
// instances; the completed configuration keeps the model's inputs without the batch dim.
func TestConfigDynamicBatching(t *testing.T) {
	repo, _, _ := testRepo(t)
	writeConfig(t, repo, "mlp", `
name: "mlp"
platform: "onnxruntime_onnx"
max_batch_size: 8
dynamic_batching { preferred_batch_size: [ 4, 8 ] max_queue_delay_microseconds: 20000 }
instance_group [ { count: 2 kind: KIND_CPU } ]
`)
	s := openService(t, repo, t.TempDir())
	cfg, err := s.ModelConfig("mlp", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Input) != 1 || cfg.Input[0].Name != "x" || len(cfg.Input[0].Dims) != 1 || cfg.Input[0].Dims[0] != 8 || cfg.InstanceGroup[0].Count != 2 {
		t.Fatalf("completed config %v", cfg)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := tensor.New(tensor.Float32, tensor.Shape{1, 8})
			x.Data.([]float32)[i%8] = 1
			if _, err := s.Infer(context.Background(), request(x)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	st, _ := s.Stats("mlp", "")
	if st[0].ExecutionCount >= 8 || len(st[0].Batches) == 0 {
		t.Fatalf("8 requests ran as %d executions (batches %v)", st[0].ExecutionCount, st[0].Batches)
	}
}

// TestBadConfigMakesModelUnavailable: a config that contradicts the model, or does not
// parse, makes that model UNAVAILABLE with the reason; the others serve.
func TestBadConfigMakesModelUnavailable(t *testing.T) {
	for _, c := range []struct{ text, reason string }{
		{`max_batch_size: 4 input [ { name: "x" data_type: TYPE_INT64 dims: [ 8 ] } ]`, "is INT64, the model's is FP32"},
		{`input [ { name: "y" data_type: TYPE_FP32 dims: [ -1, 8 ] } ]`, `config input "y" is not an input of the model`},
		{`max_batch_size: 4 input [ { name: "x" data_type: TYPE_FP32 dims: [ 9 ] } ]`, "has dims [9]"},
		{`name: "other"`, `names the model "other"`},
		{`max_batch_size: 4 dynamic_batching { preferred_batch_size: [ 16 ] }`, "preferred_batch_size"},
		{`max_batch_size: { oops`, "line 1"},
		// Triton fields kiln does not implement are refused by name, never ignored.
		{"max_batch_size: 4\noptimization { execution_accelerators { cpu_execution_accelerator: [ { name: \"openvino\" } ] } }", "field optimization (line 2:1): kiln does not implement it"},
		{`parameters { key: "intra_op_thread_count" value { string_value: "4" } }`, `parameters["intra_op_thread_count"]: kiln does not implement this parameter`},
		// an optional input the model cannot run without (it has no default) is refused
		{`input [ { name: "x" data_type: TYPE_FP32 dims: [ -1, 8 ] optional: true } ]`, `input[0].optional: input "x" is optional, but the model cannot run without it`},
		{`max_batch_size: 4 dynamic_batching { priority_levels: 2 default_priority_level: 3 }`, "dynamic_batching.default_priority_level"},
		{`output [ { name: "probs" data_type: TYPE_FP32 dims: [ -1, 4 ] label_filename: "labels.txt" } ]`, "output[0].label_filename"},
		{`output [ { name: "probs" data_type: TYPE_FP32 dims: [ -1, 5 ] } ]`, `config output "probs" has dims [-1 5]`},
		{`input [ { name: "x" data_type: TYPE_FP32 dims: [ -1, 2, 4 ] reshape { shape: [ -1, 9 ] } } ]`, "input[0].reshape"},
	} {
		repo, x, _ := testRepo(t)
		writeConfig(t, repo, "mlp", c.text)
		s := openService(t, repo, t.TempDir())
		_, err := s.Infer(context.Background(), request(x))
		if err == nil || !strings.Contains(err.Error(), c.reason) {
			t.Errorf("config %q: %v, want the reason %q", c.text, err, c.reason)
		}
	}
}

// TestVersionPolicy: by default only the newest version is served.
func TestVersionPolicy(t *testing.T) {
	repo, x, _ := testRepo(t)
	src, _ := os.ReadFile(filepath.Join(repo, "mlp", "1", "model.onnx"))
	os.MkdirAll(filepath.Join(repo, "mlp", "3"), 0o755)
	os.WriteFile(filepath.Join(repo, "mlp", "3", "model.onnx"), src, 0o644)
	s := openService(t, repo, t.TempDir())
	if _, err := s.Infer(context.Background(), &InferRequest{Model: "mlp", Version: "1", Inputs: request(x).Inputs}); err == nil {
		t.Fatal("version 1 served under the default policy (latest 1)")
	}
	resp, err := s.Infer(context.Background(), request(x))
	if err != nil || resp.Version != "3" {
		t.Fatalf("newest: %v %v", resp, err)
	}
	for _, tc := range []struct {
		policy string
		served []string
	}{
		{`version_policy { all { } }`, []string{"1", "3"}},
		{`version_policy { latest { num_versions: 2 } }`, []string{"1", "3"}},
		{`version_policy { specific { versions: [ 1 ] } }`, []string{"1"}},
		{`version_policy { latest { num_versions: 1 } }`, []string{"3"}},
	} {
		writeConfig(t, repo, "mlp", tc.policy)
		s2 := openService(t, repo, t.TempDir())
		for _, v := range []string{"1", "3"} {
			_, err := s2.Infer(context.Background(), &InferRequest{Model: "mlp", Version: v, Inputs: request(x).Inputs})
			if served := slices.Contains(tc.served, v); (err == nil) != served {
				t.Errorf("%s: version %s: err = %v, want served %v", tc.policy, v, err, served)
			}
		}
	}
}

// TestModelWarmup: warm-up samples compile and run before the model is READY; a bad
// sample makes it UNAVAILABLE with the reason.
func TestModelWarmup(t *testing.T) {
	repo, x, _ := testRepo(t)
	writeConfig(t, repo, "mlp", `
max_batch_size: 4
model_warmup [ { name: "zeros" batch_size: 2 count: 3 inputs { key: "x" value: { data_type: TYPE_FP32 dims: [ 8 ] zero_data: true } } } ]
`)
	s := openService(t, repo, t.TempDir())
	waitSettled(t, s, time.Minute)
	var st Status
	for _, x := range s.Index() {
		if x.Name == "mlp" {
			st = x
		}
	}
	if st.State != StateReady || st.Compiled != 1 {
		t.Fatalf("after warm-up: %+v", st)
	}
	if stats, _ := s.Stats("mlp", ""); stats[0].InferenceCount != 0 {
		t.Fatalf("warm-up runs counted as inferences: %+v", stats[0])
	}
	if _, err := s.Infer(context.Background(), request(x)); err != nil {
		t.Fatal(err)
	}
	repo2, _, _ := testRepo(t)
	writeConfig(t, repo2, "mlp", `
model_warmup [ { name: "bad" inputs { key: "x" value: { data_type: TYPE_INT64 dims: [ 1, 8 ] zero_data: true } } } ]
`)
	s2 := openService(t, repo2, t.TempDir())
	waitSettled(t, s2, time.Minute)
	if s2.Ready() {
		t.Fatal("ready with a model whose warm-up failed")
	}
	for _, x := range s2.Index() {
		if x.Name == "mlp" && (x.State != StateUnavailable || !strings.Contains(x.Reason, "warm-up")) {
			t.Fatalf("bad warm-up: %+v", x)
		}
	}
}
