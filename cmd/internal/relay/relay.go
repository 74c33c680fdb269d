// Package relay is the local socket between a runner and the processes it
// starts: the agent's hook commands (`svc hook`) report hook events to the
// runner, and the agent's toolbox (`svc mcp`) receives the registry events
// the runner already gets on its stream, so the toolbox never opens a second
// stream that would count as a second connection in presence.
//
// The runner listens on a unix socket in a private 0700 directory and names
// it to its children in SVC_RUNNER_SOCKET. A client connects and writes one
// JSON line, its hello:
//
//	{"role":"hook","payload":<the hook's JSON input>}   answered {"ok":true}
//	{"role":"events"}                                     then one Event per line
//	{"role":"approval","payload":<ApprovalRequest>}      answered <ApprovalAnswer>
//	{"role":"credential","ticket":<one-time ticket>}      answered {"token":…} once, then {"error":…}
//
// A hook connection is answered once the runner has applied the event, so
// the hook command returns only after the state it reports is taken into
// account. An events connection stays open; the runner writes one JSON
// Event per line until either side closes. An approval connection (the
// toolbox's permission-prompt tool) stays open until a person decided,
// which may take minutes; a client that closes it first has stopped
// waiting, and the runner withdraws the request.
package relay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// Env names the runner's socket in its children's environment.
const Env = "SVC_RUNNER_SOCKET"

// MaxLine bounds one line on the socket: a hook payload carries a tool's
// input and result.
const MaxLine = 4 << 20

// Event is a registry change the runner saw on its stream: data.kind
// (tool_source, secret, notification_endpoint or notification_profile)
// and the thread it came on (tool:<slug>, secret:<slug>, hook:<slug>,
// hook-profile:<slug>).
type Event struct {
	Kind   string `json:"kind"`
	Thread string `json:"thread,omitempty"`
}

type hello struct {
	Role    string          `json:"role"`
	Payload json.RawMessage `json:"payload,omitempty"`
	Ticket  string          `json:"ticket,omitempty"`
}

// ApprovalRequest asks the runner to have a person decide whether the
// agent may use a tool (docs/APPROVALS.md).
type ApprovalRequest struct {
	Tool      string          `json:"tool"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"toolUseId,omitempty"`
}

// ApprovalAnswer is the decision: Allow, or a refusal whose Reason the
// agent reads. Approval names the broker's approval ("" when none could
// be asked for).
type ApprovalAnswer struct {
	Allow     bool   `json:"allow"`
	Reason    string `json:"reason,omitempty"`
	Approval  string `json:"approval,omitempty"`
	DecidedBy string `json:"decidedBy,omitempty"`
}

// Approver decides one approval request; ctx ends when the client stops
// waiting or the relay closes.
type Approver func(ctx context.Context, r ApprovalRequest) ApprovalAnswer

// Server is the runner's end. Hook is called once per hook connection, in
// its own goroutine; the hook command waits for it to return.
type Server struct {
	ln   net.Listener
	dir  string
	path string
	hook func(json.RawMessage)
	// approver answers approval connections; nil refuses them.
	approver atomic.Pointer[Approver]
	// closing ends the approval connections when the relay closes.
	closing   chan struct{}
	closeOnce sync.Once

	mu      sync.Mutex
	subs    map[net.Conn]chan Event
	tickets []*Ticket // open ones
	refused func()
	wg      sync.WaitGroup
}

// Listen creates a private directory under parent (os.TempDir() when "")
// and listens on relay.sock inside it.
func Listen(parent string, hook func(json.RawMessage)) (*Server, error) {
	dir, err := os.MkdirTemp(parent, "svc-runner-")
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	path := filepath.Join(dir, "relay.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &Server{ln: ln, dir: dir, path: path, hook: hook, subs: map[net.Conn]chan Event{}, closing: make(chan struct{})}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// SetApprover makes a answer the approval connections; until it is set
// they are refused.
func (s *Server) SetApprover(a Approver) { s.approver.Store(&a) }

// Path is the socket path: the value of Env.
func (s *Server) Path() string { return s.path }

// Dir is the private directory holding the socket; the runner may keep its
// other private files (the agent's MCP config, settings) there too.
func (s *Server) Dir() string { return s.dir }

// Subscribers is the number of events connections open now.
func (s *Server) Subscribers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.subs)
}

// Publish sends ev to every events connection. A subscriber that has fallen
// 64 events behind misses ev: events only say "refetch", so the next one
// carries the news as well.
func (s *Server) Publish(ev Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ch := range s.subs {
		select {
		case ch <- ev:
		default:
		}
	}
}

// Close stops listening, ends every connection and removes the directory.
func (s *Server) Close() error {
	err := s.ln.Close()
	s.closeOnce.Do(func() { close(s.closing) })
	s.mu.Lock()
	for c, ch := range s.subs {
		close(ch)
		c.Close()
		delete(s.subs, c)
	}
	open := s.tickets
	s.tickets = nil
	s.mu.Unlock()
	for _, t := range open {
		t.Void()
	}
	s.wg.Wait()
	os.RemoveAll(s.dir)
	return err
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serve(c)
		}()
	}
}

func (s *Server) serve(c net.Conn) {
	r := bufio.NewReaderSize(c, 64<<10)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := readLine(r)
	if err != nil {
		c.Close()
		return
	}
	var h hello
	if json.Unmarshal(line, &h) != nil {
		c.Close()
		return
	}
	switch h.Role {
	case "hook":
		if len(h.Payload) > 0 && s.hook != nil {
			s.hook(h.Payload)
		}
		_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		_, _ = c.Write([]byte("{\"ok\":true}\n"))
		c.Close()
	case "credential":
		s.serveCredential(c, h.Ticket)
	case "events":
		_ = c.SetReadDeadline(time.Time{})
		ch := make(chan Event, 64)
		s.mu.Lock()
		s.subs[c] = ch
		s.mu.Unlock()
		// The reader notices the client going away.
		go func() {
			_, _ = r.Discard(1 << 62)
			s.mu.Lock()
			if ch, ok := s.subs[c]; ok {
				close(ch)
				delete(s.subs, c)
			}
			s.mu.Unlock()
			c.Close()
		}()
		enc := json.NewEncoder(c)
		for ev := range ch {
			_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if enc.Encode(ev) != nil {
				c.Close()
				return
			}
		}
	case "approval":
		s.serveApproval(c, r, h.Payload)
	default:
		c.Close()
	}
}

// serveApproval answers one approval connection with the approver's
// decision. The client's going away (the agent stopped waiting) or the
// relay closing cancels the approver's context.
func (s *Server) serveApproval(c net.Conn, r *bufio.Reader, payload json.RawMessage) {
	defer c.Close()
	ap := s.approver.Load()
	var req ApprovalRequest
	if ap == nil || json.Unmarshal(payload, &req) != nil {
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// Nothing more comes from the client: a read ends only when it
		// closes (or the answer below closes the connection).
		_, _ = r.Discard(1 << 62)
		cancel()
	}()
	go func() {
		select {
		case <-s.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	ans := (*ap)(ctx, req)
	if ctx.Err() != nil {
		return
	}
	line, err := json.Marshal(ans)
	if err != nil {
		return
	}
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, _ = c.Write(append(line, '\n'))
}

func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, isPrefix, err := r.ReadLine()
		if err != nil {
			return nil, err
		}
		line = append(line, chunk...)
		if len(line) > MaxLine {
			return nil, errors.New("relay: line too long")
		}
		if !isPrefix {
			return line, nil
		}
	}
}

// SendHook reports one hook payload (the hook's JSON input) to the runner
// at path and waits for the runner to have applied it.
func SendHook(ctx context.Context, path string, payload []byte) error {
	if !json.Valid(payload) {
		return errors.New("relay: hook payload is not JSON")
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, payload); err != nil {
		return err
	}
	line, err := json.Marshal(hello{Role: "hook", Payload: compact.Bytes()})
	if err != nil {
		return err
	}
	if len(line) > MaxLine {
		return fmt.Errorf("relay: hook payload of %d bytes is over %d", len(line), MaxLine)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if _, err := c.Write(append(line, '\n')); err != nil {
		return err
	}
	ack, err := readLine(bufio.NewReader(c))
	if err != nil {
		return fmt.Errorf("relay: no answer from the runner: %w", err)
	}
	var ok struct{ OK bool }
	if json.Unmarshal(ack, &ok) != nil || !ok.OK {
		return fmt.Errorf("relay: unexpected answer %q", ack)
	}
	return nil
}

// Subscribe opens an events connection to the runner at path. Events come
// on the channel until ctx ends or the runner goes away; then it is closed.
func Subscribe(ctx context.Context, path string) (<-chan Event, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	if _, err := c.Write([]byte("{\"role\":\"events\"}\n")); err != nil {
		c.Close()
		return nil, err
	}
	out := make(chan Event, 16)
	stop := context.AfterFunc(ctx, func() { c.Close() })
	go func() {
		defer close(out)
		defer stop()
		defer c.Close()
		r := bufio.NewReader(c)
		for {
			line, err := readLine(r)
			if err != nil {
				return
			}
			var ev Event
			if json.Unmarshal(line, &ev) != nil {
				continue
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// RequestApproval asks the runner at path for a person's decision and
// waits for it, until ctx ends (then the runner withdraws the request).
func RequestApproval(ctx context.Context, path string, req ApprovalRequest) (ApprovalAnswer, error) {
	line, err := json.Marshal(hello{Role: "approval", Payload: mustJSON(req)})
	if err != nil {
		return ApprovalAnswer{}, err
	}
	if len(line) > MaxLine {
		return ApprovalAnswer{}, fmt.Errorf("relay: approval request of %d bytes is over %d", len(line), MaxLine)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return ApprovalAnswer{}, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	if _, err := c.Write(append(line, '\n')); err != nil {
		return ApprovalAnswer{}, err
	}
	ans, err := readLine(bufio.NewReader(c))
	if err != nil {
		if ctx.Err() != nil {
			return ApprovalAnswer{}, ctx.Err()
		}
		return ApprovalAnswer{}, fmt.Errorf("relay: no decision from the runner: %w", err)
	}
	var a ApprovalAnswer
	if err := json.Unmarshal(ans, &a); err != nil {
		return ApprovalAnswer{}, fmt.Errorf("relay: unexpected answer %q", ans)
	}
	return a, nil
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only types of this package, which always marshal
	}
	return b
}
