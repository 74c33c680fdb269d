package runner

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"sync/atomic"
)

// Plain is the adapter of an agent that speaks the runner's own line
// protocol: its command runs as given; each turn is one JSON line on its
// stdin, {"type":"turn","id":<message id>,"text":<turn text>,"meta":<meta>};
// its stdout goes to the runner's log; it reports its events itself by
// running `svc hook` with Claude Code shaped payloads (see ParseHook).
type Plain struct{}

// NewPlain returns the plain adapter.
func NewPlain() Agent { return Plain{} }

// Name is "plain".
func (Plain) Name() string { return "plain" }

// Command is the user's command, unchanged, with no extra environment.
func (Plain) Command(s Setup) ([]string, []string, error) {
	if len(s.Argv) == 0 {
		return nil, nil, errors.New("no agent command")
	}
	return append([]string(nil), s.Argv...), nil, nil
}

// ParseHook is the Claude Code shaped mapping.
func (Plain) ParseHook(payload json.RawMessage) []Event { return ParseHook(payload) }

// Attach copies the agent's stdout to log and returns the session that
// writes its turns.
func (Plain) Attach(stdin io.WriteCloser, stdout io.Reader, _ chan<- Event, log io.Writer) Session {
	go func() { _, _ = io.Copy(log, stdout) }()
	return &plainSession{w: stdin}
}

type plainSession struct {
	mu     sync.Mutex // one line at a time
	w      io.WriteCloser
	once   sync.Once
	closed atomic.Bool
}

// plainTurn is one line of the plain protocol.
type plainTurn struct {
	Type string         `json:"type"`
	ID   string         `json:"id,omitempty"`
	Text string         `json:"text"`
	Meta map[string]any `json:"meta,omitempty"`
}

// Deliver writes the turn as one line. The write is whole or fails: a
// line is never split across two deliveries. The runner delivers from its
// own goroutine, so a slow reader delays turns but never the runner.
func (s *plainSession) Deliver(ctx context.Context, t Turn) error {
	line, err := json.Marshal(plainTurn{Type: "turn", ID: t.MessageID, Text: t.Text, Meta: t.Meta})
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return errors.New("agent input is closed")
	}
	_, err = s.w.Write(append(line, '\n'))
	return err
}

// Close ends the agent's input; it does not wait for a write in progress
// (that write fails), so a stuck agent cannot hold the runner's stop.
func (s *plainSession) Close() error {
	var err error
	s.once.Do(func() {
		s.closed.Store(true)
		err = s.w.Close()
	})
	return err
}
