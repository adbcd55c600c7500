package httpapi

import (
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/serve"
	"github.com/kilnrt/kiln/serve/servetest"
)

// densenetInput is a deterministic 3×224×224 image, nested as JSON data.
func densenetInput() []float32 {
	v := make([]float32, 3*224*224)
	for i := range v {
		v[i] = float32(i%17)/8 - 1
	}
	return v
}

// TestDensenetConfigOverREST: Triton's densenet_onnx config serves SqueezeNet; the
// client sends the config's dims and gets [1000] back, and classification: 3 on the
// output returns the three top classes as "<value>:<index>:<label>" BYTES.
func TestDensenetConfigOverREST(t *testing.T) {
	repo := t.TempDir()
	if err := servetest.WriteDensenetRepo(repo, "../../examples/models/squeezenet1_1/1/model.onnx"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(openService(t, serve.Options{Repository: repo}), Options{}))
	t.Cleanup(srv.Close)

	input := map[string]any{"name": "input", "datatype": "FP32", "shape": []int{3, 224, 224}, "data": densenetInput()}
	code, _, b := do(t, "POST", srv.URL+"/v2/models/densenet/infer", jsonBody(map[string]any{"inputs": []any{input}}), nil)
	var raw struct {
		Outputs []struct {
			Shape []int64   `json:"shape"`
			Data  []float32 `json:"data"`
		} `json:"outputs"`
	}
	if code != 200 || json.Unmarshal(b, &raw) != nil || !slices.Equal(raw.Outputs[0].Shape, []int64{1000}) {
		t.Fatalf("raw inference: %d %.300s", code, b)
	}

	code, _, b = do(t, "POST", srv.URL+"/v2/models/densenet/infer", jsonBody(map[string]any{"inputs": []any{input},
		"outputs": []any{map[string]any{"name": "logits", "parameters": map[string]any{"classification": 3}}}}), nil)
	var cls struct {
		Outputs []struct {
			Name     string   `json:"name"`
			Datatype string   `json:"datatype"`
			Shape    []int64  `json:"shape"`
			Data     []string `json:"data"`
		} `json:"outputs"`
	}
	if code != 200 || json.Unmarshal(b, &cls) != nil {
		t.Fatalf("classification: %d %.300s", code, b)
	}
	o := cls.Outputs[0]
	if want := servetest.TopClasses(raw.Outputs[0].Data, 3); o.Datatype != "BYTES" || !slices.Equal(o.Shape, []int64{3}) || !slices.Equal(o.Data, want) {
		t.Errorf("classification output %s %v %q, want BYTES [3] %q", o.Datatype, o.Shape, o.Data, want)
	}
	t.Logf("top 3: %q", o.Data)

	_, _, b = do(t, "GET", srv.URL+"/v2/models/densenet", nil, nil)
	if !strings.Contains(string(b), `"shape":[3,224,224]`) || !strings.Contains(string(b), `"shape":[1000]`) {
		t.Errorf("metadata %s does not report the config's dims", b)
	}
}

// TestLoadWithConfigParameterOverREST: a load's parameters.config replaces
// config.pbtxt (max_batch_size changes); invalid JSON, a field kiln does not
// implement and an unknown load parameter are 400 naming the problem.
func TestLoadWithConfigParameterOverREST(t *testing.T) {
	svc := openService(t, serve.Options{Repository: mlpRepo(t), RepositoryControl: true, Load: []string{"mlp"}})
	srv := httptest.NewServer(New(svc, Options{}))
	t.Cleanup(srv.Close)
	load := func(params map[string]any) (int, string) {
		code, _, b := do(t, "POST", srv.URL+"/v2/repository/models/mlp/load", jsonBody(map[string]any{"parameters": params}), nil)
		return code, string(b)
	}
	if code, b := load(map[string]any{"config": `{"max_batch_size": 8, "dynamic_batching": {}}`}); code != 200 {
		t.Fatalf("load with config: %d %s", code, b)
	}
	_, _, b := do(t, "GET", srv.URL+"/v2/models/mlp/config", nil, nil)
	if !strings.Contains(string(b), `"max_batch_size":8`) {
		t.Fatalf("config after the load: %s", b)
	}
	for _, tc := range []struct {
		params map[string]any
		want   string
	}{
		{map[string]any{"config": `{"max_batch_size": 8`}, `parameter \"config\": model config: line 1:21: unexpected end of input`},
		{map[string]any{"config": `{"optimization": {}}`}, `unknown field \"optimization\"`},
		{map[string]any{"config": 8}, `parameter \"config\" must be a string`},
		{map[string]any{"file:1/model.onnx": "AAAA"}, `parameter \"file:1/model.onnx\" is not implemented`},
	} {
		if code, b := load(tc.params); code != 400 || !strings.Contains(b, tc.want) {
			t.Errorf("load %v: %d %s, want 400 naming %s", tc.params, code, b, tc.want)
		}
	}
	// A load without the parameter reads config.pbtxt (none here) again.
	if code, _, b := do(t, "POST", srv.URL+"/v2/repository/models/mlp/load", nil, nil); code != 200 {
		t.Fatalf("plain load: %d %s", code, b)
	}
	if _, _, b := do(t, "GET", srv.URL+"/v2/models/mlp/config", nil, nil); !strings.Contains(string(b), `"max_batch_size":0`) {
		t.Errorf("config after a plain load: %s", b)
	}
}
