package grpcapi

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/internal/testdata"
)

// grpcurl finds the grpcurl binary on PATH or in $(go env GOPATH)/bin; without it the
// test is skipped, or fails under KILN_REQUIRE_DATA=1 (CI installs it).
func grpcurl(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("grpcurl"); err == nil {
		return p
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		for _, dir := range filepath.SplitList(strings.TrimSpace(string(out))) {
			p := filepath.Join(dir, "bin", "grpcurl")
			if st, err := os.Stat(p); err == nil && !st.IsDir() {
				return p
			}
		}
	}
	const how = "go install github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.4"
	if testdata.Require() {
		t.Fatalf("grpcurl is absent and KILN_REQUIRE_DATA=1: %s", how)
	}
	t.Skipf("grpcurl is absent (%s); skipping", how)
	return ""
}

// TestGrpcurl: a generic client that knows no .proto file lists the services through
// reflection, resolves the model configuration's imported messages, and calls
// ModelMetadata, ModelConfig and ModelInfer with JSON.
func TestGrpcurl(t *testing.T) {
	bin := grpcurl(t)
	f := start(t, Options{})
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, append([]string{"-plaintext"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("grpcurl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	list := run(f.addr, "list")
	for _, s := range []string{"inference.GRPCInferenceService", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"} {
		if !strings.Contains(list, s) {
			t.Errorf("grpcurl list lacks %s:\n%s", s, list)
		}
	}
	if d := run(f.addr, "describe", "inference.ModelConfigResponse"); !strings.Contains(d, ".inference.ModelConfig config = 1") {
		t.Errorf("describe ModelConfigResponse:\n%s", d)
	}
	if d := run(f.addr, "describe", "inference.ModelConfig"); !strings.Contains(d, "max_batch_size") {
		t.Errorf("describe ModelConfig:\n%s", d)
	}

	md := run("-d", `{"name":"mlp"}`, f.addr, "inference.GRPCInferenceService/ModelMetadata")
	var m struct {
		Name   string `json:"name"`
		Inputs []struct {
			Name, Datatype string
			Shape          []string // int64 is a string in protobuf's JSON
		} `json:"inputs"`
	}
	if err := json.Unmarshal([]byte(md), &m); err != nil || m.Name != "mlp" || len(m.Inputs) != 1 || m.Inputs[0].Name != "x" || strings.Join(m.Inputs[0].Shape, ",") != "-1,8" {
		t.Fatalf("ModelMetadata: %s (%v)", md, err)
	}

	// the configuration, a message of the imported model_config.proto, prints as JSON
	if cfg := run("-d", `{"name":"mlp"}`, f.addr, "inference.GRPCInferenceService/ModelConfig"); !strings.Contains(cfg, `"dataType": "TYPE_FP32"`) {
		t.Errorf("ModelConfig:\n%s", cfg)
	}

	data, _ := json.Marshal(x)
	req := `{"model_name":"mlp","id":"curl","inputs":[{"name":"x","datatype":"FP32","shape":[3,8],"contents":{"fp32_contents":` + string(data) + `}}]}`
	res := run("-d", req, f.addr, "inference.GRPCInferenceService/ModelInfer")
	var r struct {
		ID      string `json:"id"`
		Outputs []struct {
			Name  string   `json:"name"`
			Shape []string `json:"shape"`
		} `json:"outputs"`
		Raw []string `json:"rawOutputContents"` // grpcurl prints JSON names; bytes are base64
	}
	if err := json.Unmarshal([]byte(res), &r); err != nil || r.ID != "curl" || len(r.Outputs) != 1 || r.Outputs[0].Name != "probs" || len(r.Raw) != 1 {
		t.Fatalf("ModelInfer: %s (%v)", res, err)
	}
	b, err := base64.StdEncoding.DecodeString(r.Raw[0])
	if err != nil {
		t.Fatal(err)
	}
	checkProbs(t, bytesF32(b))
}
