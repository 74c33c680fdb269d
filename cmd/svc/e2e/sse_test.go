package e2e

// Stream clients for the end-to-end tests: an SSE client for GET /subscribe
// (docs/DECISIONS.md, Messaging) and a gRPC Subscribe client with the same shape, so a
// scenario can read "the next message" from either.
//
// Each stream has one reader goroutine that hands events over an unbuffered
// channel: a test that stops receiving stops the reader too, so the broker
// sees a consumer that no longer reads (beyond the transport's buffers).

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"

	apiv1 "svc/gen/svc/v1"
)

// streamWait bounds the wait for one stream event.
const streamWait = callTimeout

// msgStream is a live message stream of either transport.
type msgStream interface {
	// nextMessage returns the next message as its JSON object, failing the
	// test on any other event, on the end of the stream or after streamWait.
	nextMessage(t testing.TB) obj
	// close ends the stream from the client side, like a dropped connection.
	close()
}

// sseEvent is one dispatched SSE event.
type sseEvent struct {
	id    string
	event string
	data  []string // the value of each data: line
	lines []string // every line of the frame, comments included
}

// sseStream is an open GET /subscribe response.
type sseStream struct {
	resp   *http.Response
	events chan sseEvent
	cancel context.CancelFunc
	tr     *http.Transport

	mu  sync.Mutex
	err error // why the stream ended; valid once events is closed
}

// sseOpts shape the connection of one SSE stream.
type sseOpts struct {
	// rcvBuf, when positive, is the socket receive buffer in bytes: a small
	// one lets a stalled reader back up the broker's writes quickly.
	rcvBuf int
}

// sseGet sends GET path on a connection of its own and returns the response
// with its body unread; the caller closes it. Cleanup cancels the request.
func (p *proc) sseGet(t testing.TB, path string, so sseOpts, opts ...reqOpt) (*http.Response, *http.Transport, context.CancelFunc) {
	t.Helper()
	dialer := &net.Dialer{Timeout: callTimeout}
	if so.rcvBuf > 0 {
		dialer.Control = func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, so.rcvBuf)
			})
			if err != nil {
				return err
			}
			return serr
		}
	}
	// No Client.Timeout: it would cut a stream that is meant to stay open.
	tr := &http.Transport{DialContext: dialer.DialContext, ResponseHeaderTimeout: callTimeout}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); tr.CloseIdleConnections() })
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+path, nil)
	require.NoError(t, err)
	for _, o := range opts {
		o(req)
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	require.NoError(t, err, "GET %s", path)
	return resp, tr, cancel
}

// sseFail sends GET path, requires a JSON error with the wire code and
// returns nothing: error answers end at once and are never streams.
func (p *proc) sseFail(t testing.TB, path, code string, opts ...reqOpt) {
	t.Helper()
	resp, _, cancel := p.sseGet(t, path, sseOpts{}, opts...)
	defer cancel()
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	r := httpResp{status: resp.StatusCode, header: resp.Header, raw: raw}
	var o map[string]any
	if json.Unmarshal(raw, &o) == nil {
		r.body = o
	}
	requireRESTError(t, r, code)
}

// openSSE opens GET path as an event stream and requires a 200
// text/event-stream answer. It does not read the ready event.
func (p *proc) openSSE(t testing.TB, path string, so sseOpts, opts ...reqOpt) *sseStream {
	t.Helper()
	resp, tr, cancel := p.sseGet(t, path, so, opts...)
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("GET %s: status %d, body %s", path, resp.StatusCode, raw)
	}
	require.Equal(t, "text/event-stream", strings.Split(resp.Header.Get("Content-Type"), ";")[0],
		"GET %s content type", path)
	s := &sseStream{resp: resp, events: make(chan sseEvent), cancel: cancel, tr: tr}
	ctx := resp.Request.Context()
	go s.read(ctx)
	t.Cleanup(s.close)
	return s
}

// subscribeSSE opens /subscribe as member with the bearer token (plus any
// extra query, e.g. "&lastEventId=..") and requires the ready event first.
func (p *proc) subscribeSSE(t testing.TB, tok, member, query string, opts ...reqOpt) *sseStream {
	t.Helper()
	s := p.openSSE(t, "/subscribe?name="+member+query, sseOpts{}, append([]reqOpt{withBearer(tok)}, opts...)...)
	s.requireReady(t, member)
	return s
}

// read parses frames until the body ends. Lines are kept raw so framing can
// be asserted; a frame is dispatched on its blank line when it has fields.
func (s *sseStream) read(ctx context.Context) {
	br := bufio.NewReader(s.resp.Body)
	var ev sseEvent
	var err error
	for {
		var line string
		line, err = br.ReadString('\n')
		if err != nil {
			break
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		if line == "" {
			if ev.id != "" || ev.event != "" || ev.data != nil {
				select {
				case s.events <- ev:
				case <-ctx.Done():
					err = ctx.Err()
				}
				if err != nil {
					break
				}
			}
			ev = sseEvent{}
			continue
		}
		ev.lines = append(ev.lines, line)
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			ev.id = value
		case "event":
			ev.event = value
		case "data":
			ev.data = append(ev.data, value)
		}
	}
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
	close(s.events)
}

// requireEnds waits (bounded) until the broker ends the stream, skipping
// whatever events come before the end.
func (s *sseStream) requireEnds(t testing.TB) {
	t.Helper()
	deadline := time.After(streamWait)
	for {
		select {
		case _, ok := <-s.events:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatalf("SSE stream still open after %s", streamWait)
		}
	}
}

// endErr is why the stream ended.
func (s *sseStream) endErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// next returns the next event within streamWait.
func (s *sseStream) next(t testing.TB) sseEvent {
	t.Helper()
	select {
	case ev, ok := <-s.events:
		if !ok {
			t.Fatalf("SSE stream ended: %v", s.endErr())
		}
		return ev
	case <-time.After(streamWait):
		t.Fatalf("no SSE event within %s", streamWait)
	}
	return sseEvent{}
}

// requireReady reads the first event and requires `event: ready` with data
// {"member": member}.
func (s *sseStream) requireReady(t testing.TB, member string) {
	t.Helper()
	ev := s.next(t)
	require.Equal(t, "ready", ev.event, "the first event is ready: %q", ev.lines)
	require.Len(t, ev.data, 1, "ready has one data line: %q", ev.lines)
	var d obj
	require.NoError(t, json.Unmarshal([]byte(ev.data[0]), &d), "ready data %q", ev.data[0])
	require.Equal(t, obj{"member": member}, d)
}

// nextMessage returns the next message event's JSON, checking its framing:
// an id: equal to the message id, event: message and one data: line.
func (s *sseStream) nextMessage(t testing.TB) obj {
	t.Helper()
	ev := s.next(t)
	return requireMessageEvent(t, ev)
}

func requireMessageEvent(t testing.TB, ev sseEvent) obj {
	t.Helper()
	require.Equal(t, "message", ev.event, "frame %q", ev.lines)
	require.Len(t, ev.data, 1, "a message is one data: line: %q", ev.lines)
	var m obj
	require.NoError(t, json.Unmarshal([]byte(ev.data[0]), &m), "data %q", ev.data[0])
	require.NotEmpty(t, ev.id, "a message frame carries id: %q", ev.lines)
	require.Equal(t, ev.id, m["id"], "the SSE id is the message id")
	return m
}

// drain reads events until the broker ends the stream, bounded by wait,
// and returns the messages read. It fails if the stream stays open.
func (s *sseStream) drain(t testing.TB, wait time.Duration) []obj {
	t.Helper()
	var out []obj
	deadline := time.After(wait)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				return out
			}
			if ev.event == "message" {
				out = append(out, requireMessageEvent(t, ev))
			}
		case <-deadline:
			t.Fatalf("the broker did not end the stream within %s (%d messages read)", wait, len(out))
		}
	}
}

func (s *sseStream) close() {
	s.cancel()
	s.tr.CloseIdleConnections()
}

// grpcStream is an open Broker.Subscribe call.
type grpcStream struct {
	events chan *apiv1.SubscribeResponse
	cancel context.CancelFunc

	mu  sync.Mutex
	err error
}

// grpcSubscribe starts Subscribe with the credential and returns the stream
// and the first Recv's outcome: the ready event, or the call's error.
func (p *proc) grpcSubscribe(t testing.TB, c cred, req *apiv1.SubscribeRequest) (*grpcStream, *apiv1.SubscribeResponse, error) {
	t.Helper()
	return grpcSubscribeOn(t, p.broker(t), c, req)
}

// grpcSubscribeOn is grpcSubscribe over a client of the caller's choosing.
func grpcSubscribeOn(t testing.TB, client apiv1.BrokerClient, c cred, req *apiv1.SubscribeRequest) (*grpcStream, *apiv1.SubscribeResponse, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var kv []string
	if c.authorization != "" {
		kv = append(kv, "authorization", c.authorization)
	}
	if c.session != "" {
		kv = append(kv, "cookie", "svc_session="+c.session)
	}
	ctx = metadata.AppendToOutgoingContext(ctx, kv...)
	call, err := client.Subscribe(ctx, req)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	first := make(chan error, 1)
	var ready *apiv1.SubscribeResponse
	go func() {
		r, err := call.Recv()
		ready = r
		first <- err
	}()
	select {
	case err = <-first:
	case <-time.After(streamWait):
		cancel()
		t.Fatalf("Subscribe: nothing within %s", streamWait)
	}
	if err != nil {
		cancel()
		return nil, nil, err
	}
	s := &grpcStream{events: make(chan *apiv1.SubscribeResponse), cancel: cancel}
	go func() {
		for {
			r, err := call.Recv()
			if err != nil {
				s.mu.Lock()
				s.err = err
				s.mu.Unlock()
				close(s.events)
				return
			}
			select {
			case s.events <- r:
			case <-ctx.Done():
				s.mu.Lock()
				s.err = ctx.Err()
				s.mu.Unlock()
				close(s.events)
				return
			}
		}
	}()
	return s, ready, nil
}

// subscribeGRPC opens Subscribe as member and requires ready first.
func (p *proc) subscribeGRPC(t testing.TB, tok, member, lastID string) *grpcStream {
	t.Helper()
	s, ready, err := p.grpcSubscribe(t, bearer(tok), &apiv1.SubscribeRequest{Name: member, LastId: lastID})
	require.NoError(t, err, "Subscribe as %s", member)
	require.NotNil(t, ready.GetReady(), "the first event is ready: %v", ready)
	require.Equal(t, member, ready.GetReady().GetMember())
	return s
}

// next returns the next stream event within streamWait.
func (s *grpcStream) next(t testing.TB) *apiv1.SubscribeResponse {
	t.Helper()
	select {
	case r, ok := <-s.events:
		if !ok {
			s.mu.Lock()
			err := s.err
			s.mu.Unlock()
			t.Fatalf("Subscribe stream ended: %v", err)
		}
		return r
	case <-time.After(streamWait):
		t.Fatalf("no Subscribe event within %s", streamWait)
	}
	return nil
}

func (s *grpcStream) nextMessage(t testing.TB) obj {
	t.Helper()
	r := s.next(t)
	m := r.GetMessage()
	require.NotNil(t, m, "want a message, got %v", r)
	return messageJSON(t, m)
}

// endErr waits (bounded) for the stream to end and returns its error.
func (s *grpcStream) endErr(t testing.TB, wait time.Duration) error {
	t.Helper()
	deadline := time.After(wait)
	for {
		select {
		case _, ok := <-s.events:
			if !ok {
				s.mu.Lock()
				defer s.mu.Unlock()
				return s.err
			}
		case <-deadline:
			t.Fatalf("Subscribe stream still open after %s", wait)
		}
	}
}

func (s *grpcStream) close() { s.cancel() }

// messageJSON renders a Message as the gateway renders it.
func messageJSON(t testing.TB, m *apiv1.Message) obj {
	t.Helper()
	raw, err := protojson.MarshalOptions{EmitDefaultValues: true}.Marshal(m)
	require.NoError(t, err)
	var o obj
	require.NoError(t, json.Unmarshal(raw, &o))
	return o
}

// subscribeOn opens a message stream for member over the named transport:
// SSE for "rest", Subscribe for "grpc".
func subscribeOn(t testing.TB, p *proc, transport, tok, member string) msgStream {
	t.Helper()
	switch transport {
	case "rest":
		return p.subscribeSSE(t, tok, member, "")
	case "grpc":
		return p.subscribeGRPC(t, tok, member, "")
	}
	t.Fatalf("unknown transport %q", transport)
	return nil
}

// isEOF reports a stream that the server ended cleanly.
func isEOF(err error) bool { return errors.Is(err, io.EOF) }
