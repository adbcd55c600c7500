package grpcapi

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	pb "github.com/kilnrt/kiln/serve/grpcapi/inferencepb"

	"github.com/kilnrt/kiln/serve"
)

// RequestIDKey is the metadata key of a call's request id: read from the call when
// it has a usable one, generated otherwise, and always sent back as a response header.
const RequestIDKey = "x-request-id"

// maxRequestIDLen bounds a client's request id; a longer one is replaced.
const maxRequestIDLen = 128

// The access log is one line per call, written when the call ends: method, status
// code, duration, request id, model, bytes in and out (on the wire, as gRPC counts
// them for its stats handlers: nothing is copied or re-encoded), messages in and out,
// client address. It is a stats.Handler, because only that sees the call end after
// the response went out (an interceptor returns before the response is encoded); the
// request-id interceptor fills in what it knows from the request. Health calls log at
// debug level (probes and load balancers call them every few seconds), the rest at
// info.

type callKey struct{}

// call gathers what the access log says about one RPC. The stats handler's calls for a
// stream may come from the handler's goroutine and a receiving goroutine, hence the
// mutex.
type call struct {
	method            string
	mu                sync.Mutex
	id, model, ver    string
	device            string // the device an inference ran on (a stream's last)
	bytesIn, bytesOut int64
	msgsIn, msgsOut   int
}

func callOf(ctx context.Context) *call {
	c, _ := ctx.Value(callKey{}).(*call)
	return c
}

type accessLog struct{ log *zap.Logger }

func (a *accessLog) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	return context.WithValue(ctx, callKey{}, &call{method: info.FullMethodName})
}

func (a *accessLog) HandleRPC(ctx context.Context, s stats.RPCStats) {
	c := callOf(ctx)
	if c == nil {
		return
	}
	switch s := s.(type) {
	case *stats.InPayload:
		c.mu.Lock()
		c.bytesIn += int64(s.WireLength)
		c.msgsIn++
		if r, ok := s.Payload.(*pb.ModelInferRequest); ok && c.model == "" {
			c.model, c.ver = r.ModelName, r.ModelVersion
		}
		c.mu.Unlock()
	case *stats.OutPayload:
		c.mu.Lock()
		c.bytesOut += int64(s.WireLength)
		c.msgsOut++
		c.mu.Unlock()
	case *stats.End:
		a.end(ctx, c, s)
	}
}

func (a *accessLog) end(ctx context.Context, c *call, s *stats.End) {
	method := c.method
	level := zap.InfoLevel
	if strings.HasPrefix(method, "/grpc.health.v1.Health/") {
		level = zap.DebugLevel
	}
	ce := a.log.Check(level, "request")
	if ce == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	fields := []zap.Field{
		zap.String("request_id", c.id),
		zap.String("method", method),
		zap.String("code", status.Code(s.Error).String()),
		zap.Duration("duration", s.EndTime.Sub(s.BeginTime)),
		zap.Int64("bytes_in", c.bytesIn),
		zap.Int64("bytes_out", c.bytesOut),
	}
	if c.msgsIn != 1 || c.msgsOut != 1 { // streams, and calls that failed early
		fields = append(fields, zap.Int("messages_in", c.msgsIn), zap.Int("messages_out", c.msgsOut))
	}
	if c.model != "" && !serve.ValidModelName(c.model) {
		fields = append(fields, zap.Bool("invalid_model_name", true)) // a client's string, not logged
	} else if c.model != "" {
		fields = append(fields, zap.String("model", c.model))
		if c.ver != "" {
			fields = append(fields, zap.String("version", c.ver))
		}
	}
	if c.device != "" {
		fields = append(fields, zap.String("device", c.device))
	}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		fields = append(fields, zap.String("remote", p.Addr.String()))
	}
	ce.Write(fields...)
}

func (a *accessLog) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (a *accessLog) HandleConn(context.Context, stats.ConnStats)                       {}

// requestIDUnary picks the call's request id (the ModelInferRequest's id when set,
// else the x-request-id metadata, else a new one), sends it back as a header and
// records it, with the model the request names, for the access log.
func requestIDUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	id, model, ver := "", "", ""
	switch r := req.(type) {
	case *pb.ModelInferRequest:
		id, model, ver = r.Id, r.ModelName, r.ModelVersion
	case interface{ GetModelName() string }: // repository load / unload
		model = r.GetModelName()
	case interface {
		GetName() string
		GetVersion() string
	}: // metadata, readiness, config, statistics
		model, ver = r.GetName(), r.GetVersion()
	}
	if !validRequestID(id) {
		id = incomingRequestID(ctx)
	}
	grpc.SetHeader(ctx, metadata.Pairs(RequestIDKey, id))
	if c := callOf(ctx); c != nil {
		c.mu.Lock()
		c.id, c.model, c.ver = id, model, ver
		c.mu.Unlock()
	}
	return handler(ctx, req)
}

// requestIDStream gives a stream the x-request-id of its metadata or a new one; the
// requests inside a stream keep their own ids in their messages.
func requestIDStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	id := incomingRequestID(ss.Context())
	ss.SetHeader(metadata.Pairs(RequestIDKey, id))
	if c := callOf(ss.Context()); c != nil {
		c.mu.Lock()
		c.id = id
		c.mu.Unlock()
	}
	return handler(srv, ss)
}

// incomingRequestID is the call's x-request-id metadata when usable, else a new id.
func incomingRequestID(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(RequestIDKey); len(v) > 0 && validRequestID(v[0]) {
		return v[0]
	}
	return newRequestID()
}

// deadlineUnary bounds each unary call's time in the server by d; a shorter deadline
// set by the client stays (context.WithTimeout keeps the earlier one).
func deadlineUnary(d time.Duration) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		return handler(ctx, req)
	}
}

// validRequestID accepts 1 to maxRequestIDLen printable ASCII characters (no spaces),
// so that a client's id cannot forge log lines.
func validRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}

// newRequestID returns 16 random hex digits (unique, not secret: math/rand/v2).
func newRequestID() string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], rand.Uint64())
	return hex.EncodeToString(b[:])
}
