package httpapi

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"

	"github.com/kilnrt/kiln/serve"
)

// RequestIDHeader carries a request's id: taken from the request when it has a usable
// one, generated otherwise, and always echoed in the response.
const RequestIDHeader = "X-Request-ID"

// maxRequestIDLen bounds a client's request id; a longer one is replaced.
const maxRequestIDLen = 128

// accessLog gives every request an id (X-Request-ID) and, when it is done, logs one
// line: method, path, status, duration, request id, model, bytes in and out, client.
// Health probes log at debug level (a Kubernetes probe every few seconds would
// otherwise drown the log); the rest at info. Bytes in are counted as the handler
// reads the body (no copy); bytes out are what gin wrote. A line below the logger's
// level costs nothing beyond the level check.
func (s *Server) accessLog(c *gin.Context) {
	start := time.Now()
	id := c.GetHeader(RequestIDHeader)
	if !validRequestID(id) {
		id = newRequestID()
	}
	c.Header(RequestIDHeader, id)
	var body *countingBody
	if c.Request.Body != nil && c.Request.Body != http.NoBody {
		body = &countingBody{ReadCloser: c.Request.Body}
		c.Request.Body = body
	}
	c.Next()
	level := zap.InfoLevel
	if openPaths[c.Request.URL.Path] {
		level = zap.DebugLevel
	}
	ce := s.log.Check(level, "request")
	if ce == nil {
		return
	}
	var in int64
	if body != nil {
		in = body.n
	}
	fields := []zap.Field{
		zap.String("request_id", id),
		zap.String("method", c.Request.Method),
		zap.String("path", loggedPath(c)),
		zap.Int("status", c.Writer.Status()),
		zap.Duration("duration", time.Since(start)),
		zap.Int64("bytes_in", in),
		zap.Int("bytes_out", max(c.Writer.Size(), 0)),
		zap.String("remote", c.Request.RemoteAddr),
	}
	if m := c.Param("model"); m != "" && !serve.ValidModelName(m) {
		fields = append(fields, zap.Bool("invalid_model_name", true)) // a client's string, not logged
	} else if m != "" {
		fields = append(fields, zap.String("model", m))
		if v := c.Param("version"); v != "" {
			fields = append(fields, zap.String("version", v))
		}
	}
	if d := c.GetString(deviceKey); d != "" {
		fields = append(fields, zap.String("device", d))
	}
	ce.Write(fields...)
}

// deviceKey is the gin context key of the device an inference ran on (its log line
// names it).
const deviceKey = "kiln.device"

// deadline bounds the request's time in the server: the handler's context (and so the
// inference: queueing, waiting for a compile, running) ends after d. A shorter deadline
// already on the context stays.
func deadline(d time.Duration) gin.HandlerFunc {
	return func(c *gin.Context) {
		ctx, cancel := context.WithTimeout(c.Request.Context(), d)
		defer cancel()
		c.Request = c.Request.WithContext(ctx)
		c.Next()
	}
}

// countingBody counts the bytes a handler reads from a request body.
type countingBody struct {
	io.ReadCloser
	n int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	return n, err
}

// validRequestID accepts 1 to maxRequestIDLen printable ASCII characters (no spaces),
// so that a client's id cannot forge log lines or response headers.
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

// newRequestID returns 16 random hex digits. Request ids need to be unique, not
// unpredictable, so math/rand/v2 (per-thread ChaCha8, no lock) is enough.
func newRequestID() string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], rand.Uint64())
	return hex.EncodeToString(b[:])
}

// loggedPath is the request's path for the access log: the path itself when the route
// names a valid model or shared memory region (or none), the route's pattern when a
// client's name is not one, and at most 256 bytes of an unrouted path.
func loggedPath(c *gin.Context) string {
	for _, name := range []string{c.Param("model"), c.Param("region")} {
		if name != "" && !serve.ValidModelName(name) {
			return c.FullPath()
		}
	}
	p := c.Request.URL.Path
	if c.FullPath() == "" && len(p) > 256 {
		p = p[:256] + "…"
	}
	return p
}
