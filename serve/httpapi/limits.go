package httpapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
)

// I/O deadlines. net/http's own ReadTimeout and WriteTimeout count from the moment a
// request's headers are read, so a WriteTimeout would cut an inference that runs
// longer than it, and a ReadTimeout that is still pending when the body has been read
// fires in net/http's background read of the connection and cancels the request's
// context. kiln sets the connection's deadlines itself, per request, through
// http.ResponseController: the read deadline for the body (cleared once the body is
// read to its end), the write deadline when a response is about to be written.

// ioDeadlines sets the request's deadlines: writing must end by WriteTimeout after
// now (infer moves it when the inference is done), and a body must be read by
// ReadTimeout after now. A body read past its deadline fails with
// os.ErrDeadlineExceeded (readBody answers 408); a body the handler left unread is
// discarded by net/http under the same deadline, so a trickled body never holds a
// connection longer than ReadTimeout.
func (s *Server) ioDeadlines(c *gin.Context) {
	rc := http.NewResponseController(c.Writer)
	if d := s.opts.WriteTimeout; d > 0 {
		rc.SetWriteDeadline(time.Now().Add(d)) // ErrNotSupported off a real connection: no deadline
	}
	if d := s.opts.ReadTimeout; d > 0 && c.Request.Body != nil && c.Request.Body != http.NoBody {
		at := time.Now().Add(d)
		if rc.SetReadDeadline(at) == nil {
			c.Request.Body = &deadlineBody{ReadCloser: c.Request.Body, rc: rc, at: at}
		}
	}
	c.Next()
}

// extendWrite gives the response WriteTimeout from now: called by infer when the
// inference is done, however long it took.
func (s *Server) extendWrite(c *gin.Context) {
	if d := s.opts.WriteTimeout; d > 0 {
		http.NewResponseController(c.Writer).SetWriteDeadline(time.Now().Add(d))
	}
}

// deadlineBody is a request body read under a connection read deadline, which it
// clears when the body has been read to its end (so that net/http's background read
// of the idle connection, which starts then, runs without one).
type deadlineBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	at      time.Time
	cleared bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.cleared {
		b.cleared = true
		b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// bodyDeadline is when r's body must have been read (zero: no bound).
func bodyDeadline(r *http.Request) time.Time {
	if b, ok := r.Body.(*deadlineBody); ok {
		return b.at
	}
	return time.Time{}
}

// declaredTooLarge refuses a request whose Content-Length exceeds MaxRequestBytes
// with 413 before anything of its body is read, and closes the connection after the
// response. This holds for compressed bodies too (the limit applies after
// decompression, and data that compression made larger is not worth reading).
//
// The close lingers (as nginx's lingering_close does): what the client keeps sending
// for up to lingerTime and lingerBytes is read and dropped, held nowhere. A socket
// closed with unread data answers with a reset, and a reset makes the client's kernel
// discard the 413 it has not read yet.
func (s *Server) declaredTooLarge(c *gin.Context) {
	if n := c.Request.ContentLength; n > s.opts.MaxRequestBytes {
		c.Header("Connection", "close")
		msg, _ := json.Marshal(gin.H{"error": fmt.Errorf("%w: Content-Length %d exceeds the limit of %d bytes", errTooLarge, n, s.opts.MaxRequestBytes).Error()})
		c.Header("Content-Type", "application/json; charset=utf-8")
		c.Header("Content-Length", strconv.Itoa(len(msg))) // complete before the linger
		c.AbortWithStatus(http.StatusRequestEntityTooLarge)
		c.Writer.Write(msg)
		c.Writer.Flush()
		if http.NewResponseController(c.Writer).SetReadDeadline(time.Now().Add(lingerTime)) == nil {
			io.CopyN(io.Discard, c.Request.Body, lingerBytes)
		}
	}
}

// lingering close of a refused body (declaredTooLarge)
const (
	lingerTime  = time.Second
	lingerBytes = 64 << 20
)
