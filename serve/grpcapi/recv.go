package grpcapi

import (
	"context"
	"errors"
	"io"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/kilnrt/kiln/internal/membudget"
)

// Memory for received messages. gRPC reads a unary call's whole message (up to
// MaxMessageBytes) before any interceptor runs, so a byte budget has to be reserved
// before the read, where kiln's code does not run for a unary method. kiln therefore
// registers its unary methods as stream handlers (registerBudgeted): on the wire a
// unary call and a stream are the same, reflection still describes the methods as
// unary, and the handler reads the one message itself: it reserves decodeFactor ×
// MaxMessageBytes (the most the message may take while it is decoded), reads,
// shrinks the reservation to the message's size, then runs the method through the
// unary interceptors and holds the reservation until the response is sent. Calls that wait for the budget wait first
// come first served, within their deadline (and Options.RequestTimeout).
//
// Which budget: the calls of the inference service reserve from Options.Budget
// (shared with the REST face). The open services, which any client may call without
// a token (grpc.health.v1 and reflection), reserve from a pool of their own each,
// the size of one message's reservation, so that unauthenticated clients hold at most one message
// per open service at a time and a waiting health check never waits for inference
// traffic. Streams of the open services (health Watch, reflection) reserve before
// each message they read and release it at the next read or at the end of the call.
// ModelStreamInfer streams do not reserve before a read (a stream waiting for the
// client's next request must not hold budget): each request they have read is
// counted against Options.Budget once decoded, and the stream reads no further until
// it is, until its response is sent.

// decodeFactor is how many times a message's size it takes in memory while it is
// decoded: gRPC's received chunks, their contiguous copy (the protobuf codec needs
// one buffer) and the decoded message (protobuf copies bytes fields). Measured: four
// concurrent 200 MiB messages took the process from 35 MB to 2.9 GB.
const decodeFactor = 3

// pools are the budgets of received messages, by service.
type pools struct {
	infer      *membudget.Budget // Options.Budget; nil: unbounded
	health     *membudget.Budget
	reflection *membudget.Budget
	reserve    int64 // before a read: decodeFactor × MaxMessageBytes
}

func newPools(infer *membudget.Budget, maxMsg int) pools {
	reserve := decodeFactor * int64(maxMsg)
	open := func() *membudget.Budget {
		return membudget.New(reserve, membudget.Options{ReleaseAfter: membudget.DefaultReleaseAfter})
	}
	return pools{infer: infer, health: open(), reflection: open(), reserve: reserve}
}

// forMethod is the budget a call of fullMethod reserves from before each read
// (nil: none).
func (p pools) forMethod(fullMethod string) *membudget.Budget {
	switch {
	case strings.HasPrefix(fullMethod, "/grpc.health.v1.Health/"):
		return p.health
	case strings.HasPrefix(fullMethod, "/grpc.reflection."):
		return p.reflection
	case fullMethod == modelStreamInferMethod:
		return nil
	}
	return p.infer
}

const modelStreamInferMethod = "/inference.GRPCInferenceService/ModelStreamInfer"

// reserveFor waits for a message's worth of pool, within ctx (and timeout when
// positive). A wait that ends is the status of the context that ended it.
func reserveFor(ctx context.Context, pool *membudget.Budget, n int64, timeout time.Duration) (*membudget.Reservation, error) {
	if pool == nil {
		return nil, nil
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	r, err := pool.Reserve(ctx, n)
	if err != nil {
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	return r, nil
}

// msgSize is the encoded size of a received message.
func msgSize(m any) int64 {
	if pm, ok := m.(proto.Message); ok {
		return int64(proto.Size(pm))
	}
	return 0
}

// registerBudgeted registers impl's service with every unary method served as a
// stream handler that reserves before reading (see above); the names of those
// methods are added to unary, so that the stream interceptors leave them alone.
func (s *server) registerBudgeted(g *grpc.Server, desc *grpc.ServiceDesc, impl any, unary map[string]bool) {
	d := *desc
	d.Methods = nil
	d.Streams = append([]grpc.StreamDesc(nil), desc.Streams...)
	for _, m := range desc.Methods {
		full := "/" + desc.ServiceName + "/" + m.MethodName
		d.Streams = append(d.Streams, grpc.StreamDesc{StreamName: m.MethodName, Handler: s.unaryHandler(m, s.pools.forMethod(full))})
		unary[full] = true
	}
	g.RegisterService(&d, impl)
}

// unaryHandler serves the unary method m as a stream: reserve, read the one message,
// shrink, run m through the unary interceptors, send the response, release.
func (s *server) unaryHandler(m grpc.MethodDesc, pool *membudget.Budget) grpc.StreamHandler {
	return func(srv any, ss grpc.ServerStream) error {
		ctx := ss.Context()
		var held *membudget.Reservation
		defer func() { held.Release() }()
		dec := func(in any) error {
			r, err := reserveFor(ctx, pool, s.pools.reserve, s.opts.RequestTimeout)
			if err != nil {
				return err
			}
			held = r
			if err := ss.RecvMsg(in); err != nil {
				if errors.Is(err, io.EOF) {
					return status.Error(codes.InvalidArgument, "the call ended without a request message")
				}
				return err
			}
			r.Shrink(msgSize(in))
			return nil
		}
		resp, err := m.Handler(srv, ctx, dec, s.unaryChain)
		if err != nil {
			return err
		}
		return ss.SendMsg(resp)
	}
}

// budgetStream is the stream interceptor that makes the streams of the open
// services reserve before each message they read.
func (s *server) budgetStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	pool := s.pools.forMethod(info.FullMethod)
	if pool == nil || pool == s.pools.infer {
		return handler(srv, ss)
	}
	bs := &budgetedStream{ServerStream: ss, pool: pool, reserve: s.pools.reserve}
	defer func() { bs.held.Release() }()
	return handler(srv, bs)
}

// budgetedStream reserves a message's worth of its pool before each read and holds
// what the message turned out to be until the next read.
type budgetedStream struct {
	grpc.ServerStream
	pool    *membudget.Budget
	reserve int64
	held    *membudget.Reservation
}

func (b *budgetedStream) RecvMsg(m any) error {
	b.held.Release()
	b.held = nil
	r, err := reserveFor(b.Context(), b.pool, b.reserve, 0)
	if err != nil {
		return err
	}
	if err := b.ServerStream.RecvMsg(m); err != nil {
		r.Release()
		return err
	}
	r.Shrink(msgSize(m))
	b.held = r
	return nil
}

// chainUnary runs ics around a handler, the first outermost, as
// grpc.ChainUnaryInterceptor does (which serves only methods registered as unary).
func chainUnary(ics ...grpc.UnaryServerInterceptor) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		h := handler
		for i := len(ics) - 1; i >= 0; i-- {
			ic, next := ics[i], h
			h = func(ctx context.Context, req any) (any, error) { return ic(ctx, req, info, next) }
		}
		return h(ctx, req)
	}
}

// chainStream is chainUnary for stream interceptors.
func chainStream(ics ...grpc.StreamServerInterceptor) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		h := handler
		for i := len(ics) - 1; i >= 0; i-- {
			ic, next := ics[i], h
			h = func(srv any, ss grpc.ServerStream) error { return ic(srv, ss, info, next) }
		}
		return h(srv, ss)
	}
}
