package gateway

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"time"

	"svc/server/apierr"
)

// Request bodies must arrive at a useful pace: a client that announces a
// body and then sends a byte now and then would otherwise hold its
// connection (and a file descriptor) for as long as it likes.
const (
	// bodyGrace is how long a body may take before the rate counts: slow
	// starts and short bodies are never cut.
	bodyGrace = 10 * time.Second
	// bodyMinRate is the average pace, in bytes a second, a body must keep
	// up after the grace: a 1 MiB JSON body may take 17 minutes, a 64 MiB
	// file 18 hours; a byte every few seconds is cut after the grace.
	bodyMinRate = 1 << 10
)

// errBodyTooSlow answers a request whose body fell behind bodyMinRate.
var errBodyTooSlow = apierr.Errorf(apierr.CodeBadRequest,
	"request body arrived too slowly (at least %d bytes a second after the first %s)", bodyMinRate, bodyGrace)

type bodyGuardKey struct{}

// withBodyGuard arms a read deadline on every request that has a body and
// moves it as bytes arrive: start + bodyGrace + received/bodyMinRate. The
// deadline is cleared once the body is read, so what the handler does next
// (a stream, a slow commit) is never cut by it.
func withBodyGuard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		b := &guardedBody{ReadCloser: r.Body, rc: http.NewResponseController(w), start: time.Now()}
		b.arm()
		// A shallow copy: net/http decides what to do with an unread body
		// by the type of the original request's Body, which must stay its
		// own.
		r = r.WithContext(context.WithValue(r.Context(), bodyGuardKey{}, b))
		r.Body = b
		next.ServeHTTP(w, r)
	})
}

// guardedBody is a request body under withBodyGuard.
type guardedBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	start   time.Time
	got     int64
	done    bool
	tooSlow bool
}

func (b *guardedBody) arm() {
	allowed := bodyGrace + time.Duration(b.got)*time.Second/bodyMinRate
	_ = b.rc.SetReadDeadline(b.start.Add(allowed))
}

func (b *guardedBody) Read(p []byte) (int, error) {
	if b.tooSlow {
		return 0, errBodyTooSlow
	}
	n, err := b.ReadCloser.Read(p)
	b.got += int64(n)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		b.tooSlow = true
		return n, errBodyTooSlow
	case err != nil && !b.done:
		// The body is over (EOF, or the client went away): no deadline
		// from here on.
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	case err == nil:
		b.arm()
	}
	return n, err
}

// bodyTooSlow reports whether r's body was cut by withBodyGuard, for error
// handlers that only see a decoding error.
func bodyTooSlow(r *http.Request) bool {
	b, ok := r.Context().Value(bodyGuardKey{}).(*guardedBody)
	return ok && b.tooSlow
}
