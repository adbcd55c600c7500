package grpcapi

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/kilnrt/kiln/serve"
	pb "github.com/kilnrt/kiln/serve/grpcapi/inferencepb"
)

// watchInterval is how often an open Watch call re-reads the service's readiness.
const watchInterval = 500 * time.Millisecond

// errStopping ends the streams that Options.Stopping cuts.
var errStopping = status.Error(codes.Unavailable, "the server is shutting down")

// healthServer is grpc.health.v1 with two services, the server as a whole ("") and
// inference.GRPCInferenceService, both SERVING while svc.Ready() and NOT_SERVING
// otherwise (a model that should serve failed to load, models compiling eagerly, or
// draining). The status is re-read from the
// service on every Check and List, and every watchInterval while a Watch call is
// open, so it is current without a goroutine that outlives the calls.
type healthServer struct {
	*health.Server
	svc      *serve.Service
	stopping <-chan struct{}
}

var healthServices = []string{"", pb.GRPCInferenceService_ServiceDesc.ServiceName}

func newHealthServer(svc *serve.Service, stopping <-chan struct{}) *healthServer {
	h := &healthServer{Server: health.NewServer(), svc: svc, stopping: stopping}
	h.refresh()
	return h
}

func registerReflection(g *grpc.Server) { reflection.Register(g) }

// refresh sets both services' status from the service's readiness and returns it.
func (h *healthServer) refresh() healthpb.HealthCheckResponse_ServingStatus {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if h.svc.Ready() {
		st = healthpb.HealthCheckResponse_SERVING
	}
	for _, name := range healthServices {
		h.SetServingStatus(name, st)
	}
	return st
}

func (h *healthServer) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	h.refresh()
	return h.Server.Check(ctx, req)
}

func (h *healthServer) List(ctx context.Context, req *healthpb.HealthListRequest) (*healthpb.HealthListResponse, error) {
	h.refresh()
	return h.Server.List(ctx, req)
}

// watchStream is a Watch call's stream with a context that Watch can end.
type watchStream struct {
	healthpb.Health_WatchServer
	ctx context.Context
}

func (w watchStream) Context() context.Context { return w.ctx }

// Watch sends the status and each change, re-reading readiness every watchInterval,
// until the client leaves or Options.Stopping closes (then a last status, which the
// drain has made NOT_SERVING, and UNAVAILABLE).
func (h *healthServer) Watch(req *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	h.refresh()
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	stopped := make(chan struct{})
	go func() {
		t := time.NewTicker(watchInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-h.stopping:
				close(stopped)
				cancel()
				return
			case <-t.C:
				h.refresh()
			}
		}
	}()
	err := h.Server.Watch(req, watchStream{stream, ctx})
	select {
	case <-stopped:
		// a last status, read now: the embedded Watch may have ended before a change
		h.refresh()
		resp, cerr := h.Server.Check(stream.Context(), req)
		if cerr != nil {
			return cerr
		}
		if serr := stream.Send(&healthpb.HealthCheckResponse{Status: resp.Status}); serr != nil {
			return serr
		}
		return errStopping
	default:
		return err
	}
}
