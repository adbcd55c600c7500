package serve

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/kilnrt/kiln/compilecache"
	"github.com/kilnrt/kiln/compiler"
	"github.com/kilnrt/kiln/devices"
	devcpu "github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/internal/testdata"
	"github.com/kilnrt/kiln/loader/onnx"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// testRepo lays the example model out as <repo>/mlp/1/model.onnx (plus a broken model)
// and returns the repository and the example's input and expected output.
func testRepo(t *testing.T) (string, *tensor.Tensor, *tensor.Tensor) {
	t.Helper()
	repo := t.TempDir()
	src, err := os.ReadFile("../examples/mlp/model.onnx")
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(repo, "mlp", "1"), 0o755)
	os.WriteFile(filepath.Join(repo, "mlp", "1", "model.onnx"), src, 0o644)
	os.MkdirAll(filepath.Join(repo, "broken", "1"), 0o755)
	os.WriteFile(filepath.Join(repo, "broken", "1", "model.onnx"), []byte("not a model"), 0o644)
	read := func(name string) *tensor.Tensor {
		d, err := onnx.ReadData(filepath.Join("../examples/mlp/test_data_set_0", name), graph.TensorType(tensor.Float32))
		if err != nil {
			t.Fatal(err)
		}
		return d.Tensor
	}
	return repo, read("input_0.pb"), read("output_0.pb")
}

func openService(t *testing.T, repo, journal string) *Service {
	t.Helper()
	return openServiceWith(t, repo, journal, Options{Instances: 2})
}

// openServiceWith opens a Service on repo with a journal in journal, opts' other fields
// kept.
func openServiceWith(t *testing.T, repo, journal string, opts Options) *Service {
	t.Helper()
	dev, err := devcpu.Open(devcpu.Options{Threads: 2})
	if errors.Is(err, devices.ErrUnavailable) {
		testdata.NoCompiler(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	j, err := compilecache.Open(compilecache.Options{Dir: journal})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	e, err := engine.New(engine.Config{Target: target.Host(), Device: dev, Journal: j, Compiler: compiler.JIT{}})
	if err != nil {
		t.Fatal(err)
	}
	opts.Repository, opts.Engine = repo, e
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func request(x *tensor.Tensor) *InferRequest {
	return &InferRequest{Model: "mlp", ID: "r1", Inputs: []Tensor{{Name: "x", Datatype: "FP32", Shape: []int64{int64(x.Shape[0]), int64(x.Shape[1])}, Data: x}}}
}

func near(a, b *tensor.Tensor) bool {
	x, y := a.Data.([]float32), b.Data.([]float32)
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		if math.Abs(float64(x[i]-y[i])) > 1e-5 {
			return false
		}
	}
	return true
}

// TestConcurrentFirstRequestsCompileOnce: 8 first requests at once cause one compile,
// all get the right answer; a new Service on the same journal compiles nothing.
func TestConcurrentFirstRequestsCompileOnce(t *testing.T) {
	repo, x, want := testRepo(t)
	journal := t.TempDir()
	s := openService(t, repo, journal)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := s.Infer(context.Background(), request(x))
			if err != nil {
				t.Error(err)
				return
			}
			if resp.ID != "r1" || len(resp.Outputs) != 1 || resp.Outputs[0].Name != "probs" || !near(resp.Outputs[0].Data, want) {
				t.Errorf("response %+v", resp)
			}
		}()
	}
	wg.Wait()
	if st := s.CompileStats(); st.Compiles != 1 || st.JournalHits != 0 {
		t.Fatalf("compile stats %+v, want 1 compile", st)
	}
	stats, _ := s.Stats("mlp", "1")
	if stats[0].Success.Count != 8 || stats[0].Fail.Count != 0 {
		t.Fatalf("stats %+v", stats[0])
	}
	s2 := openService(t, repo, journal)
	if _, err := s2.Infer(context.Background(), request(x)); err != nil {
		t.Fatal(err)
	}
	if st := s2.CompileStats(); st.Compiles != 0 || st.JournalHits != 1 {
		t.Fatalf("restart: compile stats %+v, want a journal hit", st)
	}
}

func TestBadRequests(t *testing.T) {
	repo, x, _ := testRepo(t)
	s := openService(t, repo, t.TempDir())
	i64 := tensor.New(tensor.Int64, tensor.Shape{3, 8})
	cases := []struct {
		name string
		req  *InferRequest
		want error
	}{
		{"unknown model", &InferRequest{Model: "nope"}, ErrNotFound},
		{"unknown version", &InferRequest{Model: "mlp", Version: "7"}, ErrNotFound},
		{"bad version", &InferRequest{Model: "mlp", Version: "x"}, ErrInvalid},
		{"missing input", &InferRequest{Model: "mlp"}, ErrInvalid},
		{"wrong dtype", &InferRequest{Model: "mlp", Inputs: []Tensor{{Name: "x", Datatype: "INT64", Shape: []int64{3, 8}, Data: i64}}}, ErrInvalid},
		{"wrong static dim", &InferRequest{Model: "mlp", Inputs: []Tensor{{Name: "x", Datatype: "FP32", Shape: []int64{3, 9}, Data: tensor.New(tensor.Float32, tensor.Shape{3, 9})}}}, ErrInvalid},
		{"unknown input", &InferRequest{Model: "mlp", Inputs: append(request(x).Inputs, Tensor{Name: "y", Datatype: "FP32", Data: x})}, ErrInvalid},
		{"duplicate input", &InferRequest{Model: "mlp", Inputs: append(request(x).Inputs, request(x).Inputs...)}, ErrInvalid},
		{"unknown output", &InferRequest{Model: "mlp", Inputs: request(x).Inputs, Outputs: []RequestedOutput{{Name: "logits"}}}, ErrInvalid},
		{"broken model", &InferRequest{Model: "broken"}, ErrUnavailable},
	}
	for _, c := range cases {
		if _, err := s.Infer(context.Background(), c.req); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// and it still serves
	if _, err := s.Infer(context.Background(), request(x)); err != nil {
		t.Fatal(err)
	}
	idx := s.Index()
	if len(idx) != 2 || idx[0].Name != "broken" || idx[0].State != StateUnavailable || idx[1].State != StateReady {
		t.Fatalf("index %+v", idx)
	}
	md, err := s.ModelMetadata("mlp", "")
	if err != nil || md.Inputs[0].Datatype != "FP32" || md.Inputs[0].Shape[0] != -1 || md.Outputs[0].Name != "probs" {
		t.Fatalf("metadata %+v %v", md, err)
	}
}

func TestDrainRefusesNewRequests(t *testing.T) {
	repo, x, _ := testRepo(t)
	s := openService(t, repo, t.TempDir())
	if _, err := s.Infer(context.Background(), request(x)); err != nil {
		t.Fatal(err)
	}
	if err := s.Drain(context.Background()); err != nil || s.Ready() {
		t.Fatalf("drain: %v, ready %v", err, s.Ready())
	}
	if _, err := s.Infer(context.Background(), request(x)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("after drain: %v", err)
	}
}

func TestRawCodec(t *testing.T) {
	for _, dt := range []string{"BOOL", "UINT8", "INT32", "INT64", "FP16", "FP32", "FP64", "BF16", "BYTES"} {
		var raw []byte
		switch dt {
		case "BYTES":
			raw = []byte{2, 0, 0, 0, 'h', 'i', 0, 0, 0, 0}
		case "BOOL", "UINT8":
			raw = []byte{1, 0}
		default:
			d, _ := DTypeOf(dt)
			raw = make([]byte, 2*d.Size())
			raw[0] = 1
		}
		tt, err := DecodeRaw("x", dt, []int64{2}, raw)
		if err != nil {
			t.Fatalf("%s: %v", dt, err)
		}
		back, err := EncodeRaw(tt)
		if err != nil || string(back) != string(raw) {
			t.Fatalf("%s: round trip %v %v", dt, back, err)
		}
	}
	bad := []struct {
		dt    string
		shape []int64
		raw   []byte
	}{
		{"FP32", []int64{2}, make([]byte, 7)},
		{"FP32", []int64{-1}, nil},
		{"FP33", []int64{1}, make([]byte, 4)},
		{"BYTES", []int64{1}, []byte{9, 0, 0, 0, 'a'}},
		{"BYTES", []int64{2}, []byte{1, 0, 0, 0, 'a'}},
		{"BOOL", []int64{1}, []byte{7}},
		{"FP32", []int64{1 << 20, 1 << 20, 1 << 20}, nil},
	}
	for _, b := range bad {
		if _, err := DecodeRaw("x", b.dt, b.shape, b.raw); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s%v with %d bytes: %v", b.dt, b.shape, len(b.raw), err)
		}
	}
}
