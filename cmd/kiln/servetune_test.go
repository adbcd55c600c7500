//go:build !serveonly

package main

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/proto"

	"github.com/kilnrt/kiln/compilecache"
	devcpu "github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/loader/onnx/onnxpb"
	"github.com/kilnrt/kiln/serve"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/tune"
)

// inProcess measures in the test's own process (the tests need no kiln binary).
type inProcess struct{}

func (inProcess) Measure(ctx context.Context, req tune.Request) (*tune.Response, error) {
	return tune.Measure(ctx, req, tune.MeasureOptions{})
}

// writeMatMulRepo writes <repo>/mm/1/model.onnx: y = x·W, x float32 [8, 64], W a
// constant [64, 64] (a packed matmul: a kernel with a search space), and returns W.
func writeMatMulRepo(t *testing.T, repo string) []float32 {
	t.Helper()
	s := func(v string) *string { return &v }
	v17, f32 := int64(17), int32(onnxpb.TensorProto_FLOAT)
	dims := func(ds ...int64) *onnxpb.TensorShapeProto {
		sh := &onnxpb.TensorShapeProto{}
		for _, d := range ds {
			sh.Dim = append(sh.Dim, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}})
		}
		return sh
	}
	vi := func(name string, sh *onnxpb.TensorShapeProto) *onnxpb.ValueInfoProto {
		return &onnxpb.ValueInfoProto{Name: s(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{ElemType: &f32, Shape: sh}}}}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	w := make([]float32, 64*64)
	for i := range w {
		w[i] = rng.Float32() - 0.5
	}
	g := &onnxpb.GraphProto{Name: s("g"), Node: []*onnxpb.NodeProto{{OpType: s("MatMul"), Input: []string{"x", "W"}, Output: []string{"y"}, Name: s("mm")}},
		Initializer: []*onnxpb.TensorProto{{Name: s("W"), DataType: &f32, Dims: []int64{64, 64}, FloatData: w}},
		Input:       []*onnxpb.ValueInfoProto{vi("x", dims(8, 64))}, Output: []*onnxpb.ValueInfoProto{vi("y", dims(8, 64))}}
	b, err := proto.Marshal(&onnxpb.ModelProto{IrVersion: proto.Int64(8), OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: s(""), Version: &v17}}, Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(repo, "mm", "1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model.onnx"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return w
}

// metricValue sums a metric's series that have the label values given.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue series
				}
			}
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}

// TestServeTuneBackgroundWritesRecordsAndSwapsUnderLoad: kiln serve's tuner on the
// compiled engine, under a client that sends requests with pauses: tuning measures
// trials in the idle gaps, writes tuning records to the server's journal, the model is
// rebuilt under the records' digest and swapped in, and every request is answered
// right, before and after the swap. (MinSpeedup is tiny so that a record is written
// whatever this loaded machine measures: the test is about the mechanism.)
func TestServeTuneBackgroundWritesRecordsAndSwapsUnderLoad(t *testing.T) {
	if _, err := devcpu.FindCompiler(); err != nil {
		t.Skipf("no C compiler: %v", err)
	}
	repo := t.TempDir()
	w := writeMatMulRepo(t, repo)
	j, err := compilecache.Open(compilecache.Options{Dir: filepath.Join(t.TempDir(), "cache")})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	dev, err := openCPU(1, true)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	buildInCache(dev, j)
	eng, err := engine.New(engine.Config{Target: target.Host(), Device: dev, Journal: j, Compiler: jitCompiler()})
	if err != nil {
		t.Fatal(err)
	}
	tuner := &serveTuner{journal: j, measurer: inProcess{}, minSpeedup: 1e-9}
	svc, err := serve.New(serve.Options{Repository: repo, Engine: eng, Log: zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)),
		Tune: serve.TuneOptions{Tuner: tuner, IdleAfter: 20 * time.Millisecond, Trials: 3, Budget: time.Minute, Threads: eng.Threads()}})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(svc.Metrics())

	x := make([]float32, 8*64)
	for i := range x {
		x[i] = float32(i%7) - 3
	}
	want := make([]float32, 8*64)
	for i := 0; i < 8; i++ {
		for k := 0; k < 64; k++ {
			for n := 0; n < 64; n++ {
				want[i*64+n] += x[i*64+k] * w[k*64+n]
			}
		}
	}
	xt, _ := tensor.FromSlice(tensor.Shape{8, 64}, x)
	req := &serve.InferRequest{Model: "mm", Inputs: []serve.Tensor{{Name: "x", Datatype: "FP32", Shape: []int64{8, 64}, Data: xt}}}
	var ok, failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // requests with pauses: the server is idle in between
		defer wg.Done()
		for sent := 0; ; {
			select {
			case <-stop:
				return
			default:
			}
			resp, err := svc.Infer(context.Background(), req)
			if err != nil {
				failed.Add(1)
				t.Log(err)
			} else if got := resp.Outputs[0].Data.Data.([]float32); !close32(got, want) {
				failed.Add(1)
				t.Log("wrong answer")
			} else {
				ok.Add(1)
			}
			if sent++; sent%5 == 0 { // bursts of 5 requests, then a pause a measurement fits in
				time.Sleep(3 * time.Second)
			} else {
				time.Sleep(10 * time.Millisecond)
			}
		}
	}()
	deadline := time.Now().Add(4 * time.Minute)
	for metricValue(t, reg, "kiln_tune_swaps_total", map[string]string{"model": "mm"}) < 1 {
		if time.Now().After(deadline) {
			close(stop)
			wg.Wait()
			t.Fatalf("no swap within 4 minutes (%v trials)", metricValue(t, reg, "kiln_tune_trials_total", nil))
		}
		time.Sleep(50 * time.Millisecond)
	}
	okAtSwap := ok.Load()
	for ok.Load() < okAtSwap+5 && failed.Load() == 0 {
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d requests failed under background tuning (%d succeeded)", failed.Load(), ok.Load())
	}
	if n := metricValue(t, reg, "kiln_tune_trials_total", map[string]string{"model": "mm"}); n < 3 {
		t.Errorf("kiln_tune_trials_total %v, want the 3 trials", n)
	}
	recs, err := j.TuningRecords(eng.TargetFingerprint())
	if err != nil || len(recs) == 0 {
		t.Fatalf("no tuning records in the server's journal (%v)", err)
	}
	if len(eng.TuningRecords()) == 0 {
		t.Fatalf("the records were measured at another thread count than the server's %d: its compiles apply none of %v", eng.Threads(), recs)
	}
	if sp := metricValue(t, reg, "kiln_tune_speedup", map[string]string{"model": "mm"}); !(sp > 0) {
		t.Errorf("kiln_tune_speedup %v, want the measured ratio", sp)
	}
}

func close32(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(float64(a[i]-b[i])) > 1e-3*(1+math.Abs(float64(b[i]))) {
			return false
		}
	}
	return true
}
