package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSSEStreamsAreHijacked: over HTTP/1.1 both SSE routes are served on
// the hijacked connection (no chunking, the body ends with the
// connection), which is what keeps an idle stream small
// (docs/PERFORMANCE.md); a writer wrapped by middleware without Unwrap
// would quietly fall back to the handler. They still deliver, and a
// client that closes its connection leaves the roster at once.
func TestSSEStreamsAreHijacked(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	bob := createMember(t, d, admin, "bob")

	for _, path := range []string{"/subscribe?name=bob", "/members/bob/activity/stream"} {
		s := p.openSSE(t, path, sseOpts{}, withBearer(bob))
		require.True(t, s.resp.Close, "%s: Connection: close", path)
		require.Empty(t, s.resp.TransferEncoding, "%s: not chunked", path)
		require.EqualValues(t, -1, s.resp.ContentLength, "%s: the body ends with the connection", path)
		require.Equal(t, "1", s.resp.Header.Get("X-SVC-Protocol"), "%s: middleware's headers are kept", path)
		ready := s.next(t)
		require.Equal(t, "ready", ready.event, "%s: %q", path, ready.lines)
		s.close()
	}

	// The streams above are released as their closes are noticed, on the
	// server's own time: wait for that before counting a new one.
	waitDisconnected := func() time.Duration {
		start := time.Now()
		for presenceOf(t, p, admin, "bob")["connected"] != 0.0 {
			require.Less(t, time.Since(start), callTimeout, "a closed stream still counts")
			time.Sleep(5 * time.Millisecond)
		}
		return time.Since(start)
	}
	waitDisconnected()

	s := p.subscribeSSE(t, bob, "bob", "")
	_, msg := mustPush(t, d, admin, obj{"to": "bob", "body": "hijacked"})
	require.Equal(t, msg, s.nextMessage(t))
	require.Equal(t, 1.0, presenceOf(t, p, admin, "bob")["connected"])
	s.close()
	t.Logf("the roster dropped the stream %s after the client closed it", waitDisconnected())
}
