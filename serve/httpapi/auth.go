package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
)

// openPaths answer without a token, so that Kubernetes probes (which send no
// credentials) work on an authenticated server. They reveal only liveness and
// readiness.
var openPaths = map[string]bool{"/v2/health/live": true, "/v2/health/ready": true}

// bearerAuth requires "Authorization: Bearer <token>" (RFC 6750) on every path but
// openPaths, including unknown ones (so that the route table cannot be probed). The
// comparison is of SHA-256 digests with crypto/subtle: constant time, and the token's
// length does not leak either. A refusal is 401 with {"error": "..."} and a
// WWW-Authenticate challenge.
func bearerAuth(token string) gin.HandlerFunc {
	want := sha256.Sum256([]byte(token))
	return func(c *gin.Context) {
		if openPaths[c.Request.URL.Path] {
			return
		}
		got, ok := bearerToken(c.GetHeader("Authorization"))
		if !ok {
			c.Header("WWW-Authenticate", `Bearer realm="kiln"`)
			c.AbortWithStatusJSON(http.StatusUnauthorized, gin.H{"error": "authentication required: send the header Authorization: Bearer <token>"})
			return
		}
		sum := sha256.Sum256([]byte(got))
		if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			c.Header("WWW-Authenticate", `Bearer realm="kiln", error="invalid_token"`)
			c.AbortWithStatusJSON(http.StatusUnauthorized, gin.H{"error": "invalid bearer token"})
			return
		}
	}
}

// bearerToken extracts the token of an Authorization header value "Bearer <token>";
// the scheme is case-insensitive (RFC 7235).
func bearerToken(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}
