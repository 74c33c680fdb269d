package server

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	apiv1 "svc/gen/svc/v1"
	"svc/server/apierr"
	"svc/server/auth"
	"svc/server/hub"
	"svc/store"
)

// nextTeam reads f's next event, bounded.
func nextTeam(t *testing.T, f *Feed) *apiv1.StreamTeamResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ev, err := f.Next(ctx, nil)
	require.NoError(t, err)
	require.NotNil(t, ev)
	return ev.Value.(*apiv1.StreamTeamResponse)
}

// noTeamEvent requires that f has nothing ready.
func noTeamEvent(t *testing.T, f *Feed) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	ev, err := f.Next(ctx, nil)
	require.ErrorIs(t, err, context.DeadlineExceeded, "unexpected event %v", ev)
}

func bobToken() *auth.Principal {
	return &auth.Principal{Member: "bob", Via: auth.ViaBearer, TokenID: "tok-bob"}
}

// The stream's first event is the snapshot; a change made before it is in
// it and never delivered again; later ones follow in order.
func TestTeamStreamSnapshotThenChanges(t *testing.T) {
	b, _ := mustBroker(t)
	c := b.core
	c.presence.setActivity("admin", stateWorking) // before the stream: in the snapshot
	f, err := c.attachTeam(bobToken())
	require.NoError(t, err)
	defer f.Close()

	snap := nextTeam(t, f).GetSnapshot()
	require.NotNil(t, snap)
	got := map[string]*apiv1.TeamMember{}
	for _, m := range snap.GetMembers() {
		got[m.GetName()] = m
	}
	require.Len(t, got, 2)
	require.Equal(t, stateWorking, got["admin"].GetState())
	require.Equal(t, stateIdle, got["bob"].GetState())
	noTeamEvent(t, f)

	// Presence: a chat stream of admin's.
	sub, err := c.hub.Subscribe("admin", "token:x")
	require.NoError(t, err)
	p := nextTeam(t, f).GetPresence()
	require.Equal(t, "admin", p.GetName())
	require.Equal(t, int32(1), p.GetConnected())
	sub.Close()
	require.Equal(t, int32(0), nextTeam(t, f).GetPresence().GetConnected())

	// Channel and objective changes, in the order made.
	c.channelChanged(channelCreated, store.Channel{ID: "c1", Slug: "ops", CreatedBy: "admin"}, "", "")
	c.objectiveChanged(objectiveUpdated, store.Objective{ID: "o1", Status: store.StatusBlocked})
	ch := nextTeam(t, f).GetChannel()
	require.Equal(t, "created", ch.GetOp())
	require.Equal(t, "ops", ch.GetChannel().GetSlug())
	o := nextTeam(t, f).GetObjective()
	require.Equal(t, "updated", o.GetOp())
	require.Equal(t, store.StatusBlocked, o.GetObjective().GetStatus())

	// A deleted member reads gone.
	c.presenceChanged("nobody")
	require.True(t, nextTeam(t, f).GetPresence().GetGone())
}

// Changes published at once from many goroutines reach every stream
// complete and in one order: numbering and publishing are one step.
func TestTeamStreamConcurrentChangesInOrder(t *testing.T) {
	b, _ := mustBroker(t)
	c := b.core
	f1, err := c.attachTeam(bobToken())
	require.NoError(t, err)
	defer f1.Close()
	f2, err := c.attachTeam(&auth.Principal{Member: "admin", Via: auth.ViaBearer, TokenID: "tok-admin"})
	require.NoError(t, err)
	defer f2.Close()
	nextTeam(t, f1)
	nextTeam(t, f2)

	const writers, each = 8, 20
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range each {
				c.presenceChanged("bob")
			}
		})
	}
	wg.Wait()
	read := func(f *Feed) []int64 {
		var seqs []int64
		for range writers * each {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			ev, err := f.Next(ctx, nil)
			cancel()
			require.NoError(t, err)
			seqs = append(seqs, ev.Seq)
		}
		return seqs
	}
	s1, s2 := read(f1), read(f2)
	require.Equal(t, s1, s2, "one order for every stream")
	for i := 1; i < len(s1); i++ {
		require.Equal(t, s1[i-1]+1, s1[i], "no change lost or reordered")
	}
	noTeamEvent(t, f1)
}

// Revoking the credential a team stream was opened with ends it; another
// credential's stream stays.
func TestTeamStreamEndsWithItsCredential(t *testing.T) {
	b, _ := mustBroker(t)
	c := b.core
	f, err := c.attachTeam(bobToken())
	require.NoError(t, err)
	defer f.Close()
	other, err := c.attachTeam(&auth.Principal{Member: "bob", Via: auth.ViaBearer, TokenID: "tok-other"})
	require.NoError(t, err)
	defer other.Close()
	nextTeam(t, f)
	nextTeam(t, other)

	c.disconnect("bob", func(cred string) bool { return cred == "token:tok-bob" })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = f.Next(ctx, nil)
	require.Error(t, err)
	require.NotErrorIs(t, err, context.DeadlineExceeded, "the stream ended, it did not just go quiet")
	c.presenceChanged("admin")
	require.Equal(t, "admin", nextTeam(t, other).GetPresence().GetName())
}

// A slow reader is cut off, not waited for.
func TestTeamStreamSlowReaderCut(t *testing.T) {
	b, _ := mustBroker(t)
	c := b.core
	f, err := c.attachTeam(bobToken())
	require.NoError(t, err)
	defer f.Close()
	nextTeam(t, f)
	for range hub.DefaultBuffer + 1 {
		c.presenceChanged("admin")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = f.Next(ctx, nil)
	require.ErrorIs(t, err, errFellBehind)
}

// A non-idle state announces its lapse: the timer armed at the report
// fires activityTTL later, and the state then reads idle. A refresh
// re-arms it; idle disarms it.
func TestPresenceLapseAnnounced(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	pr := newPresence(func() time.Time { return now })
	var fire []func()
	var waits []time.Duration
	pr.afterFunc = func(d time.Duration, f func()) *time.Timer {
		waits = append(waits, d)
		fire = append(fire, f)
		return time.NewTimer(time.Hour) // stands in; Stop works on it
	}
	var changed []string
	pr.onChange = func(m string) { changed = append(changed, m) }

	tests := []struct {
		name      string
		state     string
		armed     bool
		announced bool
	}{
		{name: "working arms", state: stateWorking, armed: true, announced: true},
		{name: "a refresh re-arms, and is no news", state: stateWorking, armed: true},
		{name: "blocked arms", state: stateBlocked, armed: true, announced: true},
		{name: "idle disarms", state: stateIdle, announced: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before, told := len(fire), len(changed)
			pr.setActivity("alice", tc.state)
			require.Equal(t, tc.announced, len(changed) == told+1, "announced")
			require.Equal(t, tc.armed, len(fire) == before+1)
			_, armed := pr.lapses["alice"]
			require.Equal(t, tc.armed, armed)
			require.Equal(t, "alice", changed[len(changed)-1], "the report itself is a change")
		})
	}
	require.Equal(t, []time.Duration{activityTTL, activityTTL, activityTTL}, waits)

	pr.setActivity("alice", stateWorking)
	require.Equal(t, stateWorking, pr.state("alice", 1))
	now = now.Add(activityTTL)
	n := len(changed)
	fire[len(fire)-1]()
	require.Equal(t, []string{"alice"}, changed[n:], "the lapse is announced")
	require.Equal(t, stateIdle, pr.state("alice", 1), "and reads idle")
	require.Empty(t, pr.lapses)
}

// A runner connecting makes its member an agent: stored by member id, so
// it holds across a restart, and a name created again is no agent.
func TestRunnerMakesAnAgent(t *testing.T) {
	b, _ := mustBroker(t)
	c := b.core
	f, err := c.attachTeam(bobToken())
	require.NoError(t, err)
	defer f.Close()
	nextTeam(t, f)
	bob, ok := c.team.Member("bob")
	require.True(t, ok)
	require.False(t, c.agents.is(bob))

	c.runnerConnected(context.Background(), "bob")
	require.True(t, c.agents.is(bob))
	p := nextTeam(t, f).GetPresence()
	require.Equal(t, "bob", p.GetName())
	require.True(t, p.GetAgent())
	c.runnerConnected(context.Background(), "bob")
	noTeamEvent(t, f) // once only

	again := newAgentSet()
	require.NoError(t, again.load(context.Background(), c.store, c.team.Members()))
	require.True(t, again.is(bob), "stored")
	admin, _ := c.team.Member("admin")
	require.False(t, again.is(admin))
	bob.ID += "-new"
	require.False(t, again.is(bob), "another member of the name")

	r, err := b.GetRoster(context.Background(), &apiv1.GetRosterRequest{})
	require.NoError(t, err)
	agents := map[string]bool{}
	for _, tm := range r.GetTeammates() {
		require.NotNil(t, tm.Agent, "set for every teammate in the roster")
		agents[tm.GetName()] = tm.GetAgent()
	}
	require.Equal(t, map[string]bool{"admin": false, "bob": true}, agents)
}

// A pending approval makes a connected member read blocked, and the
// stream says so when it starts and when it ends.
func TestTeamStreamApprovalBlocks(t *testing.T) {
	b, _ := mustBroker(t)
	c := b.core
	sub, err := c.hub.Subscribe("bob", "token:x")
	require.NoError(t, err)
	defer sub.Close()
	f, err := c.attachTeam(bobToken())
	require.NoError(t, err)
	defer f.Close()
	nextTeam(t, f)

	c.approvals.add("a1", "bob", time.Now().Add(time.Hour))
	require.Equal(t, stateBlocked, nextTeam(t, f).GetPresence().GetState())
	c.approvals.add("a2", "bob", time.Now().Add(time.Hour))
	noTeamEvent(t, f) // still blocked: nothing to say
	c.approvals.remove("a1")
	noTeamEvent(t, f)
	c.approvals.remove("a2")
	require.Equal(t, stateIdle, nextTeam(t, f).GetPresence().GetState())
}

// A member holds at most the per-member bound of team streams; closing
// one gives its place back.
func TestTeamStreamBoundPerMember(t *testing.T) {
	srv := startTestServer(t, mustMemStore(t), map[string][]string{"bob": nil}, Deps{}, WithMaxStreamsPerMember(2))
	c := srv.core
	f1, err := c.attachTeam(bobToken())
	require.NoError(t, err)
	f2, err := c.attachTeam(bobToken())
	require.NoError(t, err)
	defer f2.Close()
	_, err = c.attachTeam(bobToken())
	requireCode(t, err, apierr.CodeRateLimited)
	f1.Close()
	f3, err := c.attachTeam(bobToken())
	require.NoError(t, err, "a closed stream's place is free again")
	f3.Close()
}
