package grpcapi

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	pb "github.com/kilnrt/kiln/serve/grpcapi/inferencepb"
)

// TestBearerAuth: with a token, every call but grpc.health.v1 and reflection needs
// the metadata "authorization: Bearer <token>"; missing or wrong tokens, on unary
// calls and streams alike, get UNAUTHENTICATED.
func TestBearerAuth(t *testing.T) {
	const token = "s3cret-t0ken"
	f := start(t, Options{BearerToken: token})
	c := ctx(t)
	with := func(auth string) context.Context {
		if auth == "" {
			return c
		}
		return metadata.AppendToOutgoingContext(c, "authorization", auth)
	}
	for _, auth := range []string{"", "Bearer nope", "Bearer s3cret", "Basic " + token, "Bearer ", token} {
		ac := with(auth)
		if _, err := f.client.ServerLive(ac, &pb.ServerLiveRequest{}); status.Code(err) != codes.Unauthenticated {
			t.Errorf("ServerLive with %q: %v, want UNAUTHENTICATED", auth, err)
		}
		if _, err := f.client.ModelInfer(ac, rawRequest()); status.Code(err) != codes.Unauthenticated {
			t.Errorf("ModelInfer with %q: %v, want UNAUTHENTICATED", auth, err)
		}
		s, err := f.client.ModelStreamInfer(ac)
		if err == nil {
			s.Send(rawRequest())
			_, err = s.Recv()
		}
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("ModelStreamInfer with %q: %v, want UNAUTHENTICATED", auth, err)
		}
	}
	// health and reflection stay open
	if r, err := healthpb.NewHealthClient(f.conn).Check(c, &healthpb.HealthCheckRequest{}); err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health Check without a token: %v %v", r, err)
	}
	rs, err := reflectionpb.NewServerReflectionClient(f.conn).ServerReflectionInfo(c)
	if err != nil {
		t.Fatal(err)
	}
	rs.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}})
	if r, err := rs.Recv(); err != nil || !strings.Contains(r.String(), "inference.GRPCInferenceService") {
		t.Errorf("reflection without a token: %v %v", r, err)
	}
	rs.CloseSend()
	// the right token, scheme in any case
	for _, auth := range []string{"Bearer " + token, "bearer " + token} {
		ac := with(auth)
		if r, err := f.client.ServerLive(ac, &pb.ServerLiveRequest{}); err != nil || !r.Live {
			t.Errorf("ServerLive with %q: %v %v", auth, r, err)
		}
		r, err := f.client.ModelInfer(ac, rawRequest())
		if err != nil || len(r.RawOutputContents) != 1 {
			t.Fatalf("ModelInfer with %q: %v %v", auth, r, err)
		}
		checkProbs(t, bytesF32(r.RawOutputContents[0]))
		s, err := f.client.ModelStreamInfer(ac)
		if err != nil {
			t.Fatal(err)
		}
		s.Send(rawRequest())
		if r, err := s.Recv(); err != nil || r.ErrorMessage != "" {
			t.Errorf("ModelStreamInfer with %q: %v %v", auth, r, err)
		}
		s.CloseSend()
	}
}

// TestRequestIDAndAccessLog: a call's request id is the ModelInferRequest's id, else
// the x-request-id metadata, else a generated one; it comes back as a header, and
// each call logs one line when it ends (health calls at debug level).
func TestRequestIDAndAccessLog(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	f := start(t, Options{Log: zap.New(core)})
	c := ctx(t)
	var hdr metadata.MD
	req := rawRequest() // id "r1"
	if _, err := f.client.ModelInfer(metadata.AppendToOutgoingContext(c, RequestIDKey, "from-metadata"), req, grpc.Header(&hdr)); err != nil {
		t.Fatal(err)
	}
	if got := hdr.Get(RequestIDKey); len(got) != 1 || got[0] != "r1" {
		t.Errorf("ModelInfer with id r1: header %v, want r1", got)
	}
	req.Id = ""
	if _, err := f.client.ModelInfer(metadata.AppendToOutgoingContext(c, RequestIDKey, "from-metadata"), req, grpc.Header(&hdr)); err != nil {
		t.Fatal(err)
	}
	if got := hdr.Get(RequestIDKey); len(got) != 1 || got[0] != "from-metadata" {
		t.Errorf("ModelInfer without an id: header %v, want from-metadata", got)
	}
	if _, err := f.client.ModelMetadata(c, &pb.ModelMetadataRequest{Name: "mlp", Version: "1"}, grpc.Header(&hdr)); err != nil {
		t.Fatal(err)
	}
	generated := hdr.Get(RequestIDKey)
	if len(generated) != 1 || !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(generated[0]) {
		t.Errorf("ModelMetadata: generated header %v, want 16 hex digits", generated)
	}
	if _, err := f.client.ModelInfer(c, &pb.ModelInferRequest{ModelName: "nope", Id: "bad one"}); status.Code(err) != codes.NotFound {
		t.Fatalf("unknown model: %v", err)
	}
	healthpb.NewHealthClient(f.conn).Check(c, &healthpb.HealthCheckRequest{})
	s, err := f.client.ModelStreamInfer(metadata.AppendToOutgoingContext(c, RequestIDKey, "stream-1"))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		s.Send(rawRequest())
		if _, err := s.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	s.CloseSend()
	if _, err := s.Recv(); err == nil {
		t.Fatal("stream: a third response")
	}

	// the lines are written when a call ends, just after its response went out
	deadline := time.Now().Add(10 * time.Second)
	for logs.FilterMessage("request").Len() < 6 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	lines := logs.FilterMessage("request").All()
	if len(lines) != 6 {
		t.Fatalf("%d request lines, want 6: %v", len(lines), lines)
	}
	byID := map[string]observer.LoggedEntry{}
	for _, l := range lines {
		byID[l.ContextMap()["request_id"].(string)] = l
	}
	infer := byID["r1"].ContextMap()
	if infer["method"] != "/inference.GRPCInferenceService/ModelInfer" || infer["code"] != "OK" || infer["model"] != "mlp" || infer["device"] != "cpu" ||
		infer["bytes_in"].(int64) < 96 || infer["bytes_out"].(int64) < 48 || infer["duration"].(time.Duration) <= 0 || infer["remote"] == nil {
		t.Errorf("ModelInfer line: %v", infer)
	}
	if m := byID["from-metadata"].ContextMap(); m["code"] != "OK" {
		t.Errorf("second ModelInfer line: %v", m)
	}
	if m := byID[generated[0]].ContextMap(); m["method"] != "/inference.GRPCInferenceService/ModelMetadata" || m["model"] != "mlp" || m["version"] != "1" {
		t.Errorf("ModelMetadata line: %v", m)
	}
	var failed, health map[string]any
	for _, l := range lines {
		m := l.ContextMap()
		switch m["method"] {
		case "/inference.GRPCInferenceService/ModelInfer":
			if m["code"] == "NotFound" {
				failed = m
			}
		case "/grpc.health.v1.Health/Check":
			health = m
			if l.Level != zapcore.DebugLevel {
				t.Errorf("health line at %v, want debug", l.Level)
			}
		}
	}
	if failed == nil || failed["model"] != "nope" || !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(failed["request_id"].(string)) {
		t.Errorf("failed call's line (its id has a space, so it is replaced): %v", failed)
	}
	if health == nil {
		t.Errorf("no health line")
	}
	if m := byID["stream-1"].ContextMap(); m["method"] != "/inference.GRPCInferenceService/ModelStreamInfer" || m["messages_in"] != int64(2) || m["messages_out"] != int64(2) || m["model"] != "mlp" {
		t.Errorf("stream line: %v", m)
	}
}

// TestRequestTimeout: Options.RequestTimeout bounds a unary call (DEADLINE_EXCEEDED
// naming the model); a long one lets it through.
func TestRequestTimeout(t *testing.T) {
	f := start(t, Options{RequestTimeout: time.Nanosecond})
	if _, err := f.client.ModelInfer(ctx(t), rawRequest()); status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), `model "mlp"`) {
		t.Fatalf("1 ns timeout: %v, want DEADLINE_EXCEEDED naming the model", err)
	}
	// the compile (or journal load) that call started goes on; wait for it on the
	// service itself, so that the cleanup does not close the journal under it
	if _, err := (&server{svc: f.svc, log: zap.NewNop()}).ModelInfer(ctx(t), rawRequest()); err != nil {
		t.Fatalf("no timeout, same service: %v", err)
	}
	g := start(t, Options{RequestTimeout: time.Minute})
	if _, err := g.client.ModelInfer(ctx(t), rawRequest()); err != nil {
		t.Fatalf("1 min timeout: %v", err)
	}
}
