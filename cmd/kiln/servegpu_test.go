package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kilnrt/kiln/compilecache"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/internal/gputest"
	"github.com/kilnrt/kiln/internal/testdata"
	"github.com/kilnrt/kiln/loader/onnx"
	"github.com/kilnrt/kiln/tensor"
)

// freeAddr is a loopback address with a port free right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestServeKindGPUAndKindCPUInstancesAgree: kiln serve with bert_tiny from the zoo and
// instance_group [{KIND_GPU, gpus: [0]}, {KIND_CPU}] runs requests, sent one after
// the other and several at once, on both devices (the OpenCL device, PoCL here, and the
// CPU; kiln_device_exec_count counts each), the
// answers agree within 1e-4 whichever device gave them (and with ONNX Runtime's within
// the zoo's tolerance), and the journal holds the model's executables for both targets.
func TestServeKindGPUAndKindCPUInstancesAgree(t *testing.T) {
	zoo := testdata.Zoo(t)
	gputest.OpenCL(t) // skips without an OpenCL device
	bin := buildKiln(t)
	repo, journal := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(repo, "bert_tiny", "1"), 0o755)
	if err := os.Symlink(filepath.Join(zoo, "bert_tiny", "model.onnx"), filepath.Join(repo, "bert_tiny", "1", "model.onnx")); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(repo, "bert_tiny", "config.pbtxt"), []byte(`name: "bert_tiny"
instance_group [ { kind: KIND_GPU gpus: [ 0 ] }, { kind: KIND_CPU } ]
`), 0o644)
	metrics := freeAddr(t)
	_, url := startServe(t, bin, repo, "--cache-dir", journal, "--metrics-address", metrics)

	data := filepath.Join(zoo, "bert_tiny", "test_data_set_1") // batch 2, sequence 37
	var md struct{ Inputs []struct{ Name string } }
	getJSON(t, url+"/v2/models/bert_tiny", &md)
	var inputs []map[string]any
	for k, in := range md.Inputs {
		d, err := onnx.ReadData(filepath.Join(data, fmt.Sprintf("input_%d.pb", k)), graph.TensorType(tensor.Int64))
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, map[string]any{"name": in.Name, "datatype": "INT64", "shape": d.Tensor.Shape, "data": d.Tensor.Data})
	}
	body, _ := json.Marshal(map[string]any{"inputs": inputs})
	want, err := onnx.ReadData(filepath.Join(data, "output_0.pb"), graph.TensorType(tensor.Float32))
	if err != nil {
		t.Fatal(err)
	}
	wantHidden := want.Tensor.Data.([]float32)

	client := &http.Client{Timeout: 10 * time.Minute} // the first request on each device compiles
	infer := func() ([]float32, error) {
		resp, err := client.Post(url+"/v2/models/bert_tiny/infer", "application/json", bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return nil, fmt.Errorf("%d %s", resp.StatusCode, b)
		}
		var out struct {
			Outputs []struct {
				Name string
				Data []float32
			}
		}
		if err := json.Unmarshal(b, &out); err != nil {
			return nil, err
		}
		for _, o := range out.Outputs {
			if o.Name == "last_hidden_state" {
				return o.Data, nil
			}
		}
		return nil, fmt.Errorf("no last_hidden_state in %s", b)
	}
	// one after the other (the free instances take turns: each device compiles), then
	// several at once (both instances busy together)
	answers := make([][]float32, 6)
	for i := range 2 {
		var err error
		if answers[i], err = infer(); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	errs := make(chan error, 4)
	for i := 2; i < 6; i++ {
		go func() {
			var err error
			answers[i], err = infer()
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	worst, worstRef := 0.0, 0.0
	for i, a := range answers {
		if len(a) != len(wantHidden) {
			t.Fatalf("answer %d has %d values, want %d", i, len(a), len(wantHidden))
		}
		for k := range a {
			worst = max(worst, math.Abs(float64(a[k]-answers[0][k])))
			if d := math.Abs(float64(a[k] - wantHidden[k])); d > 1e-4+1e-3*math.Abs(float64(wantHidden[k])) {
				t.Fatalf("answer %d element %d: %v, ONNX Runtime %v", i, k, a[k], wantHidden[k])
			}
			worstRef = max(worstRef, math.Abs(float64(a[k]-wantHidden[k])))
		}
	}
	if worst > 1e-4 {
		t.Fatalf("%d answers; largest difference between devices %g (want ≤ 1e-4)", len(answers), worst)
	}
	runs := deviceRuns(t, "http://"+metrics+"/metrics")
	if runs["cpu"] == 0 || runs["opencl:0"] == 0 || runs["cpu"]+runs["opencl:0"] != 6 {
		t.Fatalf("executions per device %v: want the 6 requests served by both", runs)
	}
	t.Logf("executions per device %v; largest difference between answers %g, from ONNX Runtime %g", runs, worst, worstRef)

	j, err := compilecache.Open(compilecache.Options{Dir: journal, Policy: compilecache.PolicyReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	entries, err := j.Entries()
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, e := range entries {
		if e.Material.Kind != compilecache.KindExecutable || e.Label != "bert_tiny/1" {
			continue
		}
		for _, p := range e.Material.Parts {
			if p.Name == "target" {
				kind, _, _ := strings.Cut(p.Value, "/")
				targets[kind] = true
			}
		}
	}
	if !targets["cpu"] || !targets["opencl"] {
		var labels []string
		for _, e := range entries {
			labels = append(labels, fmt.Sprintf("%s %s", e.Material.Kind, e.Label))
		}
		t.Fatalf("the journal's bert_tiny executables are for %v, want cpu and opencl; entries: %v", targets, labels)
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
}

var deviceRunsLine = regexp.MustCompile(`(?m)^kiln_device_exec_count\{device="([^"]+)",model="bert_tiny",version="1"\} (\S+)$`)

// deviceRuns reads kiln_device_exec_count for bert_tiny from the metrics endpoint.
func deviceRuns(t *testing.T, url string) map[string]int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	out := map[string]int{}
	for _, m := range deviceRunsLine.FindAllStringSubmatch(string(b), -1) {
		n, _ := strconv.ParseFloat(m[2], 64)
		out[m[1]] = int(n)
	}
	return out
}
