package auth_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/server/auth"
)

func TestFailureLimiterMember(t *testing.T) {
	clk := newFakeClock()
	l := auth.NewFailureLimiter(clk.Now)

	for i := range auth.TOTPMemberFailures - 1 {
		l.Fail(auth.Attempt{Member: "alice"})
		require.Zero(t, l.Check(auth.Attempt{Member: "alice", Global: true}), "after %d failures", i+1)
	}
	l.Fail(auth.Attempt{Member: "alice"})
	wait := l.Check(auth.Attempt{Member: "alice", Global: true})
	require.Positive(t, wait)
	require.LessOrEqual(t, wait, auth.TOTPWindow)
	require.Equal(t, auth.TOTPWindow, wait, "all failures at the same instant: wait the full window")

	// Other members and the codeless form are not covered by alice's limit.
	require.Zero(t, l.Check(auth.Attempt{Member: "bob", Global: true}))
	require.Zero(t, l.Check(auth.Attempt{Global: true}))

	// Checking again does not count as a failure.
	require.Equal(t, wait, l.Check(auth.Attempt{Member: "alice", Global: true}))
}

func TestFailureLimiterGlobal(t *testing.T) {
	clk := newFakeClock()
	l := auth.NewFailureLimiter(clk.Now)

	// 5 for alice (her limit), then failures spread over others until the
	// global limit.
	for range auth.TOTPMemberFailures {
		l.Fail(auth.Attempt{Member: "alice"})
	}
	require.Positive(t, l.Check(auth.Attempt{Member: "alice", Global: true}))
	for i := auth.TOTPMemberFailures; i < auth.TOTPGlobalFailures-1; i++ {
		l.Fail(auth.Attempt{Member: fmt.Sprintf("m%d", i)})
		require.Zero(t, l.Check(auth.Attempt{Member: "bob", Global: true}), "bob is unaffected below the global limit (failure %d)", i+1)
		require.Zero(t, l.Check(auth.Attempt{Global: true}))
	}
	l.Fail(auth.Attempt{}) // the codeless form counts globally
	for _, who := range []string{"", "bob", "carol", "alice"} {
		w := l.Check(auth.Attempt{Member: who, Global: true})
		require.Positive(t, w, who)
		require.LessOrEqual(t, w, auth.TOTPWindow, who)
	}
}

func TestFailureLimiterCodelessOnly(t *testing.T) {
	clk := newFakeClock()
	l := auth.NewFailureLimiter(clk.Now)
	for range auth.TOTPGlobalFailures - 1 {
		l.Fail(auth.Attempt{})
	}
	require.Zero(t, l.Check(auth.Attempt{Global: true}))
	l.Fail(auth.Attempt{})
	require.Positive(t, l.Check(auth.Attempt{Global: true}))
	require.Positive(t, l.Check(auth.Attempt{Member: "anyone", Global: true}))
}

func TestFailureLimiterSlidingWindow(t *testing.T) {
	clk := newFakeClock()
	t0 := clk.Now()
	l := auth.NewFailureLimiter(clk.Now)

	// Failures at t0, t0+1m, ..., t0+4m.
	for i := range auth.TOTPMemberFailures {
		if i > 0 {
			clk.Advance(time.Minute)
		}
		l.Fail(auth.Attempt{Member: "alice"})
	}
	require.Equal(t, 11*time.Minute, l.Check(auth.Attempt{Member: "alice", Global: true}), "until the first failure leaves the window")

	clk.Advance(5 * time.Minute) // t0+9m
	require.Equal(t, 6*time.Minute, l.Check(auth.Attempt{Member: "alice", Global: true}), "the wait shrinks as time passes")

	clk.Advance(6*time.Minute - time.Nanosecond)
	require.Equal(t, time.Nanosecond, l.Check(auth.Attempt{Member: "alice", Global: true}))

	clk.Advance(time.Nanosecond) // t0+15m: the first failure slides out
	require.Equal(t, t0.Add(auth.TOTPWindow), clk.Now())
	require.Zero(t, l.Check(auth.Attempt{Member: "alice", Global: true}))

	// One more failure reaches the limit again, now anchored on the
	// second-oldest failure (t0+1m).
	l.Fail(auth.Attempt{Member: "alice"})
	require.Equal(t, time.Minute, l.Check(auth.Attempt{Member: "alice", Global: true}))
}

func TestFailureLimiterOldFailuresDoNotCount(t *testing.T) {
	tests := []struct {
		name    string
		gap     time.Duration // between the old batch and now
		blocked bool
	}{
		{name: "just inside the window", gap: auth.TOTPWindow - time.Millisecond, blocked: true},
		{name: "exactly the window", gap: auth.TOTPWindow, blocked: false},
		{name: "past the window", gap: auth.TOTPWindow + time.Second, blocked: false},
		{name: "long ago", gap: 24 * time.Hour, blocked: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			l := auth.NewFailureLimiter(clk.Now)
			for range auth.TOTPGlobalFailures {
				l.Fail(auth.Attempt{Member: "alice"})
			}
			clk.Advance(tc.gap)
			if !tc.blocked {
				require.Zero(t, l.Check(auth.Attempt{Member: "alice", Global: true}))
				require.Zero(t, l.Check(auth.Attempt{Global: true}))
				// A fresh failure starts a new count.
				l.Fail(auth.Attempt{Member: "alice"})
				require.Zero(t, l.Check(auth.Attempt{Member: "alice", Global: true}))
				require.Zero(t, l.Check(auth.Attempt{Global: true}))
				return
			}
			require.Equal(t, time.Millisecond, l.Check(auth.Attempt{Member: "alice", Global: true}))
			require.Equal(t, time.Millisecond, l.Check(auth.Attempt{Global: true}))
		})
	}
}

func TestFailureLimiterConcurrent(t *testing.T) {
	clk := newFakeClock()
	l := auth.NewFailureLimiter(clk.Now)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 50 {
				l.Fail(auth.Attempt{Member: fmt.Sprintf("m%d", (i+j)%3)})
				_ = l.Check(auth.Attempt{Member: fmt.Sprintf("m%d", j%3), Global: true})
				clk.Advance(time.Millisecond)
			}
		})
	}
	wg.Wait()
	require.Positive(t, l.Check(auth.Attempt{Global: true}))
}
