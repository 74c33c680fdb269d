package main

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"svc/server/connguard"
)

// http2Preface opens every cleartext HTTP/2 connection (RFC 9113 §3.4).
var http2Preface = []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")

// prefaceTimeout bounds how long a new connection may take to show its
// first bytes before it is dropped.
const prefaceTimeout = 10 * time.Second

// splitListener serves one address for both planes: cleartext HTTP/2
// connections (gRPC clients) go to the native gRPC server, which streams
// about ten times faster than grpc.Server.ServeHTTP (notes/toolchain.md);
// everything else (HTTP/1.1: REST, SSE, browsers, curl) goes to net/http.
type splitListener struct {
	root   net.Listener
	h1, h2 *chanListener
	log    *slog.Logger
}

func newSplitListener(root net.Listener, log *slog.Logger) *splitListener {
	return &splitListener{root: root, h1: newChanListener(root.Addr()), h2: newChanListener(root.Addr()), log: log}
}

// Backoff after a failed accept, as net/http's Serve does: from
// minAcceptDelay, doubling, up to maxAcceptDelay.
const (
	minAcceptDelay = 5 * time.Millisecond
	maxAcceptDelay = time.Second
)

// serve accepts until the root listener closes, then closes both halves.
// Any other accept error (out of file descriptors, a connection aborted
// before it was accepted) is logged and retried after a backoff: the
// listener must outlive a moment of exhaustion.
func (s *splitListener) serve() {
	defer s.h1.Close()
	defer s.h2.Close()
	var delay time.Duration
	for {
		c, err := s.root.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			delay = min(max(2*delay, minAcceptDelay), maxAcceptDelay)
			s.log.Error("accept failed; retrying", "err", err, "retry_in", delay)
			time.Sleep(delay)
			continue
		}
		delay = 0
		go s.classify(c)
	}
}

// classify reads bytes only while they still match the HTTP/2 preface, so a
// short HTTP/1 request is never left waiting for more input.
func (s *splitListener) classify(c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(prefaceTimeout))
	buf := make([]byte, 0, len(http2Preface))
	one := make([]byte, 1)
	isH2 := true
	for len(buf) < len(http2Preface) {
		if _, err := io.ReadFull(c, one); err != nil {
			_ = c.Close()
			return
		}
		buf = append(buf, one[0])
		if !bytes.HasPrefix(http2Preface, buf) {
			isH2 = false
			break
		}
	}
	_ = c.SetReadDeadline(time.Time{})
	pc := &prefixConn{Conn: c, prefix: buf}
	if isH2 {
		s.h2.deliver(pc)
	} else {
		s.h1.deliver(pc)
	}
}

// prefixConn replays the bytes classify consumed.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (p *prefixConn) Read(b []byte) (int, error) {
	if len(p.prefix) > 0 {
		n := copy(b, p.prefix)
		p.prefix = p.prefix[n:]
		return n, nil
	}
	return p.Conn.Read(b)
}

// chanListener is a net.Listener fed by splitListener.
type chanListener struct {
	addr   net.Addr
	ch     chan net.Conn
	done   chan struct{}
	closed sync.Once
}

func newChanListener(addr net.Addr) *chanListener {
	return &chanListener{addr: addr, ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *chanListener) deliver(c net.Conn) {
	select {
	case l.ch <- c:
	case <-l.done:
		_ = c.Close()
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.closed.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }

// guardedListener hands out only the connections the guard admits; a
// client address at its bound of unauthenticated connections has further
// ones closed at once.
type guardedListener struct {
	net.Listener
	guard *connguard.Guard
	log   *slog.Logger
}

func (l *guardedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		gc, ok := l.guard.Accept(c)
		if ok {
			return gc, nil
		}
		l.log.Debug("connection refused: too many unauthenticated connections from its address",
			"remote", c.RemoteAddr().String(), "max", l.guard.Max())
		_ = c.Close()
	}
}
