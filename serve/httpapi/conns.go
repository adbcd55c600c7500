package httpapi

import (
	"errors"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"
)

// ConnLimits configure LimitConns.
type ConnLimits struct {
	// Max bounds the connections served at once (> 0).
	Max int
	// ProbeReserve is how many connections beyond Max are accepted when every one
	// of the Max is busy with a request; they answer only /v2/health/live and
	// /v2/health/ready (503 otherwise) and close after one response.
	ProbeReserve int
	// Log receives a warning when a connection is refused (at most one a minute).
	Log *zap.Logger
}

// Conns is a listener that caps its open connections. At the cap, a new connection
// closes the connection that has waited longest without a request in progress (idle
// keep-alive, or accepted and not yet sent a request), as nginx reuses keep-alive
// connections when it runs short; when every connection has a request in progress,
// it is accepted into the probe reserve, and beyond that closed at once. It learns
// connection states from the http.Server's ConnState hook, which must be
// Conns.ConnState. Use it as the http.Server's listener (Serve or ServeTLS).
type Conns struct {
	net.Listener
	lim ConnLimits

	mu       sync.Mutex
	open     map[*conn]struct{}
	reserved int // open connections accepted into the probe reserve
	refused  int // since the last warning
	warned   time.Time
}

// LimitConns caps the connections accepted from ln.
func LimitConns(ln net.Listener, lim ConnLimits) *Conns {
	if lim.Max <= 0 {
		panic("BUG: httpapi.LimitConns with a cap below 1")
	}
	if lim.Log == nil {
		lim.Log = zap.NewNop()
	}
	return &Conns{Listener: ln, lim: lim, open: map[*conn]struct{}{}}
}

// conn is an accepted connection and what the limiter knows of it.
type conn struct {
	net.Conn
	l       *Conns
	reserve bool
	state   http.ConnState // guarded by l.mu
	since   time.Time      // when it entered state; guarded by l.mu
}

// Accept returns the next connection within the cap.
func (l *Conns) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c := &conn{Conn: nc, l: l, state: http.StateNew, since: time.Now()}
		var evict *conn
		l.mu.Lock()
		if len(l.open)-l.reserved >= l.lim.Max {
			switch evict = l.oldestWaitingLocked(); {
			case evict != nil:
				l.forgetLocked(evict)
			case l.reserved < l.lim.ProbeReserve:
				c.reserve = true
				l.reserved++
			default:
				l.refusedLocked()
				l.mu.Unlock()
				nc.Close()
				continue
			}
		}
		l.open[c] = struct{}{}
		l.mu.Unlock()
		if evict != nil {
			evict.Conn.Close()
		}
		return c, nil
	}
}

// oldestWaitingLocked is the open connection without a request in progress that
// has waited longest, or nil.
func (l *Conns) oldestWaitingLocked() *conn {
	var best *conn
	for c := range l.open {
		if (c.state == http.StateIdle || c.state == http.StateNew) && !c.reserve && (best == nil || c.since.Before(best.since)) {
			best = c
		}
	}
	return best
}

func (l *Conns) forgetLocked(c *conn) {
	if _, ok := l.open[c]; !ok {
		return
	}
	delete(l.open, c)
	if c.reserve {
		l.reserved--
	}
}

func (l *Conns) refusedLocked() {
	l.refused++
	if time.Since(l.warned) < time.Minute {
		return
	}
	l.lim.Log.Warn("HTTP connection refused: every connection has a request in progress (http.max_connections) and the probe reserve is taken",
		zap.Int("max_connections", l.lim.Max), zap.Int("probe_reserve", l.lim.ProbeReserve), zap.Int("refused", l.refused))
	l.refused, l.warned = 0, time.Now()
}

// ConnState is the http.Server's ConnState hook.
func (l *Conns) ConnState(nc net.Conn, st http.ConnState) {
	c := connOf(nc)
	if c == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch st {
	case http.StateClosed, http.StateHijacked:
		l.forgetLocked(c)
	default:
		c.state, c.since = st, time.Now()
	}
}

// Open is the number of connections open now.
func (l *Conns) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.open)
}

// SyscallConn lets corked reach the socket under the limiter's wrapper.
func (c *conn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.New("not a socket")
}

// CloseWrite lets net/http half-close the socket before closing it, so that a
// response sent while the client is still sending its body is not lost to a reset.
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// connOf finds the limiter's connection under nc (itself, or under TLS).
func connOf(nc net.Conn) *conn {
	for nc != nil {
		switch v := nc.(type) {
		case *conn:
			return v
		case interface{ NetConn() net.Conn }:
			nc = v.NetConn()
		default:
			return nil
		}
	}
	return nil
}

// reserveOnly answers a request that came on a probe-reserve connection: the health
// probes normally, anything else 503; both close the connection after the response.
func reserveOnly(c *gin.Context) {
	nc, _ := c.Request.Context().Value(connKey{}).(net.Conn)
	if cc := connOf(nc); cc == nil || !cc.reserve {
		return
	}
	c.Header("Connection", "close")
	if !openPaths[c.Request.URL.Path] {
		c.AbortWithStatusJSON(http.StatusServiceUnavailable, gin.H{"error": "the server is at its connection limit: this connection answers only /v2/health/live and /v2/health/ready; retry"})
	}
}
