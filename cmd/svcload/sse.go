package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// maxReconnects bounds how often a subscriber resumes a stream the broker
// closed (a stream that falls 256 messages behind is closed by design).
const maxReconnects = 10

// sseEvent is one dispatched server-sent event.
type sseEvent struct {
	id, event string
	data      []byte
}

// sseReader parses a text/event-stream as the WHATWG spec does, for the
// fields we use: event, data (lines joined by \n), id (which persists across
// events); comments and other fields are skipped. Lines end in LF or CRLF.
type sseReader struct {
	r      *bufio.Reader
	lastID string
}

func newSSEReader(r io.Reader) *sseReader { return &sseReader{r: bufio.NewReaderSize(r, 16<<10)} }

// next returns the next event that carries data. An event cut short by the
// end of the stream is dropped, and the error returned.
func (p *sseReader) next() (sseEvent, error) {
	var ev sseEvent
	hasData := false
	for {
		line, err := p.readLine()
		if err != nil {
			return sseEvent{}, err
		}
		if len(line) == 0 {
			if hasData {
				ev.id = p.lastID
				if ev.event == "" {
					ev.event = "message"
				}
				return ev, nil
			}
			ev = sseEvent{}
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			ev.event = string(value)
		case "data":
			if hasData {
				ev.data = append(ev.data, '\n')
			}
			ev.data, hasData = append(ev.data, value...), true
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				p.lastID = string(value)
			}
		}
	}
}

// readLine returns one line without its LF or CRLF; it stays valid until
// the next call.
func (p *sseReader) readLine() ([]byte, error) {
	line, err := p.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		line = append([]byte(nil), line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			var more []byte
			more, err = p.r.ReadSlice('\n')
			line = append(line, more...)
		}
	}
	if err != nil {
		return nil, err
	}
	line = line[:len(line)-1]
	return bytes.TrimSuffix(line, []byte("\r")), nil
}

var lgKey = []byte(`"lg"`)

// dataSeq finds our sequence number, `"lg": <n>`, in a Message JSON. A byte
// scan instead of a decode keeps a thousand subscribers cheap to run; our
// bodies never contain the key.
func dataSeq(msg []byte) (int, bool) {
	i := bytes.Index(msg, lgKey)
	if i < 0 {
		return 0, false
	}
	rest := bytes.TrimLeft(msg[i+len(lgKey):], " \t\r\n")
	if len(rest) == 0 || rest[0] != ':' {
		return 0, false
	}
	rest = bytes.TrimLeft(rest[1:], " \t\r\n")
	n := 0
	for n < len(rest) && bytes.IndexByte([]byte("0123456789.eE+-"), rest[n]) >= 0 {
		n++
	}
	// Struct numbers are doubles, so a writer may print 1e+06.
	f, err := strconv.ParseFloat(string(rest[:n]), 64)
	if err != nil || f < 0 || f != math.Trunc(f) || f > math.MaxInt32 {
		return 0, false
	}
	return int(f), true
}

// subscriber is one SSE stream of a member. It records the first receipt
// time of each sequence number in [base, base+len(recv)), and counts
// messages whose id does not exceed the previous one.
type subscriber struct {
	member, token string
	base          int
	recv          []int64 // receipt time (ns since loadgen start); 0: not yet

	got atomic.Int64 // receipts inside the window
	// onData, when set, also gets every message's data, on run's goroutine.
	onData func(data []byte)
	ready  chan struct{}
	once   sync.Once
	done   chan struct{}

	// Owned by run's goroutine; read after done is closed.
	err        error
	ooo, bad   int
	reconnects int
	lastID     uint64
}

func newSubscriber(member, token string, base, n int) *subscriber {
	return &subscriber{member: member, token: token, base: base, recv: make([]int64, n),
		ready: make(chan struct{}), done: make(chan struct{})}
}

// run streams until ctx ends. It resumes by Last-Event-ID when a stream that
// was ready breaks; a refused or never-ready stream is an error.
func (s *subscriber) run(ctx context.Context, c *http.Client, base string, now func() int64) {
	defer close(s.done)
	var lastEventID string
	for {
		wasReady, err := s.stream(ctx, c, base, lastEventID, now)
		if ctx.Err() != nil {
			return
		}
		if !wasReady || s.reconnects >= maxReconnects {
			s.err = fmt.Errorf("subscriber %s: %w", s.member, err)
			return
		}
		s.reconnects++
		lastEventID = strconv.FormatUint(s.lastID, 10)
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (s *subscriber) stream(ctx context.Context, c *http.Client, base, lastEventID string, now func() int64) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/subscribe?name="+url.QueryEscape(s.member), nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Accept", "text/event-stream")
	if lastEventID != "" && lastEventID != "0" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := c.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, statusError(resp)
	}
	r := newSSEReader(resp.Body)
	ready := false
	for {
		ev, err := r.next()
		if err != nil {
			return ready, err
		}
		switch ev.event {
		case "ready":
			ready = true
			s.once.Do(func() { close(s.ready) })
		case "message":
			s.onMessage(ev, now())
		}
	}
}

func (s *subscriber) onMessage(ev sseEvent, at int64) {
	id, err := strconv.ParseUint(ev.id, 10, 64)
	switch {
	case err != nil:
		s.bad++
	case id <= s.lastID:
		s.ooo++
	default:
		s.lastID = id
	}
	if s.onData != nil {
		s.onData(ev.data)
	}
	seq, ok := dataSeq(ev.data)
	if k := seq - s.base; ok && k >= 0 && k < len(s.recv) && s.recv[k] == 0 {
		s.recv[k] = at
		s.got.Add(1)
	}
}

// statusError describes a non-2xx answer with the start of its body.
func statusError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return fmt.Errorf("%s %s: %s: %s", resp.Request.Method, resp.Request.URL.Path, resp.Status, bytes.TrimSpace(body))
}
