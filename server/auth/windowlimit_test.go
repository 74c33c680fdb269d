package auth

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestWindowLimiter(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	l := NewWindowLimiter(EnrollMintLimit, EnrollMintWindow, 3, clock)
	for i := range EnrollMintLimit {
		require.Zero(t, l.Allow("a"), "mint %d", i+1)
		now = now.Add(time.Minute)
	}
	// 10 mints at minutes 0..9; now is minute 10: the first leaves the
	// window at minute 60.
	require.Equal(t, 50*time.Minute, l.Allow("a"), "the 11th waits for the oldest to leave")
	require.Zero(t, l.Allow("b"), "keys are separate")

	now = now.Add(50 * time.Minute)
	require.Zero(t, l.Allow("a"), "the window slid")
	require.Equal(t, time.Minute, l.Allow("a"), "the next waits for the second oldest")

	// Key bound: a, b and c fill it; a fourth key waits while they live.
	require.Zero(t, l.Allow("c"))
	require.Positive(t, l.Allow("d"), "no room for a new key")
	now = now.Add(2 * time.Hour)
	require.Zero(t, l.Allow("d"), "expired keys make room")
}
