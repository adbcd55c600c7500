package serve

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kilnrt/kiln/serve/servetest"
	"github.com/kilnrt/kiln/tensor"
)

// densenetRepo is servetest.WriteDensenetRepo in a temporary folder.
func densenetRepo(t *testing.T) string {
	t.Helper()
	repo := t.TempDir()
	if err := servetest.WriteDensenetRepo(repo, "../examples/models/squeezenet1_1/1/model.onnx"); err != nil {
		t.Fatal(err)
	}
	return repo
}

// image is a deterministic 3×224×224 input.
func image() *tensor.Tensor {
	x := tensor.New(tensor.Float32, tensor.Shape{3, 224, 224})
	for i, d := 0, x.Data.([]float32); i < len(d); i++ {
		d[i] = float32(i%17)/8 - 1
	}
	return x
}

// TestDensenetConfigServesSqueezeNetWithReshapeAndClassification: Triton's documented
// densenet_onnx config serves the model; clients send and receive the config's dims
// (the reshapes are applied inside), metadata reports them, and classification: 3
// returns the three highest logits as "<value>:<index>:<label>".
func TestDensenetConfigServesSqueezeNetWithReshapeAndClassification(t *testing.T) {
	svc, err := New(Options{Repository: densenetRepo(t), Engine: &servetest.Engine{}})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	md, err := svc.ModelMetadata("densenet", "")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(md.Inputs[0].Shape, []int64{3, 224, 224}) || !slices.Equal(md.Outputs[0].Shape, []int64{1000}) {
		t.Errorf("metadata shapes %v %v, want the config's dims", md.Inputs[0].Shape, md.Outputs[0].Shape)
	}
	x := image()
	in := []Tensor{{Name: "input", Datatype: "FP32", Shape: []int64{3, 224, 224}, Data: x}}
	raw, err := svc.Infer(context.Background(), &InferRequest{Model: "densenet", Inputs: in})
	if err != nil {
		t.Fatal(err)
	}
	out := raw.Outputs[0]
	if !slices.Equal(out.Shape, []int64{1000}) || !slices.Equal([]int(out.Data.Shape), []int{1000}) {
		t.Fatalf("output shape %v (tensor %v), want [1000]", out.Shape, out.Data.Shape)
	}
	logits := out.Data.Data.([]float32)

	req := &InferRequest{Model: "densenet", Inputs: in,
		Outputs: []RequestedOutput{{Name: "logits", Params: map[string]any{"classification": int64(3)}}}}
	res, err := svc.Infer(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	got := res.Outputs[0]
	if got.Datatype != "BYTES" || !slices.Equal(got.Shape, []int64{3}) {
		t.Fatalf("classification output %s %v, want BYTES [3]", got.Datatype, got.Shape)
	}
	if want := servetest.TopClasses(logits, 3); !slices.Equal(got.Data.Data.([]string), want) {
		t.Errorf("classes %q, want %q", got.Data.Data, want)
	}

	in[0].Shape, in[0].Data = []int64{1, 3, 224, 224}, tensor.MustFromSlice(tensor.Shape{1, 3, 224, 224}, x.Data)
	if _, err := svc.Infer(context.Background(), &InferRequest{Model: "densenet", Inputs: in}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "[3 224 224]") {
		t.Errorf("the model's own shape instead of the config's dims: err = %v, want ErrInvalid naming the dims", err)
	}
}

func TestClassificationFormatAndBatches(t *testing.T) {
	o := Tensor{Name: "p", Datatype: "FP32", Shape: []int64{2, 4},
		Data: tensor.MustFromSlice(tensor.Shape{2, 4}, []float32{1, 5, 10, 4, 0.5, -2, 0.5, 3.25})}
	got, err := classify1(o, 2, true, []string{"a", "b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.000000:2:c", "5.000000:1:b", "3.250000:3", "0.500000:0:a"}
	if !slices.Equal(got.Shape, []int64{2, 2}) || !slices.Equal(got.Data.Data.([]string), want) {
		t.Errorf("got %v %q, want [2 2] %q", got.Shape, got.Data.Data, want)
	}
	// Without batching the whole tensor is one entry; k is capped at its size.
	ints := Tensor{Name: "n", Datatype: "INT32", Shape: []int64{3}, Data: tensor.MustFromSlice(tensor.Shape{3}, []int32{-7, 9, 2})}
	got, err = classify1(ints, 5, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"9:1", "2:2", "-7:0"}; !slices.Equal(got.Shape, []int64{3}) || !slices.Equal(got.Data.Data.([]string), want) {
		t.Errorf("got %v %q, want [3] %q", got.Shape, got.Data.Data, want)
	}
	strs := Tensor{Name: "s", Datatype: "BYTES", Shape: []int64{1}, Data: tensor.MustFromSlice(tensor.Shape{1}, []string{"x"})}
	if _, err := classify1(strs, 1, false, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("classification of BYTES: err = %v, want ErrInvalid", err)
	}
	for _, dt := range []tensor.DType{tensor.String, tensor.Float16, tensor.BFloat16, tensor.Bool} {
		if classifiable(dt) {
			t.Errorf("%v is classifiable; Triton classifies integers, FP32 and FP64 only", dt)
		}
	}
	for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64, tensor.Int64, tensor.Uint8} {
		if !classifiable(dt) {
			t.Errorf("%v is not classifiable", dt)
		}
	}
}

func TestClassificationParameterMustBeAPositiveInteger(t *testing.T) {
	for _, v := range []any{int64(0), float64(-1), float64(2.5), "3", true} {
		req := &InferRequest{Outputs: []RequestedOutput{{Name: "p", Params: map[string]any{"classification": v}}}}
		if _, err := classifications(req); !errors.Is(err, ErrInvalid) {
			t.Errorf("classification %#v: err = %v, want ErrInvalid", v, err)
		}
	}
	req := &InferRequest{Outputs: []RequestedOutput{{Name: "p", Params: map[string]any{"classification": float64(3)}}}}
	if k, err := classifications(req); err != nil || k["p"] != 3 {
		t.Errorf("classification 3 (JSON): %v %v", k, err)
	}
}

func TestMapShapeKeepsBatchAndFillsVariableDims(t *testing.T) {
	for _, tc := range []struct {
		shape, from, to []int64
		batch           bool
		want            string
	}{
		{[]int64{3, 224, 224}, []int64{3, 224, 224}, []int64{1, 3, 224, 224}, false, "[1 3 224 224]"},
		{[]int64{5, 1000}, []int64{1000}, []int64{1000, 1, 1}, true, "[5 1000 1 1]"},
		{[]int64{2, 7, 4}, []int64{-1, 4}, []int64{-1, 2, 2}, true, "[2 7 2 2]"},
		{[]int64{1, 3, 224, 224}, []int64{3, 224, 224}, []int64{1, 3, 224, 224}, false, "refused"},
		{[]int64{3, 224, 225}, []int64{3, 224, 224}, []int64{1, 3, 224, 224}, false, "refused"},
		{[]int64{}, []int64{1000}, []int64{1000}, true, "refused"},
	} {
		got, ok := mapShape(tc.shape, tc.from, tc.to, tc.batch)
		s := fmt.Sprint(got)
		if !ok {
			s = "refused"
		}
		if s != tc.want {
			t.Errorf("mapShape(%v, %v, %v, %v) = %s, want %s", tc.shape, tc.from, tc.to, tc.batch, s, tc.want)
		}
	}
}

func TestMissingLabelFileMakesTheModelUnavailable(t *testing.T) {
	repo := densenetRepo(t)
	if err := os.Remove(filepath.Join(repo, "densenet", "densenet_labels.txt")); err != nil {
		t.Fatal(err)
	}
	svc, err := New(Options{Repository: repo, Engine: &servetest.Engine{}})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	st := svc.Index()
	if len(st) != 1 || st[0].State != StateUnavailable || !strings.Contains(st[0].Reason, "label_filename") {
		t.Errorf("index %+v, want densenet UNAVAILABLE naming label_filename", st)
	}
}

// TestLabelFileLinkedOutsideTheModelFolderIsRefused: a label file that is a symlink to a
// file outside its model's folder makes the model unavailable, and the file's lines are
// never served as labels.
func TestLabelFileLinkedOutsideTheModelFolderIsRefused(t *testing.T) {
	repo := densenetRepo(t)
	secret := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(secret, []byte("root:x:0:0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	labels := filepath.Join(repo, "densenet", "densenet_labels.txt")
	if err := os.Remove(labels); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, labels); err != nil {
		t.Fatal(err)
	}
	svc, err := New(Options{Repository: repo, Engine: &servetest.Engine{}})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	st := svc.Index()
	if len(st) != 1 || st[0].State != StateUnavailable || !strings.Contains(st[0].Reason, "label_filename") {
		t.Errorf("index %+v, want densenet UNAVAILABLE naming label_filename", st)
	}
}

// TestDefaultModelFilenameFromConfigAndLoadAPI: default_model_filename names the
// versions' file, from config.pbtxt and from a configuration given to the load API;
// a plain load of a folder without model.onnx fails.
func TestDefaultModelFilenameFromConfigAndLoadAPI(t *testing.T) {
	repo := densenetRepo(t)
	dir := filepath.Join(repo, "densenet")
	if err := os.Rename(filepath.Join(dir, "1", "model.onnx"), filepath.Join(dir, "1", "squeeze.onnx")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.pbtxt"), []byte(servetest.DensenetConfig+"default_model_filename: \"squeeze.onnx\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	svc, err := New(Options{Repository: repo, Engine: &servetest.Engine{}, RepositoryControl: true, Load: []string{"densenet"}})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	in := []Tensor{{Name: "input", Datatype: "FP32", Shape: []int64{3, 224, 224}, Data: image()}}
	if _, err := svc.Infer(context.Background(), &InferRequest{Model: "densenet", Inputs: in}); err != nil {
		t.Fatalf("config.pbtxt's default_model_filename: %v", err)
	}
	if err := os.Remove(filepath.Join(dir, "config.pbtxt")); err != nil {
		t.Fatal(err)
	}
	if err := svc.LoadModel("densenet"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "model.onnx") {
		t.Errorf("plain load without model.onnx: err = %v, want ErrNotFound naming model.onnx", err)
	}
	if err := svc.LoadModelWithConfig("densenet", []byte(`{"default_model_filename": "squeeze.onnx"}`)); err != nil {
		t.Fatalf("load API's default_model_filename: %v", err)
	}
	in[0].Shape, in[0].Data = []int64{1, 3, 224, 224}, tensor.New(tensor.Float32, tensor.Shape{1, 3, 224, 224})
	if _, err := svc.Infer(context.Background(), &InferRequest{Model: "densenet", Inputs: in}); err != nil {
		t.Errorf("after the load (auto-completed config, the model's own shapes): %v", err)
	}
}

// TestWarmupSampleInConfigDimsIsReshaped: a warm-up sample gives the config's dims, as
// in Triton, and runs in the reshape's shape.
func TestWarmupSampleInConfigDimsIsReshaped(t *testing.T) {
	repo := densenetRepo(t)
	cfg := servetest.DensenetConfig + `model_warmup [ { name: "zeros" batch_size: 1 inputs { key: "input" value: { data_type: TYPE_FP32 dims: [ 3, 224, 224 ] zero_data: true } } } ]`
	if err := os.WriteFile(filepath.Join(repo, "densenet", "config.pbtxt"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	svc, err := New(Options{Repository: repo, Engine: &servetest.Engine{}})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		st := svc.Index()[0]
		if st.State == StateReady {
			break
		}
		if st.State == StateUnavailable || time.Now().After(deadline) {
			t.Fatalf("densenet %s: %s", st.State, st.Reason)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
