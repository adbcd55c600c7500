package grpcapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// openMethod reports the calls that need no token: the health service (Kubernetes
// gRPC probes and load balancers send no credentials) and server reflection (service
// descriptions only; grpcurl needs them before it can add a header to a call).
func openMethod(fullMethod string) bool {
	return strings.HasPrefix(fullMethod, "/grpc.health.v1.Health/") ||
		strings.HasPrefix(fullMethod, "/grpc.reflection.v1.ServerReflection/") ||
		strings.HasPrefix(fullMethod, "/grpc.reflection.v1alpha.ServerReflection/")
}

// bearerAuth checks the metadata "authorization: Bearer <token>" on every call but
// the open ones, comparing SHA-256 digests with crypto/subtle (constant time, the
// length does not leak); a refusal is UNAUTHENTICATED.
type bearerAuth struct{ want [sha256.Size]byte }

func newBearerAuth(token string) *bearerAuth { return &bearerAuth{want: sha256.Sum256([]byte(token))} }

func (a *bearerAuth) check(ctx context.Context, fullMethod string) error {
	if openMethod(fullMethod) {
		return nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("authorization")
	if len(vals) == 0 {
		return status.Error(codes.Unauthenticated, "authentication required: send the metadata authorization: Bearer <token>")
	}
	tok, ok := bearerToken(vals[0])
	if !ok {
		return status.Error(codes.Unauthenticated, "authentication required: the authorization metadata must be Bearer <token>")
	}
	sum := sha256.Sum256([]byte(tok))
	if subtle.ConstantTimeCompare(sum[:], a.want[:]) != 1 {
		return status.Error(codes.Unauthenticated, "invalid bearer token")
	}
	return nil
}

func (a *bearerAuth) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := a.check(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func (a *bearerAuth) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := a.check(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return handler(srv, ss)
}

// bearerToken extracts the token of "Bearer <token>"; the scheme is case-insensitive.
func bearerToken(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}
