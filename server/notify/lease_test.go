package notify

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	apiv1 "svc/gen/svc/v1"
)

// hold makes the env's service the holder of the hooks lease as owner,
// as runLeased does when the store grants it.
func (e *policyEnv) hold(t *testing.T, owner string) bool {
	t.Helper()
	l, ok, err := e.st.TakeLease(context.Background(), LeaseName, owner, e.clock.Now(), LeaseTTL)
	require.NoError(t, err)
	if owner == e.s.lease.owner {
		e.s.lease.mu.Lock()
		e.s.lease.epoch = 0
		if ok {
			e.s.lease.epoch = l.Epoch
		}
		e.s.lease.mu.Unlock()
	}
	return ok
}

// A holder that paused past its lease while another broker took it over
// writes nothing when it wakes: its pass is refused in the transaction
// (the epoch changed), the queued copy stays for the new holder, and
// once it holds the lease again its pass delivers the copy once.
func TestHookLeaseFencesPausedHolder(t *testing.T) {
	e := newPolicyEnv(t)
	e.s.Clustered("a", 0)
	require.True(t, e.hold(t, "a"))
	e.endpoint(t, "q", &apiv1.NotificationPolicy{IfOffline: ptr("queue")}, "alice")
	r := e.post(t, "q", "", `{"n":1}`)
	require.Equal(t, "pending", r.Status)
	e.online(t, "alice")

	e.clock.Add(LeaseTTL + time.Second) // a pauses; its lease lapses
	require.True(t, e.hold(t, "b"), "b takes the lapsed lease over")
	_, err := e.s.Pass(context.Background())
	require.ErrorIs(t, err, errLeaseLost)
	require.Empty(t, e.hookMsgs(t, "alice", "q"), "the paused holder delivered nothing")
	require.Len(t, e.pendingRows(t), 1, "the copy waits for the holder")
	require.False(t, e.hold(t, "a"), "b holds it: a is refused")
	require.False(t, e.s.Holding())

	e.clock.Add(LeaseTTL + time.Second) // b died
	require.True(t, e.hold(t, "a"))
	require.True(t, e.s.Holding())
	e.pass(t)
	require.Len(t, e.hookMsgs(t, "alice", "q"), 1)
	require.Empty(t, e.pendingRows(t))
	e.pass(t)
	require.Len(t, e.hookMsgs(t, "alice", "q"), 1, "once")
}

// Another broker's report wakes the holder and nothing more: its pass
// decides from the presence summed across brokers, so a stale report
// neither flushes a queue for a member who detached nor releases held
// copies to a member working elsewhere.
func TestHookRemoteReachOnlyWakes(t *testing.T) {
	e := newPolicyEnv(t)
	e.s.Clustered("a", 0)
	require.True(t, e.hold(t, "a"))
	e.endpoint(t, "q", &apiv1.NotificationPolicy{IfOffline: ptr("queue")}, "alice")
	e.endpoint(t, "w", &apiv1.NotificationPolicy{IfBusy: ptr("wait"), MaxWaitMs: ptr(int32(60_000))}, "bob")
	e.online(t, "bob")
	e.activity("bob", stateWorking)
	e.post(t, "q", "", `{"n":1}`)
	e.post(t, "w", "", `{"n":2}`)
	e.pass(t)
	require.Len(t, e.pendingRows(t), 2, "alice offline, bob working")
	<-e.s.wake // drained: the report below must fill it

	e.s.RemoteReach() // "alice attached", "bob free": both stale
	select {
	case <-e.s.wake:
	default:
		t.Fatal("a report wakes the holder's loop")
	}
	e.pass(t)
	require.Empty(t, e.hookMsgs(t, "alice", "q"), "offline in the summed presence")
	require.Empty(t, e.hookMsgs(t, "bob", "w"), "working in the summed presence")
	require.Len(t, e.pendingRows(t), 2)

	e.online(t, "alice")
	e.activity("bob", stateIdle)
	e.pass(t)
	require.Len(t, e.hookMsgs(t, "alice", "q"), 1)
	require.Len(t, e.hookMsgs(t, "bob", "w"), 1)
}

// While presence may miss members attached on other brokers (NATS cut
// off, or not long back), a queued copy past its TTL does not expire and
// a held copy does not go out because its member looks free; the pass
// looks again a second later rather than at once; a held copy is still
// forced at maxWaitMs. Once the doubt ends both resolve as before.
func TestHookPresenceDoubt(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pol    *apiv1.NotificationPolicy
		hold   func(e *policyEnv)
		later  time.Duration // how long after the post the pass runs
		status string        // the receipt after a pass in doubt
	}{
		{
			name: "queue past its TTL", pol: &apiv1.NotificationPolicy{IfOffline: ptr("queue"), QueueTtlMs: ptr(int32(1000))},
			hold: func(*policyEnv) {}, later: 2 * time.Second, status: StatusPending,
		},
		{
			name: "held for a member who looks free", pol: &apiv1.NotificationPolicy{IfBusy: ptr("wait"), MaxWaitMs: ptr(int32(60_000))},
			hold: func(e *policyEnv) { e.online(t, "alice"); e.activity("alice", stateWorking) }, later: 31 * time.Second, status: StatusPending,
		},
		{
			name: "held past maxWaitMs", pol: &apiv1.NotificationPolicy{IfBusy: ptr("wait"), MaxWaitMs: ptr(int32(1000))},
			hold: func(e *policyEnv) { e.online(t, "alice"); e.activity("alice", stateWorking) }, later: 2 * time.Second, status: StatusDelivered,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newPolicyEnv(t)
			e.s.Clustered("a", 0)
			var doubt atomic.Int64
			doubt.Store(int64(15 * time.Second))
			e.s.PresenceDoubt(func() time.Duration { return time.Duration(doubt.Load()) })
			require.True(t, e.hold(t, "a"))
			e.endpoint(t, "x", tc.pol, "alice")
			tc.hold(e)
			r := e.post(t, "x", "", `{"n":1}`)
			require.Equal(t, StatusPending, r.Status)
			e.clock.Add(tc.later) // past the TTL; alice's activity lapsed
			next := e.pass(t)
			require.Equal(t, tc.status, e.receipt(t, r.ID).Status)
			if tc.status == StatusPending {
				require.Equal(t, e.clock.Now().Add(hookRetry), next, "looks again in a second, not at once")
			}

			doubt.Store(0)
			e.pass(t)
			require.NotEqual(t, StatusPending, e.receipt(t, r.ID).Status, "resolved once presence is complete")
			require.Empty(t, e.pendingRows(t))
		})
	}
}

// The holder's member list may lag a member just created on another
// broker: its loop drops that member's copies only when the store has no
// such member either. Alone, the list is the truth, as before.
func TestHookDropConfirmedInStore(t *testing.T) {
	for _, clustered := range []bool{true, false} {
		t.Run(fmt.Sprint("clustered=", clustered), func(t *testing.T) {
			e := newPolicyEnv(t)
			if clustered {
				e.s.Clustered("a", 0)
				require.True(t, e.hold(t, "a"))
			}
			e.endpoint(t, "q", &apiv1.NotificationPolicy{IfOffline: ptr("queue")}, "alice")
			r := e.post(t, "q", "", `{"n":1}`)
			require.Equal(t, StatusPending, r.Status)
			e.team.remove("alice") // this broker's list lags; the store has alice
			next := e.pass(t)
			if !clustered {
				require.Equal(t, StatusDropped, e.receipt(t, r.ID).Status)
				return
			}
			require.Equal(t, StatusPending, e.receipt(t, r.ID).Status, "alice is in the store")
			require.Len(t, e.pendingRows(t), 1)
			require.False(t, next.Before(e.clock.Now().Add(hookRetry)), "no pass every 10 ms meanwhile")

			require.NoError(t, e.st.DeleteMember(context.Background(), "alice"))
			e.pass(t)
			require.Equal(t, StatusDropped, e.receipt(t, r.ID).Status, "gone from the store too")
			require.Empty(t, e.pendingRows(t))
		})
	}
}

// A lease lost and taken again between two of the broker's ticks (at a
// new epoch) restarts the loop: the old one, which another broker may
// have overtaken meanwhile, does not go on under the new epoch.
func TestHookLeaseRetakenRestartsLoop(t *testing.T) {
	e := newPolicyEnv(t)
	var logs syncBuffer
	e.s.d.Log = slog.New(slog.NewTextHandler(&logs, nil))
	const ttl = 3 * time.Second // a tick every second
	e.s.Clustered("a", ttl)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	require.Eventually(t, e.s.Holding, 10*time.Second, 5*time.Millisecond)
	require.Contains(t, logs.String(), "epoch=1")

	// Between two ticks: a's lease lapses, b takes it, b's lapses.
	e.clock.Add(ttl + time.Second)
	require.True(t, e.hold(t, "b"))
	e.clock.Add(LeaseTTL + time.Second) // b's, taken for LeaseTTL
	require.Eventually(t, func() bool {
		return strings.Contains(logs.String(), `hooks scheduler runs on this broker" epoch=3`)
	}, 10*time.Second, 5*time.Millisecond, "a loop runs at the new epoch: %s", &logs)
	require.True(t, e.s.Holding())
}

// syncBuffer is a bytes.Buffer safe for a logger and a test at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Announce reports, from a broker that does not hold the lease, that
// its ingress wrote rows and the members attached there that queued
// copies wait for.
func TestHookAnnounce(t *testing.T) {
	e := newPolicyEnv(t)
	e.s.Clustered("b", 0)
	e.endpoint(t, "q", &apiv1.NotificationPolicy{IfOffline: ptr("queue")}, "alice", "bob")
	e.post(t, "q", "", `{"n":1}`)
	e.online(t, "alice")
	type report struct {
		member   string
		attached bool
	}
	got := make(chan report, 8)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); e.s.Announce(ctx, func(m string, a bool) { got <- report{m, a} }) }()
	e.s.Poke()
	var reports []report
	for len(reports) < 2 {
		select {
		case r := <-got:
			reports = append(reports, r)
		case <-time.After(10 * time.Second):
			t.Fatalf("no report: %v", reports)
		}
	}
	// The post wrote rows (a notice: member "") and alice is attached here
	// (bob, offline, is never reported).
	require.ElementsMatch(t, []report{{"", false}, {"alice", true}}, reports)
	cancel()
	<-done
}
