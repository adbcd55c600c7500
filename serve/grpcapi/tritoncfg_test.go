package grpcapi

import (
	"encoding/binary"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kilnrt/kiln/serve"
	pb "github.com/kilnrt/kiln/serve/grpcapi/inferencepb"
	"github.com/kilnrt/kiln/serve/servetest"
)

// byteStrings splits BYTES raw contents (each element a 4-byte little-endian length
// and its bytes).
func byteStrings(t *testing.T, b []byte) []string {
	t.Helper()
	var out []string
	for len(b) > 0 {
		if len(b) < 4 || uint64(binary.LittleEndian.Uint32(b)) > uint64(len(b)-4) {
			t.Fatalf("not BYTES contents: %d bytes left", len(b))
		}
		n := binary.LittleEndian.Uint32(b)
		out, b = append(out, string(b[4:4+n])), b[4+n:]
	}
	return out
}

// TestDensenetConfigOverGRPC: Triton's densenet_onnx config serves SqueezeNet over
// gRPC; the classification parameter (int64_param) on the requested output returns the
// three top classes as "<value>:<index>:<label>" BYTES.
func TestDensenetConfigOverGRPC(t *testing.T) {
	repo := t.TempDir()
	if err := servetest.WriteDensenetRepo(repo, "../../examples/models/squeezenet1_1/1/model.onnx"); err != nil {
		t.Fatal(err)
	}
	f := startWith(t, serve.Options{Repository: repo}, Options{})
	c := ctx(t)
	img := make([]float32, 3*224*224)
	for i := range img {
		img[i] = float32(i%17)/8 - 1
	}
	req := func(outputs ...*pb.ModelInferRequest_InferRequestedOutputTensor) *pb.ModelInferRequest {
		return &pb.ModelInferRequest{ModelName: "densenet", Outputs: outputs,
			Inputs:           []*pb.ModelInferRequest_InferInputTensor{{Name: "input", Datatype: "FP32", Shape: []int64{3, 224, 224}}},
			RawInputContents: [][]byte{f32bytes(img)}}
	}
	raw, err := f.client.ModelInfer(c, req())
	if err != nil || !slices.Equal(raw.Outputs[0].Shape, []int64{1000}) {
		t.Fatalf("raw inference: %v %v", raw.GetOutputs(), err)
	}
	logits := bytesF32(raw.RawOutputContents[0])

	cls, err := f.client.ModelInfer(c, req(&pb.ModelInferRequest_InferRequestedOutputTensor{Name: "logits",
		Parameters: map[string]*pb.InferParameter{"classification": {ParameterChoice: &pb.InferParameter_Int64Param{Int64Param: 3}}}}))
	if err != nil {
		t.Fatal(err)
	}
	o := cls.Outputs[0]
	got := byteStrings(t, cls.RawOutputContents[0])
	if want := servetest.TopClasses(logits, 3); o.Datatype != "BYTES" || !slices.Equal(o.Shape, []int64{3}) || !slices.Equal(got, want) {
		t.Errorf("classification output %s %v %q, want BYTES [3] %q", o.Datatype, o.Shape, got, want)
	}
}

// TestLoadWithConfigParameterOverGRPC: the load request's parameter config
// (string_param, JSON) replaces config.pbtxt; invalid JSON and other parameters are
// INVALID_ARGUMENT naming the problem.
func TestLoadWithConfigParameterOverGRPC(t *testing.T) {
	f := startWith(t, serve.Options{Repository: mlpRepo(t), RepositoryControl: true, Load: []string{"mlp"}}, Options{})
	c := ctx(t)
	str := func(s string) *pb.ModelRepositoryParameter {
		return &pb.ModelRepositoryParameter{ParameterChoice: &pb.ModelRepositoryParameter_StringParam{StringParam: s}}
	}
	load := func(params map[string]*pb.ModelRepositoryParameter) error {
		_, err := f.client.RepositoryModelLoad(c, &pb.RepositoryModelLoadRequest{ModelName: "mlp", Parameters: params})
		return err
	}
	if err := load(map[string]*pb.ModelRepositoryParameter{"config": str(`{"max_batch_size": 8}`)}); err != nil {
		t.Fatal(err)
	}
	cfg, err := f.client.ModelConfig(c, &pb.ModelConfigRequest{Name: "mlp"})
	if err != nil || cfg.Config.GetMaxBatchSize() != 8 {
		t.Fatalf("config after the load: %v %v", cfg, err)
	}
	for _, tc := range []struct {
		params map[string]*pb.ModelRepositoryParameter
		want   string
	}{
		{map[string]*pb.ModelRepositoryParameter{"config": str(`{"max_batch_size": }`)}, `parameter "config": model config: line 1:`},
		{map[string]*pb.ModelRepositoryParameter{"config": {ParameterChoice: &pb.ModelRepositoryParameter_Int64Param{Int64Param: 8}}}, "must be a string_param"},
		{map[string]*pb.ModelRepositoryParameter{"file:1/model.onnx": {ParameterChoice: &pb.ModelRepositoryParameter_BytesParam{BytesParam: []byte{0}}}}, `parameter "file:1/model.onnx" is not implemented`},
	} {
		if err := load(tc.params); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("load %v: %v, want INVALID_ARGUMENT naming %s", tc.params, err, tc.want)
		}
	}
	if cfg, err := f.client.ModelConfig(c, &pb.ModelConfigRequest{Name: "mlp"}); err != nil || cfg.Config.GetMaxBatchSize() != 8 {
		t.Errorf("a refused load changed the model: %v %v", cfg, err)
	}
}
