package grpcapi

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/kilnrt/kiln/serve"
	pb "github.com/kilnrt/kiln/serve/grpcapi/inferencepb"
	"github.com/kilnrt/kiln/serve/httpapi"
	"github.com/kilnrt/kiln/serve/servetest"
)

// x is the example model's input (3×8); probs (3×4) is a softmax, so rows sum to 1.
var x = func() []float32 {
	v := make([]float32, 24)
	for i := range v {
		v[i] = float32(i%5) - 2
	}
	return v
}()

type fixture struct {
	svc    *serve.Service
	g      *grpc.Server
	addr   string
	client pb.GRPCInferenceServiceClient
	conn   *grpc.ClientConn
	rest   string // the REST face of the same service
}

// start serves the bundled example MLP (as <repo>/mlp/1/model.onnx) over gRPC on a
// real socket, and over REST beside it for comparisons.
func start(t *testing.T, opts Options) *fixture {
	t.Helper()
	return startWith(t, serve.Options{Repository: mlpRepo(t)}, opts)
}

// mlpRepo is a repository holding the bundled example MLP as <repo>/mlp/1/model.onnx.
func mlpRepo(t testing.TB) string {
	t.Helper()
	repo := t.TempDir()
	src, err := os.ReadFile("../../examples/mlp/model.onnx")
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(repo, "mlp", "1"), 0o755)
	os.WriteFile(filepath.Join(repo, "mlp", "1", "model.onnx"), src, 0o644)
	return repo
}

// startWith serves a service opened with sopts on the test engine over gRPC on a real
// socket, and over REST beside it.
func startWith(t *testing.T, sopts serve.Options, opts Options) *fixture {
	t.Helper()
	sopts.Engine = &servetest.Engine{Delay: 50 * time.Millisecond}
	svc, err := serve.New(sopts)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Version == "" {
		opts.Version = "test"
	}
	g := New(svc, opts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(ln)
	rest := httptest.NewServer(httpapi.New(svc, httpapi.Options{Version: "test"}))
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(512<<20), grpc.MaxCallSendMsgSize(512<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); g.Stop(); rest.Close(); svc.Close() })
	return &fixture{svc: svc, g: g, addr: ln.Addr().String(), client: pb.NewGRPCInferenceServiceClient(conn), conn: conn, rest: rest.URL}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

func f32bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

func bytesF32(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

func checkProbs(t *testing.T, probs []float32) {
	t.Helper()
	if len(probs) != 12 {
		t.Fatalf("%d probabilities, want 12", len(probs))
	}
	for r := range 3 {
		s := float64(probs[4*r] + probs[4*r+1] + probs[4*r+2] + probs[4*r+3])
		if math.Abs(s-1) > 1e-5 {
			t.Fatalf("row %d sums to %v", r, s)
		}
	}
}

func rawRequest() *pb.ModelInferRequest {
	return &pb.ModelInferRequest{ModelName: "mlp", Id: "r1",
		Inputs:           []*pb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{3, 8}}},
		RawInputContents: [][]byte{f32bytes(x)}}
}

func typedRequest() *pb.ModelInferRequest {
	return &pb.ModelInferRequest{ModelName: "mlp", ModelVersion: "1", Id: "t1",
		Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{3, 8},
			Contents: &pb.InferTensorContents{Fp32Contents: x}}},
		Outputs: []*pb.ModelInferRequest_InferRequestedOutputTensor{{Name: "probs"}}}
}

func TestHealthAndMetadata(t *testing.T) {
	f := start(t, Options{})
	c := ctx(t)
	if r, err := f.client.ServerLive(c, &pb.ServerLiveRequest{}); err != nil || !r.Live {
		t.Fatalf("ServerLive: %v %v", r, err)
	}
	if r, err := f.client.ServerReady(c, &pb.ServerReadyRequest{}); err != nil || !r.Ready {
		t.Fatalf("ServerReady: %v %v", r, err)
	}
	for _, v := range []string{"", "1"} {
		if r, err := f.client.ModelReady(c, &pb.ModelReadyRequest{Name: "mlp", Version: v}); err != nil || !r.Ready {
			t.Fatalf("ModelReady(mlp, %q): %v %v", v, r, err)
		}
	}
	sm, err := f.client.ServerMetadata(c, &pb.ServerMetadataRequest{})
	if err != nil || sm.Name != "kiln" || sm.Version != "test" || strings.Join(sm.Extensions, ",") != "binary_tensor_data,classification,statistics,model_configuration,model_repository,system_shared_memory" {
		t.Fatalf("ServerMetadata: %v %v", sm, err)
	}
	md, err := f.client.ModelMetadata(c, &pb.ModelMetadataRequest{Name: "mlp"})
	if err != nil {
		t.Fatal(err)
	}
	if md.Name != "mlp" || md.Platform == "" || strings.Join(md.Versions, ",") != "1" || len(md.Inputs) != 1 || len(md.Outputs) != 1 ||
		md.Inputs[0].Name != "x" || md.Inputs[0].Datatype != "FP32" || !equal(md.Inputs[0].Shape, []int64{-1, 8}) ||
		md.Outputs[0].Name != "probs" || md.Outputs[0].Datatype != "FP32" {
		t.Fatalf("ModelMetadata: %v", md)
	}

	// grpc.health.v1: the whole server and the inference service
	h := healthpb.NewHealthClient(f.conn)
	for _, name := range []string{"", "inference.GRPCInferenceService"} {
		r, err := h.Check(c, &healthpb.HealthCheckRequest{Service: name})
		if err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health Check(%q): %v %v", name, r, err)
		}
	}
	if _, err := h.Check(c, &healthpb.HealthCheckRequest{Service: "nope"}); status.Code(err) != codes.NotFound {
		t.Fatalf("health Check(nope): %v, want NOT_FOUND", err)
	}
}

// TestDrain: after the service drains, readiness and health turn and inferences are
// refused with UNAVAILABLE; a Watch call sees the change.
func TestDrain(t *testing.T) {
	f := start(t, Options{})
	c := ctx(t)
	h := healthpb.NewHealthClient(f.conn)
	w, err := h.Watch(c, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := w.Recv(); err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("first Watch message: %v %v", r, err)
	}
	if err := f.svc.Drain(c); err != nil {
		t.Fatal(err)
	}
	if r, err := w.Recv(); err != nil || r.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("Watch after drain: %v %v", r, err)
	}
	if r, err := h.Check(c, &healthpb.HealthCheckRequest{}); err != nil || r.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health Check after drain: %v %v", r, err)
	}
	if r, err := f.client.ServerReady(c, &pb.ServerReadyRequest{}); err != nil || r.Ready {
		t.Fatalf("ServerReady after drain: %v %v", r, err)
	}
	if r, err := f.client.ServerLive(c, &pb.ServerLiveRequest{}); err != nil || !r.Live {
		t.Fatalf("ServerLive after drain: %v %v", r, err)
	}
	if _, err := f.client.ModelInfer(c, rawRequest()); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "shutting down") {
		t.Fatalf("ModelInfer after drain: %v, want UNAVAILABLE", err)
	}
}

// TestStopping: after the drain, closing Options.Stopping ends an open health Watch
// (last status NOT_SERVING) and an idle ModelStreamInfer with UNAVAILABLE, so that
// GracefulStop returns at once instead of waiting for the clients.
func TestStopping(t *testing.T) {
	stopping := make(chan struct{})
	f := start(t, Options{Stopping: stopping})
	c := ctx(t)
	w, err := healthpb.NewHealthClient(f.conn).Watch(c, &healthpb.HealthCheckRequest{Service: "inference.GRPCInferenceService"})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := w.Recv(); err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("first Watch message: %v %v", r, err)
	}
	s, err := f.client.ModelStreamInfer(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(rawRequest()); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Recv(); err != nil || r.ErrorMessage != "" {
		t.Fatalf("stream response: %v %v", r, err)
	}
	if err := f.svc.Drain(c); err != nil {
		t.Fatal(err)
	}
	close(stopping)
	last := healthpb.HealthCheckResponse_SERVICE_UNKNOWN
	for {
		r, err := w.Recv()
		if err != nil {
			if status.Code(err) != codes.Unavailable || last != healthpb.HealthCheckResponse_NOT_SERVING {
				t.Fatalf("Watch ended with %v after %v; want UNAVAILABLE after NOT_SERVING", err, last)
			}
			break
		}
		last = r.Status
	}
	if r, err := s.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("stream after stopping: %v %v; want UNAVAILABLE", r, err)
	}
	done := make(chan struct{})
	go func() { f.g.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("GracefulStop still waiting 10 s after Stopping closed")
	}
}

func TestInferRawAndTyped(t *testing.T) {
	f := start(t, Options{})
	c := ctx(t)
	r1, err := f.client.ModelInfer(c, rawRequest())
	if err != nil {
		t.Fatal(err)
	}
	if r1.ModelName != "mlp" || r1.ModelVersion != "1" || r1.Id != "r1" || len(r1.Outputs) != 1 || len(r1.RawOutputContents) != 1 ||
		r1.Outputs[0].Name != "probs" || r1.Outputs[0].Datatype != "FP32" || !equal(r1.Outputs[0].Shape, []int64{3, 4}) || r1.Outputs[0].Contents != nil {
		t.Fatalf("raw response: %v", r1)
	}
	raw := bytesF32(r1.RawOutputContents[0])
	checkProbs(t, raw)

	r2, err := f.client.ModelInfer(c, typedRequest())
	if err != nil {
		t.Fatal(err)
	}
	if r2.Id != "t1" || len(r2.RawOutputContents) != 1 || r2.Outputs[0].Contents != nil {
		t.Fatalf("typed response (outputs are always raw): %v", r2)
	}
	if !bytes.Equal(r2.RawOutputContents[0], r1.RawOutputContents[0]) {
		t.Fatalf("typed and raw inputs gave different outputs: %v vs %v", bytesF32(r2.RawOutputContents[0]), raw)
	}

	// the REST face of the same service agrees
	body, _ := json.Marshal(map[string]any{"inputs": []any{map[string]any{"name": "x", "datatype": "FP32", "shape": []int{3, 8}, "data": x}}})
	resp, err := http.Post(f.rest+"/v2/models/mlp/infer", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var rr struct {
		Outputs []struct {
			Data []float32 `json:"data"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(b, &rr); err != nil || len(rr.Outputs) != 1 {
		t.Fatalf("REST: %s (%v)", b, err)
	}
	for i, v := range rr.Outputs[0].Data {
		if math.Abs(float64(v-raw[i])) > 1e-6 {
			t.Fatalf("output %d: gRPC %v, REST %v", i, raw[i], v)
		}
	}

	// request parameters pass; statistics count the four successes (REST's included)
	req := rawRequest()
	req.Parameters = map[string]*pb.InferParameter{"priority": {ParameterChoice: &pb.InferParameter_Int64Param{Int64Param: 1}}}
	req.Outputs = []*pb.ModelInferRequest_InferRequestedOutputTensor{{Name: "probs", Parameters: map[string]*pb.InferParameter{"binary_data": {ParameterChoice: &pb.InferParameter_BoolParam{BoolParam: false}}}}}
	if _, err := f.client.ModelInfer(c, req); err != nil {
		t.Fatal(err)
	}
	st, err := f.client.ModelStatistics(c, &pb.ModelStatisticsRequest{Name: "mlp", Version: "1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.ModelStats) != 1 || st.ModelStats[0].InferenceStats.Success.Count != 4 || st.ModelStats[0].InferenceCount != 4 || st.ModelStats[0].LastInference == 0 {
		t.Fatalf("statistics: %v", st)
	}
	if st, err := f.client.ModelStatistics(c, &pb.ModelStatisticsRequest{}); err != nil || len(st.ModelStats) != 1 {
		t.Fatalf("all statistics: %v %v", st, err)
	}
	if _, err := f.client.ModelStatistics(c, &pb.ModelStatisticsRequest{Name: "nope"}); status.Code(err) != codes.NotFound {
		t.Fatalf("statistics of an unknown model: %v", err)
	}
}

// TestTypedContents: every datatype with a typed list decodes to the right element
// type (checked up to the model's dtype check, which names what it received).
func TestTypedContents(t *testing.T) {
	cases := []struct {
		datatype string
		c        *pb.InferTensorContents
	}{
		{"BOOL", &pb.InferTensorContents{BoolContents: []bool{true, false}}},
		{"INT8", &pb.InferTensorContents{IntContents: []int32{-128, 127}}},
		{"INT16", &pb.InferTensorContents{IntContents: []int32{-3, 3}}},
		{"INT32", &pb.InferTensorContents{IntContents: []int32{1, 2}}},
		{"INT64", &pb.InferTensorContents{Int64Contents: []int64{1, 2}}},
		{"UINT8", &pb.InferTensorContents{UintContents: []uint32{0, 255}}},
		{"UINT16", &pb.InferTensorContents{UintContents: []uint32{0, 65535}}},
		{"UINT32", &pb.InferTensorContents{UintContents: []uint32{1, 2}}},
		{"UINT64", &pb.InferTensorContents{Uint64Contents: []uint64{1, 2}}},
		{"FP32", &pb.InferTensorContents{Fp32Contents: []float32{1, 2}}},
		{"FP64", &pb.InferTensorContents{Fp64Contents: []float64{1, 2}}},
		{"BYTES", &pb.InferTensorContents{BytesContents: [][]byte{[]byte("a"), {}}}},
	}
	for _, c := range cases {
		tt, err := decodeContents("x", c.datatype, []int64{1, 2}, c.c)
		if err != nil {
			t.Errorf("%s: %v", c.datatype, err)
			continue
		}
		if serve.Datatype(tt.DType) != c.datatype || tt.Len() != 2 || !equal(toI64(tt.Shape), []int64{1, 2}) {
			t.Errorf("%s: decoded %v", c.datatype, tt)
		}
	}
	bad := []struct {
		datatype string
		c        *pb.InferTensorContents
		want     string
	}{
		{"INT8", &pb.InferTensorContents{IntContents: []int32{0, 128}}, "element 1 (128) is out of the range of INT8"},
		{"UINT8", &pb.InferTensorContents{UintContents: []uint32{256, 0}}, "element 0 (256)"},
		{"FP16", &pb.InferTensorContents{Fp32Contents: []float32{1, 2}}, "send it in raw_input_contents"},
		{"BF16", &pb.InferTensorContents{}, "send it in raw_input_contents"},
		{"FP32", &pb.InferTensorContents{Fp32Contents: []float32{1, 2}, Fp64Contents: []float64{1}}, "FP32 data goes in fp32_contents, the request has fp64_contents"},
		{"FP32", &pb.InferTensorContents{Fp32Contents: []float32{1}}, "1 elements in fp32_contents for shape [1 2] (2 elements)"},
		{"FLOAT", &pb.InferTensorContents{}, `datatype "FLOAT"`},
	}
	for _, c := range bad {
		_, err := decodeContents("x", c.datatype, []int64{1, 2}, c.c)
		if !errors.Is(err, serve.ErrInvalid) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `input "x"`) {
			t.Errorf("%s %v: %v; want an invalid-request error with %q", c.datatype, c.c, err, c.want)
		}
	}
}

func toI64(s []int) []int64 {
	out := make([]int64, len(s))
	for i, v := range s {
		out[i] = int64(v)
	}
	return out
}

// TestErrors: each malformed request gets its status code and a message naming the
// problem, and the server keeps serving.
func TestErrors(t *testing.T) {
	f := start(t, Options{})
	c := ctx(t)
	with := func(mod func(r *pb.ModelInferRequest)) *pb.ModelInferRequest {
		r := rawRequest()
		mod(r)
		return r
	}
	typed := func(mod func(r *pb.ModelInferRequest)) *pb.ModelInferRequest {
		r := typedRequest()
		mod(r)
		return r
	}
	cases := []struct {
		name string
		req  *pb.ModelInferRequest
		code codes.Code
		want string
	}{
		{"unknown model", with(func(r *pb.ModelInferRequest) { r.ModelName = "nope" }), codes.NotFound, `unknown model (a model is a folder`},
		{"unknown version", with(func(r *pb.ModelInferRequest) { r.ModelVersion = "9" }), codes.NotFound, "has no version 9"},
		{"non-numeric version", with(func(r *pb.ModelInferRequest) { r.ModelVersion = "x" }), codes.InvalidArgument, `version "x"`},
		{"wrong dtype", with(func(r *pb.ModelInferRequest) { r.Inputs[0].Datatype = "INT32" }), codes.InvalidArgument, `input "x" is INT32, model "mlp" takes FP32`},
		{"unknown dtype", with(func(r *pb.ModelInferRequest) { r.Inputs[0].Datatype = "FLOAT" }), codes.InvalidArgument, `datatype "FLOAT"`},
		{"raw size mismatch", with(func(r *pb.ModelInferRequest) { r.RawInputContents[0] = r.RawInputContents[0][:40] }), codes.InvalidArgument, `input "x": 40 bytes of data for FP32[3 8], which needs 96`},
		{"unknown output", with(func(r *pb.ModelInferRequest) {
			r.Outputs = []*pb.ModelInferRequest_InferRequestedOutputTensor{{Name: "logits"}}
		}), codes.InvalidArgument, `model "mlp" has no output "logits"`},
		{"wrong static dim", with(func(r *pb.ModelInferRequest) { r.Inputs[0].Shape = []int64{4, 6} }), codes.InvalidArgument, "takes FP32[-1 8]"},
		{"negative dim", with(func(r *pb.ModelInferRequest) { r.Inputs[0].Shape = []int64{-3, 8} }), codes.InvalidArgument, "negative dimension"},
		{"unknown input", with(func(r *pb.ModelInferRequest) { r.Inputs[0].Name = "y" }), codes.InvalidArgument, `needs input "x"`},
		{"input without a name", with(func(r *pb.ModelInferRequest) { r.Inputs[0].Name = "" }), codes.InvalidArgument, "input 0 has no name"},
		{"no data", with(func(r *pb.ModelInferRequest) { r.RawInputContents = nil }), codes.InvalidArgument, `input "x" has no data`},
		{"raw contents without inputs", with(func(r *pb.ModelInferRequest) { r.RawInputContents = append(r.RawInputContents, []byte{1}) }), codes.InvalidArgument, "2 raw_input_contents for 1 inputs"},
		{"raw and typed mixed", with(func(r *pb.ModelInferRequest) { r.Inputs[0].Contents = &pb.InferTensorContents{Fp32Contents: x} }), codes.InvalidArgument, "uses raw_input_contents"},
		{"typed count mismatch", typed(func(r *pb.ModelInferRequest) { r.Inputs[0].Contents.Fp32Contents = x[:20] }), codes.InvalidArgument, "20 elements in fp32_contents for shape [3 8] (24 elements)"},
		{"typed wrong list", typed(func(r *pb.ModelInferRequest) {
			r.Inputs[0].Contents = &pb.InferTensorContents{IntContents: make([]int32, 24)}
		}), codes.InvalidArgument, "FP32 data goes in fp32_contents, the request has int_contents"},
		{"FP16 typed", typed(func(r *pb.ModelInferRequest) { r.Inputs[0].Datatype = "FP16" }), codes.InvalidArgument, "send it in raw_input_contents"},
		{"bad BYTES", with(func(r *pb.ModelInferRequest) {
			r.Inputs[0].Datatype = "BYTES"
			r.RawInputContents[0] = []byte{9, 0, 0, 0, 1}
		}), codes.InvalidArgument, "BYTES element 0 claims 9 bytes"},
		{"empty parameter", with(func(r *pb.ModelInferRequest) { r.Parameters = map[string]*pb.InferParameter{"p": {}} }), codes.InvalidArgument, `parameter "p" has no value`},
	}
	for _, tc := range cases {
		_, err := f.client.ModelInfer(c, tc.req)
		if st, _ := status.FromError(err); status.Code(err) != tc.code || !strings.Contains(st.Message(), tc.want) {
			t.Errorf("%s: %v; want %v and %q", tc.name, err, tc.code, tc.want)
		}
	}
	if r, err := f.client.ModelInfer(c, rawRequest()); err != nil {
		t.Fatalf("after %d bad requests: %v", len(cases), err)
	} else {
		checkProbs(t, bytesF32(r.RawOutputContents[0]))
	}
	if _, err := f.client.ModelMetadata(c, &pb.ModelMetadataRequest{Name: "nope"}); status.Code(err) != codes.NotFound {
		t.Errorf("metadata of an unknown model: %v", err)
	}
	if _, err := f.client.ModelReady(c, &pb.ModelReadyRequest{Name: "mlp", Version: "7"}); status.Code(err) != codes.NotFound {
		t.Errorf("readiness of an unknown version: %v", err)
	}
	st, err := f.client.ModelStatistics(c, &pb.ModelStatisticsRequest{Name: "mlp"})
	if err != nil || st.ModelStats[0].InferenceStats.Success.Count != 1 || st.ModelStats[0].InferenceStats.Fail.Count == 0 {
		t.Errorf("statistics after the errors: %v %v", st, err)
	}
	t.Logf("%d bad requests answered", len(cases))
}

// TestDeadline: the call's context reaches the service. A request for a shape not
// compiled yet waits for the compile; an expired deadline ends the wait with
// DEADLINE_EXCEEDED, a cancelled call with CANCELLED, and the server goes on.
func TestDeadline(t *testing.T) {
	f := start(t, Options{})
	s := &server{svc: f.svc, log: zap.NewNop()}
	cold := func(rows int64) *pb.ModelInferRequest {
		r := rawRequest()
		r.Inputs[0].Shape = []int64{rows, 8}
		r.RawInputContents[0] = make([]byte, 32*rows)
		return r
	}
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	if _, err := s.ModelInfer(expired, cold(5)); status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), `model "mlp"`) {
		t.Fatalf("expired deadline: %v, want DEADLINE_EXCEEDED naming the model", err)
	}
	cancelled, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if _, err := s.ModelInfer(cancelled, cold(6)); status.Code(err) != codes.Canceled {
		t.Fatalf("cancelled call: %v, want CANCELLED", err)
	}
	short, cancel3 := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel3()
	if _, err := f.client.ModelInfer(short, cold(7)); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("1 ms deadline over the wire: %v, want DEADLINE_EXCEEDED", err)
	}
	if _, err := f.client.ModelInfer(ctx(t), rawRequest()); err != nil {
		t.Fatal(err)
	}
}

// TestLargeMessages: messages above gRPC's default 4 MiB limit are accepted up to
// MaxMessageBytes, both ways: a 6 MiB input to an erroring request, and a real
// inference on 8 MiB of input (262144 rows) with a 4 MiB output. Beyond the limit the
// call fails with RESOURCE_EXHAUSTED.
func TestLargeMessages(t *testing.T) {
	f := start(t, Options{})
	c := ctx(t)
	req := rawRequest()
	req.RawInputContents[0] = make([]byte, 6<<20)
	if _, err := f.client.ModelInfer(c, req); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "6291456 bytes of data") {
		t.Fatalf("6 MiB input: %v, want INVALID_ARGUMENT about its size", err)
	}
	const rows = 1 << 18
	big := make([]float32, rows*8)
	for i := range big {
		big[i] = x[i%24]
	}
	req = rawRequest()
	req.Inputs[0].Shape = []int64{rows, 8}
	req.RawInputContents[0] = f32bytes(big)
	r, err := f.client.ModelInfer(c, req)
	if err != nil {
		t.Fatal(err)
	}
	out := bytesF32(r.RawOutputContents[0])
	if len(out) != rows*4 || !equal(r.Outputs[0].Shape, []int64{rows, 4}) {
		t.Fatalf("%d outputs, shape %v", len(out), r.Outputs[0].Shape)
	}
	checkProbs(t, out[:12])
	checkProbs(t, out[len(out)-12:])

	small := start(t, Options{MaxMessageBytes: 1 << 20})
	req = rawRequest()
	req.RawInputContents[0] = make([]byte, 2<<20)
	if _, err := small.client.ModelInfer(c, req); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("2 MiB with a 1 MiB limit: %v, want RESOURCE_EXHAUSTED", err)
	}
}

func TestStreamInfer(t *testing.T) {
	f := start(t, Options{})
	s, err := f.client.ModelStreamInfer(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	bad := rawRequest()
	bad.ModelName = "nope"
	for _, r := range []*pb.ModelInferRequest{rawRequest(), bad, typedRequest()} {
		if err := s.Send(r); err != nil {
			t.Fatal(err)
		}
	}
	s.CloseSend()
	var got []*pb.ModelStreamInferResponse
	for {
		r, err := s.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if len(got) != 3 || got[0].InferResponse.GetId() != "r1" || !strings.Contains(got[1].ErrorMessage, `unknown model (a model is a folder`) || got[1].InferResponse != nil || got[2].InferResponse.GetId() != "t1" {
		t.Fatalf("stream responses: %v", got)
	}
	checkProbs(t, bytesF32(got[2].InferResponse.RawOutputContents[0]))
}

func TestRepositoryAndConfig(t *testing.T) {
	f := start(t, Options{})
	c := ctx(t)
	idx, err := f.client.RepositoryIndex(c, &pb.RepositoryIndexRequest{})
	if err != nil || len(idx.Models) != 1 || idx.Models[0].Name != "mlp" || idx.Models[0].Version != "1" || idx.Models[0].State != "READY" {
		t.Fatalf("RepositoryIndex: %v %v", idx, err)
	}
	if idx, err := f.client.RepositoryIndex(c, &pb.RepositoryIndexRequest{Ready: true}); err != nil || len(idx.Models) != 1 {
		t.Fatalf("RepositoryIndex(ready): %v %v", idx, err)
	}
	if _, err := f.client.RepositoryIndex(c, &pb.RepositoryIndexRequest{RepositoryName: "other"}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("RepositoryIndex(other): %v", err)
	}
	if _, err := f.client.RepositoryModelLoad(c, &pb.RepositoryModelLoadRequest{ModelName: "mlp"}); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), `loading model "mlp"`) {
		t.Fatalf("RepositoryModelLoad: %v", err)
	}
	if _, err := f.client.RepositoryModelUnload(c, &pb.RepositoryModelUnloadRequest{ModelName: "mlp"}); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), `unloading model "mlp"`) {
		t.Fatalf("RepositoryModelUnload: %v", err)
	}
	// the RPCs kiln declares without offering them
	if _, err := f.client.CudaSharedMemoryStatus(c, &pb.CudaSharedMemoryStatusRequest{}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("CudaSharedMemoryStatus: %v", err)
	}
	if _, err := f.client.TraceSetting(c, &pb.TraceSettingRequest{}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("TraceSetting: %v", err)
	}

	cfg, err := f.client.ModelConfig(c, &pb.ModelConfigRequest{Name: "mlp", Version: "1"})
	if err != nil || cfg.Config.GetName() != "mlp" || len(cfg.Config.GetInput()) != 1 || cfg.Config.GetInput()[0].GetName() != "x" {
		t.Fatalf("ModelConfig: %v %v", cfg, err)
	}
	if _, err := f.client.ModelConfig(c, &pb.ModelConfigRequest{Name: "nope"}); status.Code(err) != codes.NotFound {
		t.Fatalf("ModelConfig(nope): %v", err)
	}
}

// TestRecover: a panic in a handler is INTERNAL, not a crash.
func TestRecover(t *testing.T) {
	s := &server{log: zap.NewNop()}
	_, err := s.recoverUnary(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/x/Y"}, func(context.Context, any) (any, error) { panic("boom") })
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("%v", err)
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestBatchStats(t *testing.T) {
	dur := func(c serve.Counter) *pb.StatisticDuration {
		return &pb.StatisticDuration{Count: uint64(c.Count), Ns: uint64(c.Ns)}
	}
	got := batchStats(map[int]serve.BatchStats{8: {ComputeInfer: serve.Counter{Count: 2, Ns: 50}, ComputeInput: serve.Counter{Count: 2, Ns: 7}},
		1: {ComputeInfer: serve.Counter{Count: 5, Ns: 10}}}, dur)
	if len(got) != 2 || got[0].BatchSize != 1 || got[0].ComputeInfer.Count != 5 || got[1].BatchSize != 8 || got[1].ComputeInfer.Ns != 50 || got[1].ComputeInput.Ns != 7 {
		t.Fatalf("%v", got)
	}
}
