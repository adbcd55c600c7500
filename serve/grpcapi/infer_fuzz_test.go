package grpcapi

import (
	"context"
	"testing"

	"go.uber.org/zap"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/kilnrt/kiln/serve"
	pb "github.com/kilnrt/kiln/serve/grpcapi/inferencepb"
	"github.com/kilnrt/kiln/serve/servetest"
)

// FuzzModelInferRequest decodes arbitrary bytes as a ModelInferRequest for the example
// MLP and calls ModelInfer directly (no recovering interceptor in between). Whatever
// the message, the answer is a response or an InvalidArgument / NotFound status; never
// Internal, never a panic, and the model keeps serving.
func FuzzModelInferRequest(f *testing.F) {
	good := &pb.ModelInferRequest{ModelName: "mlp", Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{3, 8}}}, RawInputContents: [][]byte{f32bytes(x)}}
	seed := func(m *pb.ModelInferRequest) {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	seed(good)
	seed(&pb.ModelInferRequest{ModelName: "mlp", Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{3, 8}, Contents: &pb.InferTensorContents{Fp32Contents: x}}}})
	seed(&pb.ModelInferRequest{ModelName: "mlp", Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{-3, 8}}}, RawInputContents: [][]byte{f32bytes(x)}})
	seed(&pb.ModelInferRequest{ModelName: "mlp", Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "BYTES", Shape: []int64{1 << 40, 8}}}, RawInputContents: [][]byte{{1, 0, 0, 0, 'a'}}})
	seed(&pb.ModelInferRequest{ModelName: "mlp", Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{3, 8}, Parameters: map[string]*pb.InferParameter{"shared_memory_region": {ParameterChoice: &pb.InferParameter_StringParam{StringParam: "r"}}}}}})

	svc, err := serve.New(serve.Options{Repository: mlpRepo(f), Engine: &servetest.Engine{}})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { svc.Close() })
	opts := Options{Version: "test", MaxMessageBytes: DefaultMaxMessageBytes, Log: zap.NewNop()}
	s := &server{svc: svc, opts: opts, log: opts.Log, pools: newPools(nil, opts.MaxMessageBytes)}
	f.Fuzz(func(t *testing.T, b []byte) {
		var req pb.ModelInferRequest
		if proto.Unmarshal(b, &req) != nil {
			return // grpc-go refuses the message before any handler runs
		}
		req.ModelName = "mlp" // reach the model's decoder, not only the lookup
		if _, err := s.ModelInfer(context.Background(), &req); err != nil {
			if c := status.Code(err); c != codes.InvalidArgument && c != codes.NotFound {
				t.Fatalf("%v for a client's message: %v", c, err)
			}
		}
		if _, err := s.ModelInfer(context.Background(), good); err != nil {
			t.Fatalf("the model stopped serving after that request: %v", err)
		}
	})
}
