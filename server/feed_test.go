package server

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	apiv1 "svc/gen/svc/v1"
	"svc/server/auth"
	"svc/server/hub"
)

var bobPrincipal = &auth.Principal{Member: "bob", Via: auth.ViaBearer, TokenID: "t1"}

func TestFeedReplaysThenGoesLiveWithoutGapsOrRepeats(t *testing.T) {
	st := mustMemStore(t)
	b := &core{store: st, hub: hub.New()}
	m := mustMessenger(t, st, b.hub)
	send := func(body string) int64 {
		msg, pm := dm("alice", "bob", body)
		out, _, err := m.send(context.Background(), msg, pm)
		require.NoError(t, err)
		n, err := ParseMessageID(out.GetId())
		require.NoError(t, err)
		return n
	}
	var all []int64
	for i := range replayPage + 20 { // more than one replay page
		all = append(all, send("before "+string(rune('a'+i%26))))
	}
	// Another member's DM never shows up in bob's feed.
	other, pm := dm("alice", "carol", "not for bob")
	_, _, err := m.send(context.Background(), other, pm)
	require.NoError(t, err)

	resumeAfter := all[9]
	f, err := b.attach(context.Background(), bobPrincipal, resumeAfter, true)
	require.NoError(t, err)
	defer f.Close()
	// Committed after the subscription but before the replay reaches them:
	// they are both in the store and in the live buffer.
	for range 5 {
		all = append(all, send("during"))
	}
	var got []int64
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for len(got) < len(all)-10 {
		e, err := f.Next(ctx, nil)
		require.NoError(t, err)
		got = append(got, e.Seq)
		if len(got) == 100 {
			all = append(all, send("live")) // arrives while replaying
		}
	}
	require.Equal(t, all[10:], got)
	require.Nil(t, f.Buffered(), "nothing repeated after the last message")
}

func TestFeedResumingPastTheNewestIDReplaysTheStore(t *testing.T) {
	st := mustMemStore(t)
	b := &core{store: st, hub: hub.New()}
	m := mustMessenger(t, st, b.hub)
	for _, body := range []string{"one", "two"} {
		msg, pm := dm("alice", "bob", body)
		_, _, err := m.send(context.Background(), msg, pm)
		require.NoError(t, err)
	}
	// A client that saw id 500 of a store since reset (an in-memory broker
	// restarted) gets everything this store has, then live messages.
	f, err := b.attach(context.Background(), bobPrincipal, 500, true)
	require.NoError(t, err)
	defer f.Close()
	msg, pm := dm("alice", "bob", "three")
	_, _, err = m.send(context.Background(), msg, pm)
	require.NoError(t, err)
	var got []string
	for range 3 {
		e, err := f.Next(context.Background(), nil)
		require.NoError(t, err)
		got = append(got, e.Value.(*apiv1.Message).GetBody())
	}
	require.Equal(t, []string{"one", "two", "three"}, got)
}

func TestFeedWithoutResumeIsLiveOnly(t *testing.T) {
	st := mustMemStore(t)
	b := &core{store: st, hub: hub.New()}
	m := mustMessenger(t, st, b.hub)
	// A writer is answered before the fan-out: wait for "old" to be
	// published, or it could reach a feed attached after the answer.
	probe, err := b.hub.Subscribe("bob", "")
	require.NoError(t, err)
	defer probe.Close()
	msg, pm := dm("alice", "bob", "old")
	_, _, err = m.send(context.Background(), msg, pm)
	require.NoError(t, err)
	nextEvent(t, probe, 10*time.Second)
	f, err := b.attach(context.Background(), bobPrincipal, 0, false)
	require.NoError(t, err)
	defer f.Close()
	msg, pm = dm("alice", "bob", "new")
	_, _, err = m.send(context.Background(), msg, pm)
	require.NoError(t, err)
	e, err := f.Next(context.Background(), nil)
	require.NoError(t, err)
	require.Equal(t, "new", e.Value.(*apiv1.Message).GetBody())
}

func TestFeedReportsFallingBehindAndShutdown(t *testing.T) {
	st := mustMemStore(t)
	b := &core{store: st, hub: hub.New(hub.WithBuffer(2))}
	f, err := b.attach(context.Background(), bobPrincipal, 0, false)
	require.NoError(t, err)
	b.hub.Publish(hub.NewEvent(1, &apiv1.Message{}), false, "alice", []string{"bob"})
	e, err := f.Next(context.Background(), nil)
	require.NoError(t, err)
	require.Equal(t, int64(1), e.Seq)
	for seq := int64(2); seq <= 4; seq++ {
		b.hub.Publish(hub.NewEvent(seq, &apiv1.Message{}), false, "alice", []string{"bob"})
	}
	// Cut off with 2 and 3 still queued: the feed ends at once rather than
	// deliver them (the reader resumes after 1 from the store).
	require.Nil(t, f.Buffered())
	_, err = f.Next(context.Background(), nil)
	require.ErrorIs(t, err, errFellBehind)
	require.Equal(t, cutSlowReader, f.cutReason())

	g, err := b.attach(context.Background(), bobPrincipal, 0, false)
	require.NoError(t, err)
	tick := make(chan time.Time, 1)
	tick <- time.Now()
	e, err = g.Next(context.Background(), tick)
	require.NoError(t, err)
	require.Nil(t, e, "a tick returns nothing so the caller can ping")
	b.hub.Close()
	_, err = g.Next(context.Background(), nil)
	require.ErrorIs(t, err, errShuttingDown)
	_, err = b.attach(context.Background(), bobPrincipal, 0, false)
	require.ErrorIs(t, err, errShuttingDown)
}

// A member deleted and created again under its name sees nothing that was
// addressed to the earlier member, in history or in a replay, even when
// the clock stepped back between the two: the commit order decides, not
// the time.
func TestRecreatedMemberByCommitOrder(t *testing.T) {
	var (
		mu  sync.Mutex
		now = time.UnixMilli(1_800_000_000_000)
	)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	srv := startTestServer(t, mustMemStore(t), map[string][]string{"admin": {auth.MembersManage}, "alice": {}, "bob": {}}, Deps{}, WithNow(clock))
	b := newBroker(srv.core, nil)
	as := func(name string, perms ...string) context.Context {
		return auth.WithPrincipal(context.Background(), &auth.Principal{Member: name, Permissions: perms, Via: auth.ViaBearer, TokenID: name})
	}
	admin := as("admin", auth.MembersManage)
	_, err := b.Push(as("bob"), &apiv1.PushRequest{To: ptr("alice"), Body: "for the first alice"})
	require.NoError(t, err)

	_, err = b.DeleteMember(admin, &apiv1.DeleteMemberRequest{Name: "alice"})
	require.NoError(t, err)
	mu.Lock()
	now = now.Add(-time.Hour) // the clock steps back
	mu.Unlock()
	_, err = b.CreateMember(admin, &apiv1.CreateMemberRequest{Name: "alice"})
	require.NoError(t, err)
	_, err = b.Push(as("bob"), &apiv1.PushRequest{To: ptr("alice"), Body: "for the new alice"})
	require.NoError(t, err)

	bodies := func(msgs []*apiv1.Message) []string {
		var out []string
		for _, m := range msgs {
			out = append(out, m.GetBody())
		}
		return out
	}
	for _, req := range []*apiv1.HistoryRequest{{With: "bob"}, {Thread: dmThread("alice", "bob")}} {
		h, err := b.History(as("alice"), req)
		require.NoError(t, err)
		require.Equal(t, []string{"for the new alice"}, bodies(h.GetMessages()), "history %v", req)
	}
	f, err := srv.core.attach(context.Background(), &auth.Principal{Member: "alice", Via: auth.ViaBearer, TokenID: "alice"}, 0, true)
	require.NoError(t, err)
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	e, err := f.Next(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, "for the new alice", e.Value.(*apiv1.Message).GetBody(), "a replay from the start skips the earlier member's messages")
}
