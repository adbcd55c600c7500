package grpcapi

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/kilnrt/kiln/internal/membudget"
	pb "github.com/kilnrt/kiln/serve/grpcapi/inferencepb"
)

// TestUnaryCallsWaitForTheMemoryBudget: a unary call reserves a whole message of
// Options.Budget before its message is read: while the budget is taken it waits
// (DEADLINE_EXCEEDED at its deadline), and once it is free the call runs and gives
// its bytes back. Health checks reserve from their own pool and never wait.
func TestUnaryCallsWaitForTheMemoryBudget(t *testing.T) {
	const maxMsg = 1 << 20
	budget := membudget.New(maxMsg, membudget.Options{})
	f := start(t, Options{Budget: budget, MaxMessageBytes: maxMsg})
	c := ctx(t)
	if _, err := f.client.ModelInfer(c, rawRequest()); err != nil { // compiles the model
		t.Fatal(err)
	}
	if budget.InUse() != 0 {
		t.Fatalf("%d bytes still reserved after a call", budget.InUse())
	}
	taken, _ := budget.Reserve(c, 1)
	short, cancel := context.WithTimeout(c, 200*time.Millisecond)
	defer cancel()
	if _, err := f.client.ModelInfer(short, rawRequest()); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("ModelInfer with 1 byte of the budget taken: %v, want DEADLINE_EXCEEDED", err)
	}
	if _, err := f.client.ServerLive(short, &pb.ServerLiveRequest{}); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("ServerLive with the budget taken: %v, want DEADLINE_EXCEEDED", err)
	}
	if r, err := healthpb.NewHealthClient(f.conn).Check(c, &healthpb.HealthCheckRequest{}); err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health Check with the inference budget taken: %v %v", r, err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := f.client.ModelInfer(c, rawRequest())
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("ModelInfer ran with the budget taken: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	taken.Release()
	if err := <-done; err != nil {
		t.Fatalf("ModelInfer once the budget is free: %v", err)
	}
	if budget.InUse() != 0 {
		t.Fatalf("%d bytes still reserved", budget.InUse())
	}
}

// TestStreamRequestsCountAgainstTheBudget: a ModelStreamInfer stream holds no budget
// while it waits for a request; a request it has read is counted once decoded, and
// the stream answers it only when its bytes fit.
func TestStreamRequestsCountAgainstTheBudget(t *testing.T) {
	const maxMsg = 1 << 20
	budget := membudget.New(maxMsg, membudget.Options{})
	f := start(t, Options{Budget: budget, MaxMessageBytes: maxMsg})
	c := ctx(t)
	s, err := f.client.ModelStreamInfer(c)
	if err != nil {
		t.Fatal(err)
	}
	s.Send(rawRequest())
	if r, err := s.Recv(); err != nil || r.ErrorMessage != "" {
		t.Fatalf("first request: %v %v", r, err)
	}
	time.Sleep(50 * time.Millisecond)
	if budget.InUse() != 0 {
		t.Fatalf("an idle stream holds %d bytes", budget.InUse())
	}
	taken, _ := budget.Reserve(c, maxMsg-10) // less than a request's 96 bytes of data
	s.Send(rawRequest())
	got := make(chan error, 1)
	go func() {
		_, err := s.Recv()
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("a request answered with the budget taken: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	taken.Release()
	if err := <-got; err != nil {
		t.Fatalf("once the budget is free: %v", err)
	}
	s.CloseSend()
}

// TestRefusedCallIsLoggedWithoutItsMessage: a call refused for its token never
// reaches the access log's stats handler (nothing of it was read), so the refusal
// logs its own line.
func TestRefusedCallIsLoggedWithoutItsMessage(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	f := start(t, Options{BearerToken: "t0k", Log: zap.New(core)})
	if _, err := f.client.ModelInfer(ctx(t), rawRequest()); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("ModelInfer without a token: %v", err)
	}
	lines := logs.FilterMessage("request").All()
	if len(lines) != 1 {
		t.Fatalf("%d request lines, want 1: %v", len(lines), lines)
	}
	m := lines[0].ContextMap()
	if m["method"] != "/inference.GRPCInferenceService/ModelInfer" || m["code"] != "Unauthenticated" || m["remote"] == nil || m["bytes_in"] != nil {
		t.Fatalf("refusal line: %v", m)
	}
}
