package grpcapi

import (
	"context"
	"errors"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kilnrt/kiln/serve"
)

// codeOf maps the service's error classes to gRPC status codes as Triton does:
// invalid argument, not found, unavailable (also for an API that is switched off:
// Triton answers a load/unload without explicit model control with UNAVAILABLE),
// deadline exceeded (cancelled when the client cancelled), internal for the rest.
func codeOf(ctx context.Context, err error) codes.Code {
	switch {
	case errors.Is(err, serve.ErrInvalid):
		return codes.InvalidArgument
	case errors.Is(err, serve.ErrNotFound):
		return codes.NotFound
	case errors.Is(err, serve.ErrUnavailable), errors.Is(err, serve.ErrDisabled):
		return codes.Unavailable
	case errors.Is(err, serve.ErrDeadline):
		if ctx != nil && errors.Is(ctx.Err(), context.Canceled) {
			return codes.Canceled
		}
		return codes.DeadlineExceeded
	}
	return codes.Internal
}

// fail turns a service error into a gRPC status whose message is the error's (it names
// the model, version or tensor); internal errors are logged.
func (s *server) fail(err error) error { return s.failCtx(nil, err) }

func (s *server) failCtx(ctx context.Context, err error) error {
	c := codeOf(ctx, err)
	if c == codes.Internal {
		s.log.Error("gRPC request failed", zap.Error(err))
	}
	return status.Error(c, err.Error())
}
