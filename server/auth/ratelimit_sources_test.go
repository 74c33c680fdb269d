package auth

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestFailureLimiterSourcesBounded: the limiter tracks at most maxSources
// addresses; a new one past that is not tracked (its member and the global
// counter still cover it) until the window frees a place.
func TestFailureLimiterSourcesBounded(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	l := NewFailureLimiter(func() time.Time { return now })
	l.maxSources = 3
	for _, s := range []string{"a", "b", "c"} {
		for range TOTPSourceFailures {
			l.Fail(Attempt{Source: s})
		}
	}
	l.Fail(Attempt{Source: "d"})
	require.Len(t, l.sources, 3)
	require.Zero(t, l.Check(Attempt{Source: "d"}))
	require.Positive(t, l.Check(Attempt{Source: "a"}))

	now = now.Add(TOTPWindow + time.Second)
	for range TOTPSourceFailures {
		l.Fail(Attempt{Source: "d"})
	}
	require.Positive(t, l.Check(Attempt{Source: "d"}), "expired addresses make room")
	require.Len(t, l.sources, 1)
}
