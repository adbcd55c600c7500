package grpcapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/serve"
	pb "github.com/kilnrt/kiln/serve/grpcapi/inferencepb"
	"github.com/kilnrt/kiln/serve/servetest"
)

// TestRequestsMayOmitAnOptionalInput: over gRPC and REST, the model config shows the
// input with a default as optional; a request without it runs with the default
// (x + {10, 20}), one with it uses the given value, and one without the required input
// is refused naming it.
func TestRequestsMayOmitAnOptionalInput(t *testing.T) {
	repo := mlpRepo(t)
	if err := servetest.WriteDefaultsRepo(repo, 8); err != nil {
		t.Fatal(err)
	}
	f := startWith(t, serve.Options{Repository: repo}, Options{})
	c := ctx(t)
	cfg, err := f.client.ModelConfig(c, &pb.ModelConfigRequest{Name: "addb"})
	if err != nil {
		t.Fatal(err)
	}
	if in := cfg.Config.GetInput(); len(in) != 2 || in[0].GetOptional() || !in[1].GetOptional() {
		t.Fatalf("gRPC config inputs %v: want x, and b optional", in)
	}
	resp, err := http.Get(f.rest + "/v2/models/addb/config")
	if err != nil {
		t.Fatal(err)
	}
	var restCfg struct {
		Input []struct {
			Name     string
			Optional bool
		}
	}
	err = json.NewDecoder(resp.Body).Decode(&restCfg)
	resp.Body.Close()
	if err != nil || len(restCfg.Input) != 2 || restCfg.Input[0].Optional || !restCfg.Input[1].Optional {
		t.Fatalf("REST config inputs %+v (%v): want x, and b optional", restCfg.Input, err)
	}

	tensorOf := func(name string, v []float32) *pb.ModelInferRequest_InferInputTensor {
		return &pb.ModelInferRequest_InferInputTensor{Name: name, Datatype: "FP32", Shape: []int64{2}, Contents: &pb.InferTensorContents{Fp32Contents: v}}
	}
	restBody := func(ins []*pb.ModelInferRequest_InferInputTensor) string {
		var parts []string
		for _, in := range ins {
			parts = append(parts, fmt.Sprintf(`{"name": %q, "datatype": "FP32", "shape": [2], "data": [%g, %g]}`, in.Name, in.Contents.Fp32Contents[0], in.Contents.Fp32Contents[1]))
		}
		return `{"inputs": [` + strings.Join(parts, ", ") + `]}`
	}
	x, b := tensorOf("x", []float32{1, 2}), tensorOf("b", []float32{-1, 5})
	for _, tc := range []struct {
		inputs []*pb.ModelInferRequest_InferInputTensor
		want   []float32 // nil: refused, naming x
	}{
		{[]*pb.ModelInferRequest_InferInputTensor{x}, []float32{11, 22}},
		{[]*pb.ModelInferRequest_InferInputTensor{x, b}, []float32{0, 7}},
		{[]*pb.ModelInferRequest_InferInputTensor{b}, nil},
	} {
		var names []string
		for _, in := range tc.inputs {
			names = append(names, in.Name)
		}
		got, err := f.client.ModelInfer(c, &pb.ModelInferRequest{ModelName: "addb", Inputs: tc.inputs})
		switch {
		case tc.want == nil && (err == nil || !strings.Contains(err.Error(), `"x"`)):
			t.Errorf("gRPC, inputs %v: %v, want an error naming x", names, err)
		case tc.want != nil && err != nil:
			t.Errorf("gRPC, inputs %v: %v", names, err)
		case tc.want != nil:
			if y := bytesF32(got.RawOutputContents[0]); len(y) != 2 || y[0] != tc.want[0] || y[1] != tc.want[1] {
				t.Errorf("gRPC, inputs %v: y = %v, want %v", names, y, tc.want)
			}
		}

		resp, err := http.Post(f.rest+"/v2/models/addb/infer", "application/json", strings.NewReader(restBody(tc.inputs)))
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Error   string
			Outputs []struct{ Data []float32 }
		}
		json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		switch {
		case tc.want == nil && (resp.StatusCode != http.StatusBadRequest || !strings.Contains(out.Error, `"x"`)):
			t.Errorf("REST, inputs %v: %d %q, want 400 naming x", names, resp.StatusCode, out.Error)
		case tc.want != nil && (resp.StatusCode != http.StatusOK || len(out.Outputs) != 1 || len(out.Outputs[0].Data) != 2 ||
			out.Outputs[0].Data[0] != tc.want[0] || out.Outputs[0].Data[1] != tc.want[1]):
			t.Errorf("REST, inputs %v: %d %+v %q, want y = %v", names, resp.StatusCode, out.Outputs, out.Error, tc.want)
		}
	}
}
