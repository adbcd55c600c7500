package grpcapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"strings"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
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
// length does not leak); a refusal is UNAUTHENTICATED. It runs as the server's
// InTapHandle: on the call's headers, before a stream is created for it, so that
// the message of a refused call is never read (its bytes are discarded as they
// arrive, and the client stops sending when the refusal reaches it).
type bearerAuth struct {
	want [sha256.Size]byte
	log  *zap.Logger
}

func newBearerAuth(token string, log *zap.Logger) *bearerAuth {
	return &bearerAuth{want: sha256.Sum256([]byte(token)), log: log}
}

// tap is the grpc.InTapHandle. A refused call never reaches the stats handler, so
// it logs its own line (the access log's fields it knows).
func (a *bearerAuth) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	if openMethod(info.FullMethodName) {
		return ctx, nil
	}
	err := a.check(info.Header)
	if err != nil {
		if ce := a.log.Check(zap.InfoLevel, "request"); ce != nil {
			fields := []zap.Field{zap.String("method", info.FullMethodName), zap.String("code", codes.Unauthenticated.String())}
			if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
				fields = append(fields, zap.String("remote", p.Addr.String()))
			}
			ce.Write(fields...)
		}
	}
	return ctx, err
}

func (a *bearerAuth) check(md metadata.MD) error {
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

// bearerToken extracts the token of "Bearer <token>"; the scheme is case-insensitive.
func bearerToken(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}
