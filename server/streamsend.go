package server

import (
	"context"
	"net"
	"svc/server/apierr"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/peer"

	"svc/server/hub"
)

// sendTimeout bounds one Send on a gRPC stream, as the gateway's write
// timeout bounds an SSE write: a client that stops reading is cut off
// rather than holding its stream, its queue and the transport's buffers.
const sendTimeout = 10 * time.Second

// errWriteTimeout ends a stream whose client did not take a message in
// time.
var errWriteTimeout = apierr.Errorf(apierr.CodeUnavailable, "stream write timed out; resume with the last id")

// A Send blocked on flow control (the client stopped reading) returns only
// when the stream's transport gives up on it, and grpc-go gives a handler
// no way to reset one stream: returning from the handler queues the
// trailers behind the data the client never reads, and the stream, its
// buffers and its place among the connection's streams stay until the
// client reads or goes. So a stream cut off while a Send is blocked ends
// its client's connection: on the native server through the connection
// itself (connCreds), on grpc.Server.ServeHTTP (the TLS listener) through
// the abort its HTTP handler put in the request's context
// (WithStreamAbort), which resets just that HTTP/2 stream.

// connCreds are the native server's transport credentials: plaintext, as
// without any, but each connection's AuthInfo carries the connection, so
// a stream can close it (streamAbort).
type connCreds struct {
	credentials.TransportCredentials
}

func newConnCreds() connCreds { return connCreds{insecure.NewCredentials()} }

// ServerHandshake implements credentials.TransportCredentials.
func (c connCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return raw, connInfo{CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.NoSecurity}, conn: raw}, nil
}

// Clone implements credentials.TransportCredentials.
func (c connCreds) Clone() credentials.TransportCredentials { return c }

// connInfo is a native connection's AuthInfo.
type connInfo struct {
	credentials.CommonAuthInfo
	conn net.Conn
}

// AuthType implements credentials.AuthInfo.
func (connInfo) AuthType() string { return "insecure" }

type streamAbortKey struct{}

// WithStreamAbort returns ctx carrying abort, which ends the gRPC stream
// served with it at once even while a Send is blocked: for streams served
// through grpc.Server.ServeHTTP, whose handler can reset the HTTP/2 stream
// (a write deadline in the past). abort is called at most once, never
// from the hub's publish, and may be called after the call has ended.
func WithStreamAbort(ctx context.Context, abort func()) context.Context {
	return context.WithValue(ctx, streamAbortKey{}, abort)
}

// streamAbort returns what ends the stream of ctx at once, nil when
// nothing can (the stream then ends when its transport does).
func streamAbort(ctx context.Context) func() {
	if f, ok := ctx.Value(streamAbortKey{}).(func()); ok {
		return f
	}
	if p, ok := peer.FromContext(ctx); ok {
		if ci, ok := p.AuthInfo.(connInfo); ok {
			return func() { _ = ci.conn.Close() }
		}
	}
	return nil
}

// sendGuard sends a feed's events on a gRPC stream, each Send under a
// deadline, and ends the stream at once when its subscription ends (cut
// off, revoked, shut down) while a Send is blocked.
type sendGuard struct {
	f       *Feed
	abort   func()
	timeout time.Duration
	timer   *time.Timer
	// deadline is when the Send in progress times out, in Unix
	// nanoseconds; 0 when none is in progress.
	deadline atomic.Int64
	// over is set once the subscription has ended.
	over atomic.Bool
	// aborted is set once abort has been called.
	aborted atomic.Bool
}

// newSendGuard guards the Sends of f's stream, whose context is ctx.
func newSendGuard(ctx context.Context, f *Feed, timeout time.Duration) *sendGuard {
	g := &sendGuard{f: f, abort: streamAbort(ctx), timeout: timeout}
	g.timer = time.AfterFunc(timeout, g.expired)
	g.timer.Stop()
	f.sub.AfterEnd(g.ended)
	return g
}

// send runs one Send under the deadline. After an abort it returns why
// the stream was cut rather than the transport's error.
func (g *sendGuard) send(send func() error) error {
	// deadline is set before over is read, and ended sets over before it
	// reads deadline: a subscription that ends as a Send starts is seen by
	// one side or the other.
	g.deadline.Store(time.Now().Add(g.timeout).UnixNano())
	if g.over.Load() {
		g.deadline.Store(0)
		return g.endErr()
	}
	g.timer.Reset(g.timeout)
	err := send()
	g.timer.Stop()
	g.deadline.Store(0)
	if err != nil && g.aborted.Load() {
		return g.endErr()
	}
	return err
}

// endErr is why the stream ends once its subscription has or a Send was
// aborted.
func (g *sendGuard) endErr() error {
	switch {
	case g.f.sub.FellBehind():
		g.f.cut(cutSlowReader)
		return errFellBehind
	case g.f.cutReason() == cutWriteTimeout:
		return errWriteTimeout
	case g.f.sub.Expired():
		return errCredentialExpired
	}
	return errShuttingDown
}

// expired runs when a Send's timer fires: when that Send, or a later one,
// is still blocked past its deadline, the stream is cut.
func (g *sendGuard) expired() {
	d := g.deadline.Load()
	if d == 0 || time.Now().UnixNano() < d {
		return // the Send completed; a later one re-armed the timer
	}
	g.f.cut(cutWriteTimeout)
	g.kill()
}

// ended runs when the subscription ends. The hub calls it while it
// publishes, so the abort runs elsewhere.
func (g *sendGuard) ended() {
	g.over.Store(true)
	if g.deadline.Load() == 0 {
		return // not sending: Feed.Next sees the end
	}
	if g.f.sub.FellBehind() {
		g.f.cut(cutSlowReader)
	}
	go g.kill()
}

func (g *sendGuard) kill() {
	if g.abort != nil && g.aborted.CompareAndSwap(false, true) {
		g.abort()
	}
}

// stop releases the timer.
func (g *sendGuard) stop() { g.timer.Stop() }

// serveFeed sends first, then f's events one Send each through send,
// until f ends, ctx ends or a Send fails.
func serveFeed(ctx context.Context, f *Feed, first func() error, send func(*hub.Event) error) error {
	g := newSendGuard(ctx, f, sendTimeout)
	defer g.stop()
	if err := g.send(first); err != nil {
		return err
	}
	for {
		ev, err := f.Next(ctx, nil)
		if err != nil {
			return err
		}
		if err := g.send(func() error { return send(ev) }); err != nil {
			return err
		}
	}
}
