package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"svc/server"
	"svc/server/apierr"
	"svc/server/auth"
	"svc/server/hub"
)

// SSE timing: a ping every 15 s (docs/DECISIONS.md, Messaging).
const (
	pingInterval = 15 * time.Second
	// writeTimeout bounds one write to a subscriber: a peer that stops
	// reading is dropped rather than holding its handler forever.
	writeTimeout = 10 * time.Second
	// maxCoalesce bounds how many ready messages go out in one flush.
	maxCoalesce = 64
)

// handleSubscribe serves GET /subscribe?name=<self>: the caller's messages
// as server-sent events. With Last-Event-ID (header or lastEventId query)
// it first replays every later message the caller may see, in order.
// runner=1 marks the stream of the member's runner (SubscribeRequest.runner).
func (g *Gateway) handleSubscribe(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	q := r.URL.Query()
	name := q.Get("name")
	switch {
	case name == "":
		return apierr.Errorf(apierr.CodeBadRequest, "name: is required")
	case name != p.Member:
		return apierr.Errorf(apierr.CodeForbidden, "you may only subscribe as yourself")
	}
	var runner bool
	switch q.Get("runner") {
	case "", "0", "false":
	case "1", "true":
		runner = true
	default:
		return apierr.Errorf(apierr.CodeBadRequest, "runner: must be 1 or 0")
	}
	last := lastEventID(r)
	after, err := server.ParseMessageID(last)
	if err != nil {
		return err
	}
	f, err := g.srv.Attach(r.Context(), p, after, last != "")
	if err != nil {
		return err
	}
	if runner {
		g.srv.RunnerStream(f, p)
	}
	g.serveFeed(w, r, f, "message", p.Member, p.Member)
	return nil
}

// handleActivityStream serves GET /members/{name}/activity/stream: the
// member's activity rows as server-sent events (gate: read/self),
// resumable by Last-Event-ID (header or lastEventId query) like /subscribe.
func (g *Gateway) handleActivityStream(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	name := r.PathValue("name")
	f, err := g.srv.AttachActivity(r.Context(), p, name, lastEventID(r))
	if err != nil {
		return err
	}
	g.serveFeed(w, r, f, "activity", name, p.Member)
	return nil
}

// handleTeamStream serves GET /team/stream: the caller's team stream
// (server.StreamTeam) as server-sent events named team, each the JSON of a
// StreamTeamResponse ({"snapshot": …} first, then {"presence": …},
// {"channel": …} or {"objective": …}). It is not resumable: a new stream
// starts with a new snapshot, so Last-Event-ID is ignored.
func (g *Gateway) handleTeamStream(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	f, err := g.srv.AttachTeam(p)
	if err != nil {
		return err
	}
	g.serveFeed(w, r, f, "team", p.Member, p.Member)
	return nil
}

// lastEventID is the position a stream resumes after: the Last-Event-ID
// header, else the lastEventId query parameter.
func lastEventID(r *http.Request) string {
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		return last
	}
	return r.URL.Query().Get("lastEventId")
}

// feed is what a stream serves: server.Feed, or a fake in tests.
type feed interface {
	// Next returns the next event, or nil when tick fires first.
	Next(ctx context.Context, tick <-chan time.Time) (*hub.Event, error)
	// Buffered returns the next event when one is ready without waiting.
	Buffered() *hub.Event
	// ID is the wire id of an event.
	ID(ev *hub.Event) string
	// WriteTimedOut records that the stream ends because a write to its
	// client did not complete in time (svc_streams_cut_total).
	WriteTimedOut()
	// Wrote counts one write that carries events (svc_sse_writes_total).
	Wrote()
	// Close ends the live subscription; it is safe to call more than once.
	Close()
}

// Batch buffers. A batch is built in a pooled buffer and written with one
// call, so an idle stream holds no buffer of its own.
const (
	// batchFlush is the size at which a batch being built is written out
	// before the rest of it is added: a backlog of large messages is not
	// held in memory all at once.
	batchFlush = 32 << 10
	// maxPooledBatch is the largest buffer put back in the pool; one grown
	// past it by a large message goes to the garbage collector.
	maxPooledBatch = 64 << 10
	// maxUnsolicited is how many bytes a client may send on a hijacked
	// stream's connection after its request before the stream is ended:
	// nothing is expected there (the request has no body and the response
	// never ends, so a pipelined request could never be answered).
	maxUnsolicited = 4 << 10
)

var batchPool = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// serveFeed writes f as server-sent events named event, after a ready
// event naming member, until the client leaves or the feed ends; holder is
// who reads it (for the log). It owns f and closes it. The response has
// started once it runs, so an end is only logged: the client resumes with
// its last id.
//
// An HTTP/1.x GET is hijacked: the stream is served from goroutines of its
// own on the raw connection, and serveFeed returns once the ready event is
// written (see hijackStream). HTTP/2 (which cannot be hijacked), HEAD and
// writers that do not unwrap to a hijacker are served here, through the
// response writer, until the stream ends.
func (g *Gateway) serveFeed(w http.ResponseWriter, r *http.Request, f feed, event, member, holder string) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	if r.ProtoMajor == 1 && r.Method == http.MethodGet && g.hijackStream(w, r, f, event, member, holder) {
		return
	}
	defer f.Close()
	w.WriteHeader(http.StatusOK)
	s := &stream{g: g, out: responseOut{w: w, rc: http.NewResponseController(w)}, f: f, event: event, holder: holder}
	ctx := r.Context()
	if err := s.start(ctx, nil, member); err != nil {
		return
	}
	defer s.tick.Stop()
	s.run(ctx)
}

// hijackStream takes r's connection from net/http, writes the response
// head and the ready event, and serves the rest of f from goroutines of its
// own, reporting whether it took the connection; when it did not, nothing
// was written and f is still the caller's.
//
// What an idle stream costs is what it keeps while parked. Served in the
// handler, that was the handler goroutine's stack under every middleware
// frame, net/http's background reader goroutine, and the connection's
// bufio reader, bufio writer and chunk writer (about 37 KiB of RSS a
// stream). Hijacked, it is two goroutines with shallow stacks (run parked
// in Feed.Next, watch parked in a conn.Read) and no buffer: everything
// deep (the ready event's JSON, the first write) happens here, on the
// handler's stack, before they start (docs/PERFORMANCE.md).
//
// The response is written by hand: 200, every header set so far (by
// serveFeed and by middleware), a Date, no length and no chunking, and
// Connection: close, so the body ends when the connection does (as
// EventSource, curl and Go's client read it).
func (g *Gateway) hijackStream(w http.ResponseWriter, r *http.Request, f feed, event, member, holder string) bool {
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return false
	}
	// Bytes the client sent after its request count toward its allowance.
	early := brw.Reader.Buffered()
	h := w.Header()
	h.Del("Content-Length")
	h.Del("Transfer-Encoding")
	h.Set("Connection", "close")
	if h.Get("Date") == "" {
		h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	}
	var head bytes.Buffer
	head.WriteString("HTTP/1.1 200 OK\r\n")
	_ = h.Write(&head)
	head.WriteString("\r\n")
	// The request's context ends when the handler returns: the stream's own
	// keeps its values (for the log) and ends when watch sees the client go.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	s := &hijacked{stream: stream{g: g, out: connOut{conn}, f: f, event: event, holder: holder}, conn: conn, cancel: cancel}
	if err := s.start(ctx, head.Bytes(), member); err != nil {
		s.end()
		return true
	}
	go s.watch(early)
	go s.serve(ctx)
	return true
}

// hijacked is a stream served on a hijacked connection.
type hijacked struct {
	stream
	conn   net.Conn
	cancel context.CancelFunc
}

// serve writes the stream until the client leaves, the feed ends or a
// write fails.
func (s *hijacked) serve(ctx context.Context) {
	defer s.end()
	s.run(ctx)
}

// end closes the feed and the connection (which ends watch).
func (s *hijacked) end() {
	s.cancel()
	if s.tick != nil {
		s.tick.Stop()
	}
	s.f.Close()
	_ = s.conn.Close()
}

// watch reads the connection until it fails, then ends the stream's
// context: without net/http's background read, this is how a client that
// closed its connection is noticed at once (the roster counts live
// streams), rather than at the next write. A client that sends more than
// maxUnsolicited bytes ends its stream too.
func (s *hijacked) watch(got int) {
	defer s.cancel()
	var b [16]byte
	for got <= maxUnsolicited {
		n, err := s.conn.Read(b[:])
		if err != nil {
			return
		}
		got += n
	}
}

// stream is one SSE stream being written.
type stream struct {
	g             *Gateway
	out           streamOut
	f             feed
	event, holder string
	tick          *time.Ticker
	// fr is f when it shares its frames, else nil.
	fr framer
	// armed is the write deadline last set.
	armed time.Time
}

// start writes head (the hijacked response's status line and headers, or
// nothing) and the ready event naming member, and starts the ping ticker.
func (s *stream) start(ctx context.Context, head []byte, member string) error {
	s.fr, _ = s.f.(framer)
	ready, _ := json.Marshal(map[string]string{"member": member})
	bp := batchPool.Get().(*[]byte)
	b := append((*bp)[:0], head...)
	b = append(b, "event: ready\ndata: "...)
	b = append(b, ready...)
	b = append(b, "\n\n"...)
	err := s.send(b)
	putBatch(bp, b)
	if err != nil {
		s.g.log.DebugContext(ctx, "sse write failed", "member", s.holder, "err", err)
		return err
	}
	s.tick = time.NewTicker(s.g.pingEvery())
	return nil
}

// run writes f's events, and a ping every tick, until f or a write fails.
func (s *stream) run(ctx context.Context) {
	for {
		ev, err := s.f.Next(ctx, s.tick.C)
		if err == nil {
			err = s.deliver(ev)
		}
		if err != nil {
			if !errors.Is(err, http.ErrHandlerTimeout) {
				s.g.log.DebugContext(ctx, "sse stream ended", "member", s.holder, "event", s.event, "err", err)
			}
			return
		}
	}
}

// deliver writes ev and the events ready after it, up to maxCoalesce in
// one write, or a ping when ev is nil. A lone event of a feed that shares
// its frames is written straight from the shared frame, with no copy.
func (s *stream) deliver(ev *hub.Event) error {
	var next *hub.Event
	if ev != nil {
		next = s.f.Buffered()
		if next == nil && s.fr != nil {
			return s.sendEvents(s.fr.Frame(ev, s.event))
		}
	}
	bp := batchPool.Get().(*[]byte)
	b := (*bp)[:0]
	ping := ev == nil
	if ping {
		b = append(b, ": ping\n\n"...)
	}
	var err error
	for n := 0; ev != nil; n++ {
		b = s.appendEvent(b, ev)
		if len(b) >= batchFlush {
			if err = s.sendEvents(b); err != nil {
				break
			}
			b = b[:0]
		}
		if next != nil {
			ev, next = next, nil // taken already: never dropped
			continue
		}
		if n+1 >= maxCoalesce {
			break // send now; the rest follow
		}
		ev = s.f.Buffered()
	}
	switch {
	case err != nil || len(b) == 0:
	case ping:
		err = s.send(b)
	default:
		err = s.sendEvents(b)
	}
	putBatch(bp, b)
	return err
}

// framer is a feed that renders each event's frame once and shares it
// between its streams (server.Feed); Frame equals what appendEvent renders
// from ID and the event's JSON.
type framer interface {
	Frame(ev *hub.Event, name string) []byte
}

// appendEvent appends ev's frame to b: the shared one when the feed has
// one, else rendered here.
func (s *stream) appendEvent(b []byte, ev *hub.Event) []byte {
	if s.fr != nil {
		return append(b, s.fr.Frame(ev, s.event)...)
	}
	return hub.AppendFrame(b, s.f.ID(ev), s.event, ev.JSON())
}

// send writes one batch under a write deadline: a peer that stops reading
// is dropped. The deadline is moved only once half of it has run: setting
// it took 8% of the CPU of a broadcast to a thousand streams, and a batch
// still gets at least writeTimeout/2.
//
// A write that fails once the deadline has passed is a cut: the feed
// counts it as such when it closes.
func (s *stream) send(b []byte) error {
	timeout := s.g.writeLimit()
	if now := time.Now(); s.armed.Sub(now) <= timeout/2 {
		s.armed = now.Add(timeout)
		_ = s.out.SetWriteDeadline(s.armed)
	}
	err := s.out.Send(b)
	if err != nil && (errors.Is(err, os.ErrDeadlineExceeded) || !time.Now().Before(s.armed)) {
		s.f.WriteTimedOut()
	}
	return err
}

// sendEvents sends a batch of one or more events, counting the write.
func (s *stream) sendEvents(b []byte) error {
	s.f.Wrote()
	return s.send(b)
}

// streamOut is where a stream's batches go.
type streamOut interface {
	SetWriteDeadline(t time.Time) error
	// Send writes one batch and pushes it to the client.
	Send(b []byte) error
}

// responseOut sends through a response writer, flushing each batch.
type responseOut struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func (o responseOut) SetWriteDeadline(t time.Time) error { return o.rc.SetWriteDeadline(t) }

func (o responseOut) Send(b []byte) error {
	if _, err := o.w.Write(b); err != nil {
		return err
	}
	return o.rc.Flush()
}

// connOut sends on a hijacked connection.
type connOut struct{ net.Conn }

func (o connOut) Send(b []byte) error {
	_, err := o.Write(b)
	return err
}

// putBatch returns a batch buffer to the pool unless it grew too large.
func putBatch(bp *[]byte, b []byte) {
	if cap(b) > maxPooledBatch {
		return
	}
	*bp = b[:0]
	batchPool.Put(bp)
}

// writeLimit is the bound on one write: writeTimeout unless a test set
// one.
func (g *Gateway) writeLimit() time.Duration {
	if g.writeWait > 0 {
		return g.writeWait
	}
	return writeTimeout
}

// pingEvery is the ping interval: pingInterval unless a test set one.
func (g *Gateway) pingEvery() time.Duration {
	if g.ping > 0 {
		return g.ping
	}
	return pingInterval
}
