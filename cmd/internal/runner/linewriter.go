package runner

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"
)

// lineWriter writes whole lines to an agent's stdin, one at a time, each
// bounded by its context and a timeout. A line cut short leaves the input
// unusable: every later write is refused with that error.
type lineWriter struct {
	w       io.Writer
	name    string // the adapter, for errors: "claude", "codex"
	timeout time.Duration

	mu     sync.Mutex // one write at a time
	broken error      // set once a line was cut short
}

// writeLine writes line (ending in '\n'); what is the error's subject when
// nothing was written.
func (l *lineWriter) writeLine(ctx context.Context, line []byte, what string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.broken != nil {
		return l.broken
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	type deadliner interface{ SetWriteDeadline(time.Time) error }
	if d, ok := l.w.(deadliner); ok {
		dl := time.Now().Add(l.timeout)
		if cd, ok := ctx.Deadline(); ok && cd.Before(dl) {
			dl = cd
		}
		if d.SetWriteDeadline(dl) == nil {
			fired := make(chan struct{})
			stop := context.AfterFunc(ctx, func() {
				defer close(fired)
				_ = d.SetWriteDeadline(time.Now())
			})
			defer func() {
				// A cancel that fired must be over before the deadline
				// is cleared, or it could cut the next write.
				if !stop() {
					<-fired
				}
				_ = d.SetWriteDeadline(time.Time{})
			}()
		}
	}
	n, err := l.w.Write(line)
	if err != nil {
		if n > 0 {
			l.broken = fmt.Errorf("%s: the agent's input is cut mid-line (%d of %d bytes): %w", l.name, n, len(line), err)
			return l.broken
		}
		return fmt.Errorf("%s: %s: %w", l.name, what, err)
	}
	return nil
}
