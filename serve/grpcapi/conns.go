package grpcapi

import (
	"net"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Conns is a listener that caps its open connections: beyond Max a new connection
// is closed at once (gRPC exposes no per-connection state to close an idle one for
// it; Options.IdleTimeout closes idle connections over time instead).
type Conns struct {
	net.Listener
	max int
	log *zap.Logger

	mu      sync.Mutex
	open    int
	refused int // since the last warning
	warned  time.Time
}

// LimitConns caps the connections accepted from ln at max (> 0); refusals are
// logged as a warning at most once a minute.
func LimitConns(ln net.Listener, max int, log *zap.Logger) *Conns {
	if max <= 0 {
		panic("BUG: grpcapi.LimitConns with a cap below 1")
	}
	if log == nil {
		log = zap.NewNop()
	}
	return &Conns{Listener: ln, max: max, log: log}
}

// Accept returns the next connection within the cap.
func (l *Conns) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		if l.open >= l.max {
			l.refused++
			if time.Since(l.warned) >= time.Minute {
				l.log.Warn("gRPC connection refused: at grpc.max_connections", zap.Int("max_connections", l.max), zap.Int("refused", l.refused))
				l.refused, l.warned = 0, time.Now()
			}
			l.mu.Unlock()
			c.Close()
			continue
		}
		l.open++
		l.mu.Unlock()
		return &cappedConn{Conn: c, l: l}, nil
	}
}

// Open is the number of connections open now.
func (l *Conns) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// cappedConn gives its place back when it is first closed.
type cappedConn struct {
	net.Conn
	l    *Conns
	once sync.Once
}

func (c *cappedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		c.l.open--
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}
