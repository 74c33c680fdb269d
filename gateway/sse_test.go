package gateway

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	apiv1 "svc/gen/svc/v1"
	"svc/server/hub"
)

// sseWait bounds every wait of these tests.
const sseWait = 5 * time.Second

// errFeedEnded is how a fakeFeed ends when the test ends it (as the hub
// ends a feed at shutdown).
var errFeedEnded = errors.New("feed ended")

// fakeFeed is a feed the test drives: it publishes events, ends the feed,
// and sees when the stream closes it.
type fakeFeed struct {
	timedOut  atomic.Bool
	wrote     atomic.Int64
	evs       chan *hub.Event
	end       chan struct{}
	closed    chan struct{}
	closeOnce sync.Once
	endOnce   sync.Once
}

func newFakeFeed() *fakeFeed {
	return &fakeFeed{evs: make(chan *hub.Event, 64), end: make(chan struct{}), closed: make(chan struct{})}
}

func (f *fakeFeed) Next(ctx context.Context, tick <-chan time.Time) (*hub.Event, error) {
	select {
	case ev := <-f.evs:
		return ev, nil
	case <-f.end:
		return nil, errFeedEnded
	case <-tick:
		return nil, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (f *fakeFeed) Buffered() *hub.Event {
	select {
	case ev := <-f.evs:
		return ev
	default:
		return nil
	}
}

func (f *fakeFeed) ID(ev *hub.Event) string { return strconv.FormatInt(ev.Seq, 10) }

func (f *fakeFeed) WriteTimedOut() { f.timedOut.Store(true) }

func (f *fakeFeed) Wrote() { f.wrote.Add(1) }

func (f *fakeFeed) Close() { f.closeOnce.Do(func() { close(f.closed) }) }

func (f *fakeFeed) publish(seq int64, body string) {
	f.evs <- hub.NewEvent(seq, &apiv1.Message{Id: strconv.FormatInt(seq, 10), Body: body})
}

func (f *fakeFeed) stop() { f.endOnce.Do(func() { close(f.end) }) }

// requireClosed waits until the stream has closed the feed.
func (f *fakeFeed) requireClosed(t *testing.T, why string) {
	t.Helper()
	select {
	case <-f.closed:
	case <-time.After(sseWait):
		t.Fatalf("the feed was not closed within %s: %s", sseWait, why)
	}
}

// sseHarness serves one fake feed per request through a middleware that
// sets a header and wraps the writer (as the gateway's do), and reports
// when the handler returned.
type sseHarness struct {
	g        *Gateway
	srv      *httptest.Server
	feeds    chan *fakeFeed
	returned chan struct{}
}

// unwrapWriter wraps a response writer as middleware does, with Unwrap.
type unwrapWriter struct{ http.ResponseWriter }

func (w unwrapWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func newSSEHarness(t *testing.T, ping time.Duration, tlsMode string) *sseHarness {
	t.Helper()
	g := &Gateway{log: slog.New(slog.DiscardHandler), ping: ping}
	h := &sseHarness{g: g, feeds: make(chan *fakeFeed, 4), returned: make(chan struct{}, 4)}
	h.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { h.returned <- struct{}{} }()
		w.Header().Set("X-SVC-Protocol", "1")
		f := newFakeFeed()
		h.feeds <- f
		g.serveFeed(unwrapWriter{w}, r, f, "message", "bob", "bob")
	}))
	switch tlsMode {
	case "":
		h.srv.Start()
	case "h1":
		h.srv.StartTLS()
	case "h2":
		h.srv.EnableHTTP2 = true
		h.srv.StartTLS()
	}
	t.Cleanup(h.srv.Close)
	return h
}

// open sends GET /subscribe and returns the response and the feed serving
// it.
func (h *sseHarness) open(t *testing.T) (*http.Response, *fakeFeed, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.srv.URL+"/subscribe?name=bob", nil)
	require.NoError(t, err)
	resp, err := h.srv.Client().Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	require.Equal(t, http.StatusOK, resp.StatusCode)
	select {
	case f := <-h.feeds:
		return resp, f, cancel
	case <-time.After(sseWait):
		t.Fatal("no feed")
	}
	return nil, nil, nil
}

// handlerReturned reports whether the handler returned within wait.
func (h *sseHarness) handlerReturned(wait time.Duration) bool {
	select {
	case <-h.returned:
		return true
	case <-time.After(wait):
		return false
	}
}

// frameReader reads SSE frames (the lines up to a blank line) off a body
// on a goroutine of its own, so a test can wait for one with a bound.
type frameReader struct {
	frames chan []string
	err    error // why the body ended; valid once frames is closed
}

func readFrames(body io.Reader) *frameReader {
	fr := &frameReader{frames: make(chan []string, 64)}
	go func() {
		br := bufio.NewReader(body)
		var frame []string
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				fr.err = err
				close(fr.frames)
				return
			}
			line = strings.TrimSuffix(line, "\n")
			if line == "" {
				fr.frames <- frame
				frame = nil
				continue
			}
			frame = append(frame, line)
		}
	}()
	return fr
}

func (fr *frameReader) next(t *testing.T) []string {
	t.Helper()
	select {
	case f, ok := <-fr.frames:
		if !ok {
			t.Fatalf("the stream ended: %v", fr.err) // set before frames closed
		}
		return f
	case <-time.After(sseWait):
		t.Fatalf("no frame within %s", sseWait)
	}
	return nil
}

// requireEOF waits for the body to end cleanly.
func (fr *frameReader) requireEOF(t *testing.T) {
	t.Helper()
	for {
		select {
		case _, ok := <-fr.frames:
			if !ok {
				require.ErrorIs(t, fr.err, io.EOF, "the stream ends cleanly")
				return
			}
		case <-time.After(sseWait):
			t.Fatalf("the stream did not end within %s", sseWait)
		}
	}
}

func requireMessageFrame(t *testing.T, frame []string, seq int64, body string) {
	t.Helper()
	require.Len(t, frame, 3, "frame %q", frame)
	require.Equal(t, "id: "+strconv.FormatInt(seq, 10), frame[0])
	require.Equal(t, "event: message", frame[1])
	require.True(t, strings.HasPrefix(frame[2], "data: {"), "frame %q", frame)
	require.Contains(t, frame[2], `"body":"`+body+`"`)
}

// TestHijackedStream: over HTTP/1.1 (cleartext and TLS) the stream is
// served off the handler, which returns at once, with the headers the
// handler and middleware set, no chunking and Connection: close; it
// delivers, pings and ends cleanly when the feed ends.
func TestHijackedStream(t *testing.T) {
	for _, mode := range []string{"", "h1"} {
		t.Run("tls="+mode, func(t *testing.T) {
			t.Parallel()
			h := newSSEHarness(t, 50*time.Millisecond, mode)
			resp, f, _ := h.open(t)
			require.Equal(t, 1, resp.ProtoMajor)
			require.True(t, h.handlerReturned(sseWait), "the handler returns while the stream lives")
			require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
			require.Equal(t, "no-cache", resp.Header.Get("Cache-Control"))
			require.Equal(t, "no", resp.Header.Get("X-Accel-Buffering"))
			require.Equal(t, "1", resp.Header.Get("X-SVC-Protocol"), "middleware's headers are kept")
			require.NotEmpty(t, resp.Header.Get("Date"))
			require.True(t, resp.Close, "Connection: close")
			require.Empty(t, resp.TransferEncoding, "not chunked")
			require.EqualValues(t, -1, resp.ContentLength)

			fr := readFrames(resp.Body)
			require.Equal(t, []string{"event: ready", `data: {"member":"bob"}`}, fr.next(t))
			f.publish(1, "one")
			f.publish(2, "two")
			requireMessageFrame(t, fr.next(t), 1, "one")
			requireMessageFrame(t, fr.next(t), 2, "two")
			// Pings every 50 ms here.
			require.Equal(t, []string{": ping"}, fr.next(t))
			f.publish(3, "three")
			for {
				frame := fr.next(t)
				if len(frame) == 1 && frame[0] == ": ping" {
					continue
				}
				requireMessageFrame(t, frame, 3, "three")
				break
			}
			f.stop()
			fr.requireEOF(t)
			f.requireClosed(t, "the feed ended")
		})
	}
}

// TestHijackedStreamNoticesClientGone: a client that closes its
// connection ends the stream and releases the feed at once, with no write
// to find out (pings are an hour apart here).
func TestHijackedStreamNoticesClientGone(t *testing.T) {
	for _, mode := range []string{"", "h1"} {
		t.Run("tls="+mode, func(t *testing.T) {
			t.Parallel()
			h := newSSEHarness(t, time.Hour, mode)
			resp, f, cancel := h.open(t)
			fr := readFrames(resp.Body)
			require.Equal(t, "event: ready", fr.next(t)[0])
			require.True(t, h.handlerReturned(sseWait))
			cancel()
			resp.Body.Close()
			f.requireClosed(t, "the client went away")
		})
	}
}

// TestHijackedStreamEndsOnUnsolicitedBytes: a client that sends more than
// maxUnsolicited bytes after its request loses its stream.
func TestHijackedStreamEndsOnUnsolicitedBytes(t *testing.T) {
	t.Parallel()
	h := newSSEHarness(t, time.Hour, "")
	c, err := net.Dial("tcp", h.srv.Listener.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	_, err = io.WriteString(c, "GET /subscribe?name=bob HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	var f *fakeFeed
	select {
	case f = <-h.feeds:
	case <-time.After(sseWait):
		t.Fatal("no feed")
	}
	require.NoError(t, c.SetReadDeadline(time.Now().Add(sseWait)))
	br := bufio.NewReader(c)
	status, err := br.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "HTTP/1.1 200 OK\r\n", status)
	// A few bytes are read and dropped; the stream lives on.
	_, err = c.Write([]byte("\r\n"))
	require.NoError(t, err)
	select {
	case <-f.closed:
		t.Fatal("a few stray bytes ended the stream")
	case <-time.After(100 * time.Millisecond):
	}
	_, err = c.Write(make([]byte, maxUnsolicited))
	require.NoError(t, err)
	f.requireClosed(t, "the client sent more than it may")
}

// TestHTTP2StreamIsServedInTheHandler: HTTP/2 cannot be hijacked; the
// stream is served through the response writer, as before.
func TestHTTP2StreamIsServedInTheHandler(t *testing.T) {
	t.Parallel()
	h := newSSEHarness(t, 50*time.Millisecond, "h2")
	resp, f, cancel := h.open(t)
	require.Equal(t, 2, resp.ProtoMajor)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	require.Equal(t, "1", resp.Header.Get("X-SVC-Protocol"))
	fr := readFrames(resp.Body)
	require.Equal(t, []string{"event: ready", `data: {"member":"bob"}`}, fr.next(t))
	f.publish(1, "one")
	requireMessageFrame(t, fr.next(t), 1, "one")
	require.Equal(t, []string{": ping"}, fr.next(t))
	require.False(t, h.handlerReturned(0), "the handler serves the stream")
	cancel()
	f.requireClosed(t, "the client went away")
	require.True(t, h.handlerReturned(sseWait))
}

// TestStreamWriteTimeoutIsACut: a client that stops reading is dropped
// once a write has waited the write timeout, and its feed is told so (it
// counts the stream as cut, svc_streams_cut_total), whether the stream was
// hijacked (HTTP/1.1) or served in the handler (HTTP/2).
func TestStreamWriteTimeoutIsACut(t *testing.T) {
	for _, mode := range []string{"", "h2"} {
		t.Run("tls="+mode, func(t *testing.T) {
			t.Parallel()
			h := newSSEHarness(t, time.Hour, mode)
			h.g.writeWait = 300 * time.Millisecond
			var f *fakeFeed
			if mode == "" {
				// A raw client with a small receive buffer that sends its
				// request and never reads.
				c, err := net.Dial("tcp", h.srv.Listener.Addr().String())
				require.NoError(t, err)
				t.Cleanup(func() { c.Close() })
				require.NoError(t, c.(*net.TCPConn).SetReadBuffer(4096))
				_, err = io.WriteString(c, "GET /subscribe?name=bob HTTP/1.1\r\nHost: x\r\n\r\n")
				require.NoError(t, err)
				select {
				case f = <-h.feeds:
				case <-time.After(sseWait):
					t.Fatal("no feed")
				}
			} else {
				// Go's HTTP/2 client buffers a stream's window (4 MB), then
				// stops granting more while the body is not read.
				resp, feed, _ := h.open(t)
				require.Equal(t, 2, resp.ProtoMajor)
				f = feed
			}
			body := strings.Repeat("x", 256<<10)
			// Bounded: far more than the socket buffers and the client's
			// window hold.
			for seq := int64(1); seq <= 400; seq++ {
				select {
				case f.evs <- hub.NewEvent(seq, &apiv1.Message{Id: strconv.FormatInt(seq, 10), Body: body}):
					continue
				case <-f.closed:
				case <-time.After(sseWait):
					t.Fatal("the stream neither took events nor ended")
				}
				break
			}
			f.requireClosed(t, "the write timed out")
			require.True(t, f.timedOut.Load(), "the feed was told its write timed out")
		})
	}
}

// A client that leaves is not a cut.
func TestStreamClientGoneIsNotACut(t *testing.T) {
	t.Parallel()
	h := newSSEHarness(t, time.Hour, "")
	resp, f, cancel := h.open(t)
	fr := readFrames(resp.Body)
	require.Equal(t, "event: ready", fr.next(t)[0])
	cancel()
	resp.Body.Close()
	f.requireClosed(t, "the client went away")
	require.False(t, f.timedOut.Load())
}
