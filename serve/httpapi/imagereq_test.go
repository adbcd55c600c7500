package httpapi

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"unsafe"

	"google.golang.org/protobuf/proto"

	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/loader/onnx/onnxpb"
	"github.com/kilnrt/kiln/serve"
	"github.com/kilnrt/kiln/serve/servetest"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// imageShape is an image model's input, as SqueezeNet's: a 602,112-byte FP32 tensor.
var imageShape = []int64{1, 3, 224, 224}

// imageRepo is a repository holding "image": ReduceMax of an FP32 [1,3,224,224]
// input "input" over its last three axes, an output "y" of shape [1,1,1,1] — an image
// model's request with next to no compute, so that the request path is what runs.
func imageRepo(t testing.TB) string {
	t.Helper()
	s := func(v string) *string { return &v }
	f32, v17, ints := int32(onnxpb.TensorProto_FLOAT), int64(17), onnxpb.AttributeProto_INTS
	shape := &onnxpb.TensorShapeProto{}
	for _, d := range imageShape {
		shape.Dim = append(shape.Dim, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}})
	}
	tt := func(sh *onnxpb.TensorShapeProto) *onnxpb.TypeProto {
		return &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{ElemType: &f32, Shape: sh}}}
	}
	g := &onnxpb.GraphProto{
		Name: s("image"),
		Node: []*onnxpb.NodeProto{{Name: s("max"), OpType: s("ReduceMax"), Input: []string{"input"}, Output: []string{"y"},
			Attribute: []*onnxpb.AttributeProto{{Name: s("axes"), Type: &ints, Ints: []int64{1, 2, 3}}}}},
		Input:  []*onnxpb.ValueInfoProto{{Name: s("input"), Type: tt(shape)}},
		Output: []*onnxpb.ValueInfoProto{{Name: s("y"), Type: tt(nil)}},
	}
	b, err := proto.Marshal(&onnxpb.ModelProto{OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: s(""), Version: &v17}}, Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	repo := t.TempDir()
	if err := os.MkdirAll(filepath.Join(repo, "image", "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "image", "1", "model.onnx"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return repo
}

// imageRequest is the binary-extension request of the image model (its input's
// element i is 1 + i mod 251), with its Inference-Header-Content-Length, asking for
// binary outputs.
func imageRequest() (body []byte, headLen int) {
	n := 1
	for _, d := range imageShape {
		n *= int(d)
	}
	head, _ := json.Marshal(map[string]any{
		"inputs":     []any{map[string]any{"name": "input", "datatype": "FP32", "shape": imageShape, "parameters": map[string]any{"binary_data_size": 4 * n}}},
		"parameters": map[string]any{"binary_data_output": true},
	})
	raw := make([]byte, 0, len(head)+4*n)
	raw = append(raw, head...)
	for i := range n {
		raw = appendF32(raw, float32(1+i%251))
	}
	return raw, len(head)
}

func appendF32(b []byte, v float32) []byte {
	return binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
}

// imageServer is the REST handler on a service serving imageRepo on e.
func imageServer(t testing.TB, e *noComputeEngine) http.Handler {
	t.Helper()
	svc, err := serve.New(serve.Options{Repository: imageRepo(t), Engine: e})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	return New(svc, Options{MaxRequestBytes: 4 << 20, Version: "test"})
}

// postImage posts the image request to h and returns the recorder.
func postImage(h http.Handler, body []byte, headLen int) *httptest.ResponseRecorder {
	r := httptest.NewRequest("POST", "/v2/models/image/infer", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/octet-stream")
	r.Header.Set(headerLength, strconv.Itoa(headLen))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// allocatedPerRequest is the heap bytes allocated per request over n image requests
// to h, after one untimed.
func allocatedPerRequest(t testing.TB, h http.Handler, n int) float64 {
	body, headLen := imageRequest()
	postImage(h, body, headLen)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range n {
		if w := postImage(h, body, headLen); w.Code != 200 {
			t.Fatalf("image request: %d %s", w.Code, w.Body.Bytes())
		}
	}
	runtime.ReadMemStats(&after)
	return float64(after.TotalAlloc-before.TotalAlloc) / float64(n)
}

// BenchmarkImageRequest times the REST path of a 602 KB binary request on a model
// with next to no compute: read, parse, run, respond (go test -bench ImageRequest
// -benchmem -cpuprofile).
func BenchmarkImageRequest(b *testing.B) {
	h := imageServer(b, &noComputeEngine{})
	body, headLen := imageRequest()
	postImage(h, body, headLen)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if w := postImage(h, body, headLen); w.Code != 200 {
			b.Fatalf("image request: %d %s", w.Code, w.Body.Bytes())
		}
	}
}

// noComputeEngine loads every model as a runner that answers at once: each input's
// first element, as a [1,1,1,1] FP32 tensor per output. The request path is then all
// that runs.
type noComputeEngine struct {
	servetest.Engine
	offsets sync.Map // of input start addresses modulo 64 seen by the runners: true
}

func (e *noComputeEngine) Load(ctx context.Context, m *engine.Model, shapes map[string][]int64, progress func(engine.Progress)) (*engine.Loaded, error) {
	l, err := e.Engine.Load(ctx, m, shapes, progress)
	if err != nil {
		return nil, err
	}
	return &engine.Loaded{Built: l.Built, Runner: firstElement{len(l.Outputs), &e.offsets}, Outputs: l.Outputs}, nil
}

type firstElement struct {
	outputs int
	offsets *sync.Map
}

func (r firstElement) Run(_ context.Context, args []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, ok := args[0].Data.([]float32)
	if !ok || len(x) == 0 {
		return nil, fmt.Errorf("%w: the first input is not FP32 with elements", vm.ErrInput)
	}
	r.offsets.Store(uintptr(unsafe.Pointer(unsafe.SliceData(x)))%64, true)
	out := make([]*tensor.Tensor, r.outputs)
	for i := range out {
		out[i] = tensor.MustFromSlice(tensor.Shape{1, 1, 1, 1}, []float32{x[0]})
	}
	return out, nil
}

func (firstElement) MemoryStats() vm.MemoryStats { return vm.MemoryStats{} }
func (firstElement) Close() error                { return nil }

// TestLargeBinaryRequestAllocatesFarLessThanItsBody: a stream of 602 KB binary
// requests allocates, per request, a small fraction of the body: the body is read
// into a pooled buffer (bodypool.go) and the input tensor is a view of it (no copy),
// so neither a fresh body buffer nor a decoded tensor is allocated per request.
func TestLargeBinaryRequestAllocatesFarLessThanItsBody(t *testing.T) {
	h := imageServer(t, &noComputeEngine{})
	body, headLen := imageRequest()
	w := postImage(h, body, headLen)
	if w.Code != 200 {
		t.Fatalf("image request: %d %s", w.Code, w.Body.Bytes())
	}
	if got := w.Body.Bytes(); len(got) < 4 || math.Float32frombits(binary.LittleEndian.Uint32(got[len(got)-4:])) != 1 {
		t.Fatalf("response %q does not end with the input's first element, 1", got)
	}
	per := allocatedPerRequest(t, h, 200)
	t.Logf("%.0f bytes allocated per %d-byte request", per, len(body))
	if limit := float64(len(body)) / 16; per > limit {
		t.Errorf("%.0f bytes allocated per %d-byte request, want under %.0f: the body or its tensor is copied per request", per, len(body), limit)
	}
}

// TestBinaryInputStartsOnACacheLine: whatever the JSON header's length, the first
// binary input reaches the model starting on a 64-byte boundary (the VM reads such an
// input in place, without copying it).
func TestBinaryInputStartsOnACacheLine(t *testing.T) {
	e := &noComputeEngine{}
	h := imageServer(t, e)
	body, headLen := imageRequest()
	for pad := range 70 {
		// the same request with pad more spaces in its JSON header
		b := append(append(append([]byte{}, body[:headLen-1]...), bytes.Repeat([]byte(" "), pad)...), body[headLen-1:]...)
		if w := postImage(h, b, headLen+pad); w.Code != 200 {
			t.Fatalf("header padded by %d: %d %s", pad, w.Code, w.Body.Bytes())
		}
	}
	e.offsets.Range(func(off, _ any) bool {
		if off.(uintptr) != 0 {
			t.Errorf("an input started %d bytes past a cache line", off)
		}
		return true
	})
}
