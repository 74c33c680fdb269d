package notify

import (
	"context"
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

// The holder flushes a member's queue when another broker reports the
// member attached there, for remoteReach; a report of a name off the team
// is dropped.
func TestHookRemoteReach(t *testing.T) {
	e := newPolicyEnv(t)
	e.s.Clustered("a", 0)
	require.True(t, e.hold(t, "a"))
	e.endpoint(t, "q", &apiv1.NotificationPolicy{IfOffline: ptr("queue")}, "alice")
	e.post(t, "q", "", `{"n":1}`)
	e.pass(t)
	require.Empty(t, e.hookMsgs(t, "alice", "q"), "offline everywhere")

	e.s.RemoteReach("nobody", true)
	require.Empty(t, e.s.lease.attached, "a name off the team is not kept")

	e.s.RemoteReach("alice", true)
	e.clock.Add(remoteReach) // too late: the report lapsed
	e.pass(t)
	require.Empty(t, e.hookMsgs(t, "alice", "q"))

	e.s.RemoteReach("alice", true)
	e.pass(t)
	require.Len(t, e.hookMsgs(t, "alice", "q"), 1, "attached on another broker")
}

// Announce reports, from a broker that does not hold the lease, the
// members attached there that queued copies wait for.
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
	select {
	case r := <-got:
		require.Equal(t, report{"alice", true}, r, "alice is attached here (bob, offline, is never reported)")
	case <-time.After(10 * time.Second):
		t.Fatal("no report")
	}
	cancel()
	<-done
}
