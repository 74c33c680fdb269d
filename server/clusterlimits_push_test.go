package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/server/teamconfig"
	"svc/store"
)

// sharedGuards are two brokers' loop guards over one store, with one
// clock the test moves.
type sharedGuards struct {
	st    store.Store
	clock time.Time
	g     [2]*loopGuard
}

func newSharedGuards(t *testing.T, perMinute, burst int) *sharedGuards {
	t.Helper()
	s := &sharedGuards{st: mustMemStore(t), clock: time.UnixMilli(1_800_000_000_123)}
	for i := range s.g {
		s.g[i] = newLoopGuard(teamconfig.LoopGuard{MaxHops: 3, AgentPushesPerMinute: perMinute, AgentPushBurst: burst}, func() time.Time { return s.clock })
	}
	return s
}

// allow asks broker i's guard for a push of member, in a transaction of
// its own as the committer's would be, shared or each in its memory.
func (s *sharedGuards) allow(t *testing.T, i int, member string, shared bool) time.Duration {
	t.Helper()
	var wait time.Duration
	require.NoError(t, s.st.WithTx(context.Background(), func(tx store.Tx) error {
		var err error
		wait, err = s.g[i].allow(context.Background(), tx, member, shared)
		return err
	}))
	return wait
}

// TestSharedPushBucketOnceForAllBrokers: two brokers' guards over one
// store allow an agent its burst once in total, not once each; each agent
// has its own bucket. Each broker alone (the guards not shared: what
// several brokers did before) allows it twice.
func TestSharedPushBucketOnceForAllBrokers(t *testing.T) {
	for _, tc := range []struct {
		shared bool
		want   int
	}{
		{shared: true, want: 5},
		{shared: false, want: 10},
	} {
		t.Run(fmt.Sprintf("shared=%v", tc.shared), func(t *testing.T) {
			s := newSharedGuards(t, 60, 5)
			allowed := 0
			for i := range 20 {
				if s.allow(t, i%2, "alpha", tc.shared) == 0 {
					allowed++
				}
			}
			require.Equal(t, tc.want, allowed, "pushes allowed on A and B together")
			require.Zero(t, s.allow(t, 0, "beta", tc.shared), "another agent's bucket is its own")
		})
	}
}

// TestSharedPushBucketAnswersAsTheLocalOne: for the same sequence of
// pushes and pauses, the bucket kept in the store (asked alternately by
// two brokers) answers every push as the in-memory token bucket of one
// broker does: allowed or refused, and the same wait (to the microsecond:
// the in-memory bucket's float arithmetic is off by nanoseconds).
func TestSharedPushBucketAnswersAsTheLocalOne(t *testing.T) {
	// A step is a pause, then a push.
	type step struct{ pause time.Duration }
	steps := func(n int, pause time.Duration) []step {
		out := make([]step, n)
		for i := range out {
			out[i].pause = pause
		}
		return out
	}
	cat := func(parts ...[]step) []step {
		var out []step
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	for _, tc := range []struct {
		name             string
		perMinute, burst int
		steps            []step
	}{
		{"burst then refused", 60, 3, steps(6, 0)},
		{"refill one by one", 60, 3, cat(steps(4, 0), steps(6, 500*time.Millisecond), steps(3, time.Second))},
		{"full again after a long pause", 60, 3, cat(steps(5, 0), steps(1, time.Hour), steps(5, 0))},
		{"burst of one", 60, 1, cat(steps(3, 0), steps(4, 999*time.Millisecond), steps(2, time.Millisecond))},
		{"rate that does not divide a minute", 7, 4, cat(steps(6, 0), steps(8, 3*time.Second), steps(3, 9*time.Second))},
		{"fast rate, big burst", 6000, 100, cat(steps(120, 0), steps(50, 3*time.Millisecond), steps(30, 20*time.Millisecond))},
		{"defaults", teamconfig.DefaultAgentPushesPerMinute, teamconfig.DefaultAgentPushBurst, cat(steps(70, 10*time.Millisecond), steps(10, 700*time.Millisecond))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSharedGuards(t, tc.perMinute, tc.burst)
			local := newLoopGuard(teamconfig.LoopGuard{MaxHops: 3, AgentPushesPerMinute: tc.perMinute, AgentPushBurst: tc.burst}, func() time.Time { return s.clock })
			refused := 0
			for i, st := range tc.steps {
				s.clock = s.clock.Add(st.pause)
				want := local.allowLocal("alpha")
				got := s.allow(t, i%2, "alpha", true)
				require.Equal(t, want > 0, got > 0, "push %d allowed alike (waits %s, %s)", i, want, got)
				// rate.Limiter counts tokens in float64 and is off by
				// nanoseconds; the stored bucket counts whole ones.
				require.InDelta(t, want, got, float64(time.Microsecond), "push %d waits alike", i)
				if want > 0 {
					refused++
				}
			}
			require.Positive(t, refused, "the sequence reaches the limit")
		})
	}
}
