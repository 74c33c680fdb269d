package gateway

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"svc/server"
	"svc/server/auth"
)

// SSE timing (CONTRACT §4: a ping every 15 s).
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
func (g *Gateway) handleSubscribe(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	q := r.URL.Query()
	name := q.Get("name")
	switch {
	case name == "":
		return server.Errorf(server.CodeBadRequest, "name: is required")
	case name != p.Member:
		return server.Errorf(server.CodeForbidden, "you may only subscribe as yourself")
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

// lastEventID is the position a stream resumes after: the Last-Event-ID
// header, else the lastEventId query parameter.
func lastEventID(r *http.Request) string {
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		return last
	}
	return r.URL.Query().Get("lastEventId")
}

// serveFeed writes f as server-sent events named event, after a ready
// event naming member, until the client leaves or the feed ends; holder is
// who reads it (for the log). It owns f and closes it. The response has
// started once it runs, so an end is only logged: the client resumes with
// its last id.
func (g *Gateway) serveFeed(w http.ResponseWriter, r *http.Request, f *server.Feed, event, member, holder string) {
	defer f.Close()
	ctx := r.Context()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	// The response writer buffers already; a buffer of our own would cost
	// every idle subscriber 4 KiB more.
	bw := &stickyWriter{w: w}
	// The deadline is armed before each batch is written, not at the flush:
	// a frame larger than the response buffer reaches the socket as it is
	// written. It is moved only once half of it has run: setting it took
	// 8% of the CPU of a broadcast to a thousand streams, and a batch still
	// gets at least writeTimeout/2.
	var armed time.Time
	arm := func() {
		now := time.Now()
		if armed.Sub(now) > writeTimeout/2 {
			return
		}
		armed = now.Add(writeTimeout)
		_ = rc.SetWriteDeadline(armed)
	}
	flush := func() error {
		if bw.err != nil {
			return bw.err
		}
		return rc.Flush()
	}
	ready, _ := json.Marshal(map[string]string{"member": member})
	arm()
	bw.WriteString("event: ready\ndata: ")
	bw.Write(ready)
	bw.WriteString("\n\n")
	if err := flush(); err != nil {
		return
	}
	tick := time.NewTicker(pingInterval)
	defer tick.Stop()
	for {
		ev, err := f.Next(ctx, tick.C)
		if err != nil {
			g.log.DebugContext(ctx, "sse stream ended", "member", holder, "event", event, "err", err)
			return
		}
		arm()
		if ev == nil {
			bw.WriteString(": ping\n\n")
		}
		for n := 0; ev != nil; n++ {
			bw.WriteString("id: ")
			bw.WriteString(f.ID(ev))
			bw.WriteString("\nevent: ")
			bw.WriteString(event)
			bw.WriteString("\ndata: ")
			bw.Write(ev.JSON())
			bw.WriteString("\n\n")
			if n+1 == maxCoalesce {
				break // flush now; the rest follow
			}
			ev = f.Buffered()
		}
		if err := flush(); err != nil {
			if !errors.Is(err, http.ErrHandlerTimeout) {
				g.log.DebugContext(ctx, "sse write failed", "member", holder, "err", err)
			}
			return
		}
	}
}

// stickyWriter remembers the first write error, so a frame is written
// with plain calls and checked once at the flush.
type stickyWriter struct {
	w   io.Writer
	err error
}

func (s *stickyWriter) Write(p []byte) {
	if s.err == nil {
		_, s.err = s.w.Write(p)
	}
}

func (s *stickyWriter) WriteString(v string) {
	if s.err == nil {
		_, s.err = io.WriteString(s.w, v)
	}
}
