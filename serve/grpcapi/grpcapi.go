package grpcapi

import (
	"context"
	"crypto/tls"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/kilnrt/kiln/internal/membudget"
	"github.com/kilnrt/kiln/serve"
	pb "github.com/kilnrt/kiln/serve/grpcapi/inferencepb"
)

// Options configure the gRPC API.
type Options struct {
	// MaxMessageBytes bounds a received and a sent message (0: 256 MiB; gRPC's own
	// default, 4 MiB, is too small for image batches).
	MaxMessageBytes int
	// Version is reported by ServerMetadata.
	Version string
	// Log receives one line per call (info; health calls at debug) besides errors.
	Log *zap.Logger
	// TLS, when set, makes the server speak TLS only (its certificates, or
	// GetCertificate, are the server's).
	TLS *tls.Config
	// BearerToken, when set, is required as the metadata "authorization: Bearer
	// <token>" on every call but grpc.health.v1 and server reflection
	// (UNAUTHENTICATED otherwise).
	BearerToken string
	// RequestTimeout bounds each unary call's time in the server (0: no bound); a
	// shorter deadline of the client's stays. Streams are not bounded.
	RequestTimeout time.Duration
	// Budget bounds the bytes of inference requests held in memory at once (shared
	// with the REST face); each unary call reserves 3 × MaxMessageBytes (the most
	// its decoding may take) before its message is read and keeps the message's size
	// until it is answered (recv.go). nil: no bound.
	Budget *membudget.Budget
	// MaxConcurrentStreams bounds the calls open at once on one connection (0: 128).
	MaxConcurrentStreams uint32
	// IdleTimeout closes a connection that has had no call open for this long, with
	// a GOAWAY (0: never).
	IdleTimeout time.Duration
	// Stopping, once closed, ends the calls that would otherwise stay open until the
	// client leaves: health Watch calls (after a last NOT_SERVING) and ModelStreamInfer
	// streams (between requests), both with UNAVAILABLE. Close it after svc.Drain and
	// before GracefulStop, which would wait for them. nil: never.
	Stopping <-chan struct{}
}

// DefaultMaxMessageBytes is the message size limit when Options leave it 0.
const DefaultMaxMessageBytes = 256 << 20

// DefaultMaxConcurrentStreams is the bound on the calls open at once on one
// connection when Options leave it 0 (gRPC's own default is none).
const DefaultMaxConcurrentStreams = 128

// extensions lists the protocol extensions ServerMetadata advertises. They are the
// server's, the same as the REST face advertises: binary tensor data is a REST
// extension (gRPC always carries raw contents), and the repository extension is not
// claimed while load and unload are not offered.
var extensions = []string{"binary_tensor_data", "classification", "statistics", "model_configuration", "model_repository", "system_shared_memory"}

// server implements inference.GRPCInferenceService on a serve.Service. The embedded
// Unimplemented server answers the RPCs kiln does not offer (tracing, log settings)
// with UNIMPLEMENTED; the CUDA shared memory RPCs answer it with their own message.
type server struct {
	pb.UnimplementedGRPCInferenceServiceServer
	svc        *serve.Service
	opts       Options
	log        *zap.Logger
	pools      pools
	unaryChain grpc.UnaryServerInterceptor // around every unary method (recv.go)
}

// New builds a gRPC server offering inference.GRPCInferenceService on svc, the
// standard health service (grpc.health.v1, following svc.Ready) and server reflection
// (so that grpcurl and other generic clients need no .proto files). The caller
// listens (Serve) and stops it (GracefulStop after svc.Drain).
func New(svc *serve.Service, opts Options) *grpc.Server {
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	if opts.MaxConcurrentStreams == 0 {
		opts.MaxConcurrentStreams = DefaultMaxConcurrentStreams
	}
	s := &server{svc: svc, opts: opts, log: opts.Log, pools: newPools(opts.Budget, opts.MaxMessageBytes)}
	// Interceptors, outermost first: the request id (so refusals are logged with
	// one), the deadline, then panics. Every unary method is served as a stream
	// (recv.go), which runs unaryChain itself; the stream interceptors are for the
	// real streams only.
	unary := []grpc.UnaryServerInterceptor{requestIDUnary}
	if opts.RequestTimeout > 0 {
		unary = append(unary, deadlineUnary(opts.RequestTimeout))
	}
	s.unaryChain = chainUnary(append(unary, s.recoverUnary)...)
	streams := chainStream(requestIDStream, s.budgetStream, s.recoverStream)
	unaryMethods := map[string]bool{}
	sopts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(opts.MaxMessageBytes),
		grpc.MaxSendMsgSize(opts.MaxMessageBytes),
		grpc.MaxConcurrentStreams(opts.MaxConcurrentStreams),
		grpc.StatsHandler(&accessLog{log: opts.Log}),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			if unaryMethods[info.FullMethod] {
				return handler(srv, ss)
			}
			return streams(srv, ss, info, handler)
		}),
	}
	if opts.BearerToken != "" {
		sopts = append(sopts, grpc.InTapHandle(newBearerAuth(opts.BearerToken, opts.Log).tap))
	}
	if opts.IdleTimeout > 0 {
		sopts = append(sopts, grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: opts.IdleTimeout}))
	}
	if opts.TLS != nil {
		sopts = append(sopts, grpc.Creds(credentials.NewTLS(opts.TLS)))
	}
	g := grpc.NewServer(sopts...)
	s.registerBudgeted(g, &pb.GRPCInferenceService_ServiceDesc, s, unaryMethods)
	s.registerBudgeted(g, &healthpb.Health_ServiceDesc, newHealthServer(svc, opts.Stopping), unaryMethods)
	registerReflection(g)
	return g
}

// recoverUnary turns a panic in a handler into INTERNAL (and a log line), so that one
// request cannot take the server down.
func (s *server) recoverUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("panic in a gRPC handler", zap.String("method", info.FullMethod), zap.Any("panic", r), zap.Stack("stack"))
			resp, err = nil, status.Errorf(codes.Internal, "%s: internal error: %v", info.FullMethod, r)
		}
	}()
	return handler(ctx, req)
}

func (s *server) recoverStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("panic in a gRPC handler", zap.String("method", info.FullMethod), zap.Any("panic", r), zap.Stack("stack"))
			err = status.Errorf(codes.Internal, "%s: internal error: %v", info.FullMethod, r)
		}
	}()
	return handler(srv, ss)
}

func (s *server) ServerLive(context.Context, *pb.ServerLiveRequest) (*pb.ServerLiveResponse, error) {
	return &pb.ServerLiveResponse{Live: s.svc.Live()}, nil
}

func (s *server) ServerReady(context.Context, *pb.ServerReadyRequest) (*pb.ServerReadyResponse, error) {
	return &pb.ServerReadyResponse{Ready: s.svc.Ready()}, nil
}

func (s *server) ModelReady(_ context.Context, req *pb.ModelReadyRequest) (*pb.ModelReadyResponse, error) {
	ok, err := s.svc.ModelReady(req.Name, req.Version)
	if err != nil {
		return nil, s.fail(err)
	}
	return &pb.ModelReadyResponse{Ready: ok}, nil
}

func (s *server) ServerMetadata(context.Context, *pb.ServerMetadataRequest) (*pb.ServerMetadataResponse, error) {
	return &pb.ServerMetadataResponse{Name: "kiln", Version: s.opts.Version, Extensions: extensions}, nil
}

func (s *server) ModelMetadata(_ context.Context, req *pb.ModelMetadataRequest) (*pb.ModelMetadataResponse, error) {
	md, err := s.svc.ModelMetadata(req.Name, req.Version)
	if err != nil {
		return nil, s.fail(err)
	}
	io := func(ts []serve.IOMeta) []*pb.ModelMetadataResponse_TensorMetadata {
		var out []*pb.ModelMetadataResponse_TensorMetadata
		for _, t := range ts {
			out = append(out, &pb.ModelMetadataResponse_TensorMetadata{Name: t.Name, Datatype: t.Datatype, Shape: t.Shape})
		}
		return out
	}
	return &pb.ModelMetadataResponse{Name: md.Name, Versions: md.Versions, Platform: md.Platform, Inputs: io(md.Inputs), Outputs: io(md.Outputs)}, nil
}

// ModelStatistics answers Triton's statistics extension from svc.Stats: success, fail,
// queue, compute_input, compute_infer and compute_output, and per batch size the
// executions with their compute times; the cache counters are zero (kiln has no
// response cache).
func (s *server) ModelStatistics(_ context.Context, req *pb.ModelStatisticsRequest) (*pb.ModelStatisticsResponse, error) {
	st, err := s.svc.Stats(req.Name, req.Version)
	if err != nil {
		return nil, s.fail(err)
	}
	dur := func(c serve.Counter) *pb.StatisticDuration {
		return &pb.StatisticDuration{Count: uint64(max(c.Count, 0)), Ns: uint64(max(c.Ns, 0))}
	}
	out := &pb.ModelStatisticsResponse{}
	for _, m := range st {
		out.ModelStats = append(out.ModelStats, &pb.ModelStatistics{
			Name: m.Name, Version: m.Version, LastInference: uint64(max(m.LastInference, 0)),
			InferenceCount: uint64(max(m.InferenceCount, 0)), ExecutionCount: uint64(max(m.ExecutionCount, 0)),
			InferenceStats: &pb.InferStatistics{
				Success: dur(m.Success), Fail: dur(m.Fail), Queue: dur(m.Queue),
				ComputeInput: dur(m.ComputeInput), ComputeInfer: dur(m.Compute), ComputeOutput: dur(m.ComputeOut),
				CacheHit: dur(serve.Counter{}), CacheMiss: dur(serve.Counter{}),
			},
			BatchStats: batchStats(m.Batches, dur),
		})
	}
	return out, nil
}

// RepositoryIndex lists every model version with its state (ready: only READY ones).
// kiln serves one repository, so repository_name must be empty.
func (s *server) RepositoryIndex(_ context.Context, req *pb.RepositoryIndexRequest) (*pb.RepositoryIndexResponse, error) {
	if req.RepositoryName != "" {
		return nil, s.fail(fmt.Errorf("%w: repository %q: kiln serves one model repository, leave repository_name empty", serve.ErrInvalid, req.RepositoryName))
	}
	out := &pb.RepositoryIndexResponse{}
	for _, st := range s.svc.Index() {
		if req.Ready && st.State != serve.StateReady {
			continue
		}
		out.Models = append(out.Models, &pb.RepositoryIndexResponse_ModelIndex{Name: st.Name, Version: st.Version, State: string(st.State), Reason: st.Reason})
	}
	return out, nil
}

// RepositoryModelLoad and RepositoryModelUnload are Triton's explicit model control
// (serve.ErrDisabled unless the server runs with repository control). A load's
// parameter "config" (a string: the ModelConfig as JSON) is used instead of
// config.pbtxt; any other parameter is refused (INVALID_ARGUMENT).
func (s *server) RepositoryModelLoad(_ context.Context, req *pb.RepositoryModelLoadRequest) (*pb.RepositoryModelLoadResponse, error) {
	var configJSON []byte
	for _, k := range slices.Sorted(maps.Keys(req.Parameters)) {
		p, ok := req.Parameters[k].GetParameterChoice().(*pb.ModelRepositoryParameter_StringParam)
		switch {
		case k != "config":
			return nil, s.fail(fmt.Errorf("%w: load request: parameter %q is not implemented (kiln takes \"config\")", serve.ErrInvalid, k))
		case !ok:
			return nil, s.fail(fmt.Errorf("%w: load request: parameter \"config\" must be a string_param holding the model configuration as JSON", serve.ErrInvalid))
		}
		configJSON = []byte(p.StringParam)
	}
	var err error
	if configJSON != nil {
		err = s.svc.LoadModelWithConfig(req.ModelName, configJSON)
	} else {
		err = s.svc.LoadModel(req.ModelName)
	}
	if err != nil {
		return nil, s.fail(err)
	}
	return &pb.RepositoryModelLoadResponse{}, nil
}

func (s *server) RepositoryModelUnload(_ context.Context, req *pb.RepositoryModelUnloadRequest) (*pb.RepositoryModelUnloadResponse, error) {
	if err := s.svc.UnloadModel(req.ModelName); err != nil {
		return nil, s.fail(err)
	}
	return &pb.RepositoryModelUnloadResponse{}, nil
}

// ModelConfig answers Triton's model configuration extension: the model version's
// completed configuration (config.pbtxt filled in from the model, or derived from the
// model alone).
func (s *server) ModelConfig(_ context.Context, req *pb.ModelConfigRequest) (*pb.ModelConfigResponse, error) {
	cfg, err := s.svc.ModelConfig(req.Name, req.Version)
	if err != nil {
		return nil, s.fail(err)
	}
	return &pb.ModelConfigResponse{Config: cfg}, nil
}

// batchStats lists the executions by increasing batch size.
func batchStats(b map[int]serve.BatchStats, dur func(serve.Counter) *pb.StatisticDuration) []*pb.InferBatchStatistics {
	sizes := make([]int, 0, len(b))
	for n := range b {
		sizes = append(sizes, n)
	}
	slices.Sort(sizes)
	var out []*pb.InferBatchStatistics
	for _, n := range sizes {
		out = append(out, &pb.InferBatchStatistics{BatchSize: uint64(max(n, 0)), ComputeInput: dur(b[n].ComputeInput), ComputeInfer: dur(b[n].ComputeInfer), ComputeOutput: dur(b[n].ComputeOutput)})
	}
	return out
}
