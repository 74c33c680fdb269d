package runner

import (
	"bytes"
	"io"
	"sync"
)

// maxLogLine bounds the bytes a redactWriter holds while it waits for a
// line's end; a longer line is redacted and written in pieces of this
// size (a secret astride a piece boundary of such a line is the one case
// it can miss).
const maxLogLine = 1 << 20

// redactWriter is the runner's stdout or stderr: everything written to it,
// the runner's log lines, the agent's text and the agent's own stderr, goes
// out line by line with the secrets and tokens replaced
// (docs/RUNNER.md, "Logs"). A line is written once it is whole, so a secret
// split across two writes is still found.
type redactWriter struct {
	mu  sync.Mutex
	w   io.Writer
	r   interface{ String(string) string }
	buf []byte
}

func newRedactWriter(w io.Writer, r interface{ String(string) string }) *redactWriter {
	return &redactWriter{w: w, r: r}
}

// setRedactor replaces the redactor: the runner learns the member's
// secrets after its first log lines.
func (rw *redactWriter) setRedactor(r interface{ String(string) string }) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	rw.r = r
}

// Write never fails for the caller: what the underlying writer refuses is
// lost, as a log line written to a closed terminal is.
func (rw *redactWriter) Write(p []byte) (int, error) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	rw.buf = append(rw.buf, p...)
	for {
		i := bytes.IndexByte(rw.buf, '\n')
		if i < 0 {
			break
		}
		rw.emit(rw.buf[:i+1])
		rw.buf = rw.buf[i+1:]
	}
	for len(rw.buf) >= maxLogLine {
		rw.emit(rw.buf[:maxLogLine])
		rw.buf = rw.buf[maxLogLine:]
	}
	if len(rw.buf) == 0 {
		rw.buf = nil // let a large buffer go
	}
	return len(p), nil
}

func (rw *redactWriter) emit(b []byte) {
	_, _ = io.WriteString(rw.w, rw.r.String(string(b)))
}

// Flush writes a last line that has no end yet.
func (rw *redactWriter) Flush() {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if len(rw.buf) > 0 {
		rw.emit(rw.buf)
		rw.buf = nil
	}
}

// Redact redacts s as the writer's lines are.
func (rw *redactWriter) Redact(s string) string {
	rw.mu.Lock()
	r := rw.r
	rw.mu.Unlock()
	return r.String(s)
}

// redactFor is how the log w redacts, so an adapter redacts the agent's
// text before it cuts it to a log line's length: a secret cut in two is no
// longer found by the writer. Text goes unchanged to a writer that does not
// redact.
func redactFor(w io.Writer) func(string) string {
	if r, ok := w.(interface{ Redact(string) string }); ok {
		return r.Redact
	}
	return func(s string) string { return s }
}
