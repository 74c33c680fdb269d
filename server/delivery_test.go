package server

import (
	"context"
	"fmt"
	"svc/server/apierr"
	"svc/server/wire"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	apiv1 "svc/gen/svc/v1"
	"svc/server/auth"
	"svc/store"
)

// deliveryFixture is a running server with members admin (members.manage),
// agent and alice, and a clock the test moves.
type deliveryFixture struct {
	b     *Broker
	srv   *Server
	mu    sync.Mutex
	clock time.Time
}

func newDeliveryFixture(t *testing.T) *deliveryFixture {
	f := &deliveryFixture{clock: time.UnixMilli(1_800_000_000_000)}
	f.srv = startTestServer(t, mustMemStore(t), map[string][]string{"admin": {auth.MembersManage}, "agent": {}, "alice": {}}, Deps{}, WithNow(f.now))
	f.b = newBroker(f.srv.core, nil)
	return f
}

func (f *deliveryFixture) now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.clock
}

func (f *deliveryFixture) advance(d time.Duration) {
	f.mu.Lock()
	f.clock = f.clock.Add(d)
	f.mu.Unlock()
}

func as(name string, perms ...string) context.Context {
	return auth.WithPrincipal(context.Background(), &auth.Principal{Member: name, Permissions: perms, Via: auth.ViaBearer, TokenID: name})
}

func (f *deliveryFixture) dm(t *testing.T, from, to, body string) string {
	t.Helper()
	r, err := f.b.Push(as(from), &apiv1.PushRequest{To: ptr(to), Body: body})
	require.NoError(t, err)
	return r.GetMessage().GetId()
}

func (f *deliveryFixture) get(t *testing.T, name string) *apiv1.DeliveryState {
	t.Helper()
	r, err := f.b.GetDelivery(as(name), &apiv1.GetDeliveryRequest{Name: name})
	require.NoError(t, err)
	return r.GetDelivery()
}

func (f *deliveryFixture) update(t *testing.T, req *apiv1.UpdateDeliveryRequest) *apiv1.DeliveryState {
	t.Helper()
	req.Name = "agent"
	r, err := f.b.UpdateDelivery(as("agent"), req)
	require.NoError(t, err)
	got := f.get(t, "agent")
	require.Equal(t, r.GetDelivery().String(), got.String(), "an update answers what a read then shows")
	return got
}

// Who may read and write a delivery state, and what an update may say.
func TestDeliveryRefusals(t *testing.T) {
	f := newDeliveryFixture(t)
	id := f.dm(t, "alice", "agent", "one")
	session := auth.WithPrincipal(context.Background(), &auth.Principal{Member: "agent", Via: auth.ViaSession})
	tests := []struct {
		name string
		call func() error
		code apierr.Code
	}{
		{"read another's", func() error {
			_, err := f.b.GetDelivery(as("alice"), &apiv1.GetDeliveryRequest{Name: "agent"})
			return err
		}, apierr.CodeForbidden},
		{"read an unknown member", func() error {
			_, err := f.b.GetDelivery(as("admin", auth.MembersManage), &apiv1.GetDeliveryRequest{Name: "nobody"})
			return err
		}, apierr.CodeNotFound},
		{"update another's, even with members.manage", func() error {
			_, err := f.b.UpdateDelivery(as("admin", auth.MembersManage), &apiv1.UpdateDeliveryRequest{Name: "agent", Position: id})
			return err
		}, apierr.CodeForbidden},
		{"update with a session", func() error {
			_, err := f.b.UpdateDelivery(session, &apiv1.UpdateDeliveryRequest{Name: "agent", Position: id})
			return err
		}, apierr.CodeForbidden},
		{"position not an id", func() error {
			_, err := f.b.UpdateDelivery(as("agent"), &apiv1.UpdateDeliveryRequest{Name: "agent", Position: "x1"})
			return err
		}, apierr.CodeBadRequest},
		{"position zero", func() error {
			_, err := f.b.UpdateDelivery(as("agent"), &apiv1.UpdateDeliveryRequest{Name: "agent", Position: "0"})
			return err
		}, apierr.CodeBadRequest},
		{"position past the newest message", func() error {
			_, err := f.b.UpdateDelivery(as("agent"), &apiv1.UpdateDeliveryRequest{Name: "agent", Position: formatMessageID(1000)})
			return err
		}, apierr.CodeBadRequest},
		{"turn message past the newest message", func() error {
			_, err := f.b.UpdateDelivery(as("agent"), &apiv1.UpdateDeliveryRequest{Name: "agent", Turn: apiv1.TurnPhase_TURN_PHASE_STARTED, TurnMessageId: formatMessageID(1000)})
			return err
		}, apierr.CodeBadRequest},
		{"turn message without a start", func() error {
			_, err := f.b.UpdateDelivery(as("agent"), &apiv1.UpdateDeliveryRequest{Name: "agent", Turn: apiv1.TurnPhase_TURN_PHASE_ENDED, TurnMessageId: id})
			return err
		}, apierr.CodeBadRequest},
		{"unknown turn phase", func() error {
			_, err := f.b.UpdateDelivery(as("agent"), &apiv1.UpdateDeliveryRequest{Name: "agent", Turn: apiv1.TurnPhase(7)})
			return err
		}, apierr.CodeBadRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			requireCode(t, tc.call(), tc.code)
		})
	}
	_, err := f.srv.core.store.GetDelivery(context.Background(), "agent")
	require.ErrorIs(t, err, store.ErrNotFound, "nothing refused was stored")
	_, err = f.b.GetDelivery(as("admin", auth.MembersManage), &apiv1.GetDeliveryRequest{Name: "agent"})
	require.NoError(t, err, "members.manage reads another's")
}

// A runner's life as the broker sees it: never attached, attached, a turn
// started and ended, the position advanced; the backlog is offered only
// until the first acknowledgement.
func TestDeliveryLifecycle(t *testing.T) {
	f := newDeliveryFixture(t)
	st := f.get(t, "agent")
	require.Nil(t, st.Position)
	require.Nil(t, st.FirstAttachedAt, "never attached")
	require.False(t, st.GetTurnActive())
	require.Equal(t, formatMessageID(0), st.GetBacklogAfter(), "the backlog is every message since the member was created")
	require.Zero(t, st.GetBacklogOmitted())

	one := f.dm(t, "alice", "agent", "one")
	two := f.dm(t, "alice", "agent", "two")

	attachedAt := wire.MS(f.now())
	st = f.update(t, &apiv1.UpdateDeliveryRequest{})
	require.Equal(t, attachedAt, st.GetFirstAttachedAt(), "an empty update records the attach")
	require.Nil(t, st.Position)
	require.Equal(t, formatMessageID(0), st.GetBacklogAfter())

	f.advance(time.Second)
	st = f.update(t, &apiv1.UpdateDeliveryRequest{Turn: apiv1.TurnPhase_TURN_PHASE_STARTED, TurnMessageId: one})
	require.True(t, st.GetTurnActive())
	require.Equal(t, one, st.GetTurnMessageId())
	require.Equal(t, wire.MS(f.now()), st.GetTurnStartedAt())
	require.Equal(t, attachedAt, st.GetFirstAttachedAt())

	st = f.update(t, &apiv1.UpdateDeliveryRequest{Turn: apiv1.TurnPhase_TURN_PHASE_ENDED, Position: one})
	require.False(t, st.GetTurnActive())
	require.Nil(t, st.TurnMessageId)
	require.Nil(t, st.TurnStartedAt)
	require.Equal(t, one, st.GetPosition())
	require.Nil(t, st.BacklogAfter, "no backlog once the runner acknowledged a message")
	require.Zero(t, st.GetBacklogOmitted())

	st = f.update(t, &apiv1.UpdateDeliveryRequest{Turn: apiv1.TurnPhase_TURN_PHASE_STARTED})
	require.True(t, st.GetTurnActive(), "a turn with no message: the re-brief")
	require.Nil(t, st.TurnMessageId)

	st = f.update(t, &apiv1.UpdateDeliveryRequest{Turn: apiv1.TurnPhase_TURN_PHASE_ENDED, Position: two})
	require.Equal(t, two, st.GetPosition())
	st = f.update(t, &apiv1.UpdateDeliveryRequest{Position: one})
	require.Equal(t, two, st.GetPosition(), "never backwards")
}

// A first start replays at most the newest backlogMax messages of the last
// backlogAge, and says how many it left out.
func TestDeliveryBacklogBound(t *testing.T) {
	f := newDeliveryFixture(t)
	// Three messages from long ago, then backlogMax+5 recent ones; alice's
	// own messages and others' DMs do not count.
	for i := range 3 {
		f.dm(t, "alice", "agent", fmt.Sprintf("old %d", i))
	}
	f.dm(t, "agent", "alice", "the agent's own")
	f.advance(backlogAge + time.Hour)
	var ids []string
	for i := range backlogMax + 5 {
		ids = append(ids, f.dm(t, "alice", "agent", fmt.Sprintf("new %d", i)))
		if i == 2 {
			f.dm(t, "alice", "admin", "not the agent's")
		}
	}
	st := f.get(t, "agent")
	require.Equal(t, ids[4], st.GetBacklogAfter(), "the replay starts after the newest message left out")
	require.Equal(t, int32(3+5), st.GetBacklogOmitted())

	// The old ones alone are past the age bound.
	f2 := newDeliveryFixture(t)
	var old []string
	for i := range 3 {
		old = append(old, f2.dm(t, "alice", "agent", fmt.Sprintf("old %d", i)))
	}
	f2.advance(backlogAge + time.Second)
	st = f2.get(t, "agent")
	require.Equal(t, old[2], st.GetBacklogAfter())
	require.Equal(t, int32(3), st.GetBacklogOmitted())
}

// When a member's last runner stream closes, its live activity is idle at
// once; a stream that is not a runner's changes nothing.
func TestRunnerStreamCloseIdlesAtOnce(t *testing.T) {
	f := newDeliveryFixture(t)
	c := f.srv.core
	p := &auth.Principal{Member: "agent", Via: auth.ViaBearer, TokenID: "agent"}
	open := func(runner bool) *Feed {
		feed, err := c.attach(context.Background(), p, 0, false)
		feed, err = c.runnerFeed(feed, err, runner, p.Member)
		require.NoError(t, err)
		return feed
	}
	state := func() string {
		for _, pr := range c.presence.list(c.hub.Connected, func(string) (*apiv1.Role, bool) { return nil, true }) {
			if pr.GetName() == "agent" {
				return pr.GetActivity()
			}
		}
		return ""
	}
	pokes := 0
	c.presence.onActivity = func(string) { pokes++ }

	r1, r2, other := open(true), open(true), open(false)
	c.presence.setActivity("agent", stateWorking)
	require.Equal(t, stateWorking, state())
	other.Close()
	require.Equal(t, stateWorking, state(), "not a runner's stream")
	r1.Close()
	require.Equal(t, stateWorking, state(), "another runner stream is open")
	pokes = 0
	r2.Close()
	require.Empty(t, state(), "the last runner stream closed: idle at once")
	require.Equal(t, 1, pokes, "the change is reported like a posted one")
	r2.Close()
	require.Equal(t, 1, pokes, "a second Close counts nothing")

	// A new runner counts afresh; blocked goes idle too.
	r3 := open(true)
	c.presence.setActivity("agent", stateBlocked)
	require.Equal(t, stateBlocked, state())
	r3.Close()
	require.Empty(t, state())
	require.Empty(t, c.presence.runners, "no count is left behind")
}
