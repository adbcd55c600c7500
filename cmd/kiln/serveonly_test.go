package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// compilerPackages are the packages of the compiler half: the serve-only build links
// none of them.
var compilerPackages = []string{"compiler", "graph/passes", "kernels", "codegen", "schedule", "te", "loopir", "intrin", "autotune"}

// TestServeOnlyBuildServesPrebuiltModels: the serve-only build (-tags serveonly) links
// no compiler package, serves a model from a journal that `kiln prebuild` filled, and
// answers a model the journal lacks with an error naming the missing entry.
func TestServeOnlyBuildServesPrebuiltModels(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-tags", "serveonly", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		rel, ok := strings.CutPrefix(p, "github.com/kilnrt/kiln/")
		if !ok {
			continue
		}
		for _, c := range compilerPackages {
			if rel == c || strings.HasPrefix(rel, c+"/") {
				t.Errorf("the serve-only build links %s", rel)
			}
		}
	}
	full := buildKiln(t)
	serveOnly := filepath.Join(t.TempDir(), "kiln-serve")
	if b, err := exec.Command("go", "build", "-tags", "serveonly", "-o", serveOnly, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build -tags serveonly: %v\n%s", err, b)
	}
	if b, _ := exec.Command(serveOnly, "compile", "x.onnx").CombinedOutput(); !strings.Contains(string(b), "unknown command") {
		t.Errorf("the serve-only build has a compile command: %s", b)
	}

	repo, cache := t.TempDir(), t.TempDir()
	link := func(name, src string) {
		os.MkdirAll(filepath.Join(repo, name, "1"), 0o755)
		abs, _ := filepath.Abs(src)
		if err := os.Symlink(abs, filepath.Join(repo, name, "1", "model.onnx")); err != nil {
			t.Fatal(err)
		}
	}
	link("mlp", "../../examples/models/mlp/1/model.onnx")                  // free batch dim: the generic executable
	link("squeezenet", "../../examples/models/squeezenet1_1/1/model.onnx") // static: its shapes
	if b, err := exec.Command(full, "prebuild", "--model-repository", repo, "--cache-dir", cache, "-q").CombinedOutput(); err != nil {
		t.Fatalf("kiln prebuild: %v\n%s", err, b)
	}
	// after the prebuild, a model with other bytes (an unknown protobuf field appended):
	// not in the journal
	mlp, err := os.ReadFile("../../examples/models/mlp/1/model.onnx")
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(repo, "late", "1"), 0o755)
	if err := os.WriteFile(filepath.Join(repo, "late", "1", "model.onnx"), append(mlp, 0x98, 0x06, 0x01), 0o644); err != nil {
		t.Fatal(err)
	}

	_, url := startServe(t, serveOnly, repo, "--cache-dir", cache)
	post := func(model string, body any) (int, string) {
		b, _ := json.Marshal(body)
		resp, err := http.Post(url+"/v2/models/"+model+"/infer", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(got)
	}
	x := make([]float32, 3*8)
	for i := range x {
		x[i] = float32(i%5) - 2
	}
	mlpRequest := map[string]any{"inputs": []any{map[string]any{"name": "x", "datatype": "FP32", "shape": []int{3, 8}, "data": x}}}
	code, body := post("mlp", mlpRequest)
	if code != 200 || !strings.Contains(body, `"shape":[3,`) {
		t.Fatalf("prebuilt model with a free dim: %d %s", code, body)
	}
	code, body = post("squeezenet", map[string]any{"inputs": []any{map[string]any{"name": "input", "datatype": "FP32", "shape": []int{1, 3, 224, 224},
		"data": make([]float32, 3*224*224)}}})
	if code != 200 || !strings.Contains(body, `"shape":[1,1000`) {
		t.Fatalf("prebuilt static model: %d %.300s", code, body)
	}
	code, body = post("late", mlpRequest)
	if code == 200 || !strings.Contains(body, "no prebuilt executable") || !strings.Contains(body, "journal entry") || !strings.Contains(body, "late/1") ||
		!strings.Contains(body, "the generic executable for every shape is not there either") {
		t.Fatalf("model not in the journal: %d %s", code, body)
	}
	t.Logf("model not in the journal: %d %s", code, body)
}
