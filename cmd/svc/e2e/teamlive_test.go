package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"

	apiv1 "svc/gen/svc/v1"
)

// The team stream (GET /team/stream, Broker.StreamTeam; docs/API.md, "Team
// stream"): a snapshot of every member's presence, then presence, live
// activity, channel and objective changes, pushed.

// openTeam opens GET /team/stream with opts and reads the ready event.
func (p *proc) openTeam(t testing.TB, member string, opts ...reqOpt) *sseStream {
	t.Helper()
	s := p.openSSE(t, "/team/stream", sseOpts{}, opts...)
	s.requireReady(t, member)
	return s
}

// nextTeam returns the next team event's JSON, checking its framing.
func (s *sseStream) nextTeam(t testing.TB) obj {
	t.Helper()
	ev := s.next(t)
	require.Equal(t, "team", ev.event, "frame %q", ev.lines)
	require.Len(t, ev.data, 1, "one data: line: %q", ev.lines)
	require.NotEmpty(t, ev.id, "a team frame carries id: %q", ev.lines)
	var o obj
	require.NoError(t, json.Unmarshal([]byte(ev.data[0]), &o), "data %q", ev.data[0])
	require.Len(t, o, 1, "one event per frame: %v", o)
	return o
}

// snapshotOf reads the first team event, which must be the snapshot, and
// returns its members by name.
func (s *sseStream) snapshotOf(t testing.TB) map[string]obj {
	t.Helper()
	ev := s.nextTeam(t)
	snap, ok := ev["snapshot"].(obj)
	require.True(t, ok, "the first team event is the snapshot: %v", ev)
	out := map[string]obj{}
	for _, m := range listOf(t, snap, "members") {
		out[m["name"].(string)] = m
	}
	return out
}

// waitTeam reads team events until one satisfies match and returns it;
// skipped holds every event read before it. Bounded by streamWait per
// event.
func (s *sseStream) waitTeam(t testing.TB, what string, match func(obj) bool) (got obj, skipped []obj) {
	t.Helper()
	deadline := time.Now().Add(2 * streamWait)
	for time.Now().Before(deadline) {
		ev := s.nextTeam(t)
		if match(ev) {
			return ev, skipped
		}
		skipped = append(skipped, ev)
	}
	t.Fatalf("no team event %s; read %v", what, skipped)
	return nil, nil
}

// presenceIs matches a presence event of name whose fields include want.
func presenceIs(name string, want obj) func(obj) bool {
	return func(ev obj) bool {
		p, ok := ev["presence"].(obj)
		if !ok || p["name"] != name {
			return false
		}
		for k, v := range want {
			if p[k] != v {
				return false
			}
		}
		return true
	}
}

// kindIs matches an event of kind (channel, objective) with op.
func kindIs(kind, op string) func(obj) bool {
	return func(ev obj) bool {
		c, ok := ev[kind].(obj)
		return ok && c["op"] == op
	}
}

func TestTeamStream(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	adminTok := p.adminToken(t)
	admin := bearer(adminTok)
	d := restDriver{p}
	bob := createMember(t, d, admin, "bob")
	carol := createMember(t, d, admin, "carol")

	s := p.openTeam(t, "carol", withBearer(carol))
	snap := s.snapshotOf(t)
	require.Len(t, snap, 3, "every member: %v", snap)
	require.Equal(t, obj{"name": "bob", "connected": float64(0), "state": "idle", "agent": false, "gone": false}, snap["bob"],
		"a member never seen: offline, idle, not an agent")

	// A runner connects for bob: bob is online, and an agent from now on.
	run := p.subscribeSSE(t, bob, "bob", "&runner=1")
	s.waitTeam(t, "bob online", presenceIs("bob", obj{"connected": float64(1)}))
	s.waitTeam(t, "bob an agent", presenceIs("bob", obj{"agent": true}))

	// Its live activity.
	mustCall(t, d, bearer(bob), "SetActivity", obj{"state": "working"})
	s.waitTeam(t, "bob working", presenceIs("bob", obj{"state": "working", "connected": float64(1), "agent": true}))
	mustCall(t, d, bearer(bob), "SetActivity", obj{"state": "blocked"})
	s.waitTeam(t, "bob blocked", presenceIs("bob", obj{"state": "blocked"}))

	// Its runner gone: offline, idle at once, still an agent.
	run.close()
	s.waitTeam(t, "bob offline and idle", presenceIs("bob", obj{"connected": float64(0), "state": "idle", "agent": true}))

	// Channels: created, joined, renamed, archived; carol sees each, as
	// the channel list shows every member every channel.
	mustCall(t, d, admin, "CreateChannel", obj{"slug": "ops"})
	ev, _ := s.waitTeam(t, "channel created", kindIs("channel", "created"))
	ch := ev["channel"].(obj)["channel"].(obj)
	require.Equal(t, "ops", ch["slug"])
	require.Equal(t, "admin", ch["createdBy"])
	id := ch["id"].(string)
	mustCall(t, d, bearer(bob), "AddChannelMember", obj{"channel": "ops", "member": "bob"})
	ev, _ = s.waitTeam(t, "bob joined", kindIs("channel", "members"))
	require.Equal(t, "bob", ev["channel"].(obj)["member"])
	require.Equal(t, "member", ev["channel"].(obj)["role"])
	mustCall(t, d, bearer(bob), "RemoveChannelMember", obj{"channel": "ops", "name": "bob"})
	ev, _ = s.waitTeam(t, "bob left", kindIs("channel", "members"))
	require.Equal(t, "bob", ev["channel"].(obj)["member"])
	require.Equal(t, "", ev["channel"].(obj)["role"], "left: no role")
	mustCall(t, d, admin, "RenameChannel", obj{"channel": "ops", "slug": "ops2"})
	ev, _ = s.waitTeam(t, "channel renamed", kindIs("channel", "updated"))
	require.Equal(t, obj{"id": id, "slug": "ops2"}, pick(ev["channel"].(obj)["channel"].(obj), "id", "slug"))
	mustCall(t, d, admin, "ArchiveChannel", obj{"channel": "ops2"})
	ev, _ = s.waitTeam(t, "channel archived", kindIs("channel", "archived"))
	require.NotNil(t, ev["channel"].(obj)["channel"].(obj)["archivedAt"])

	// Objectives: created and changed, as GET /objectives shows them.
	o := mustCall(t, d, admin, "CreateObjective", obj{"title": "Ship", "outcome": "shipped", "assignee": "bob"})
	ev, _ = s.waitTeam(t, "objective created", kindIs("objective", "created"))
	require.Equal(t, o["id"], ev["objective"].(obj)["objective"].(obj)["id"])
	require.Equal(t, "active", ev["objective"].(obj)["objective"].(obj)["status"])
	mustCall(t, d, bearer(bob), "UpdateObjective", obj{"id": o["id"], "status": "blocked", "blockReason": "waiting"})
	ev, _ = s.waitTeam(t, "objective blocked", kindIs("objective", "updated"))
	require.Equal(t, "blocked", ev["objective"].(obj)["objective"].(obj)["status"])

	// What the stream never carries: messages (a DM to carol, a post in
	// the objective's discussion, which carol may not read).
	mustCall(t, d, admin, "Push", obj{"to": "carol", "body": "a private word"})
	mustCall(t, d, admin, "DiscussObjective", obj{"id": o["id"], "body": "thread only"})
	mustCall(t, d, admin, "CreateChannel", obj{"slug": "marker"})
	_, skipped := s.waitTeam(t, "the marker channel", kindIs("channel", "created"))
	require.Empty(t, skipped, "no event for a message or a discussion post")

	// Members come and go.
	createMember(t, d, admin, "dave")
	s.waitTeam(t, "dave created", presenceIs("dave", obj{"connected": float64(0), "gone": false}))
	mustCall(t, d, admin, "DeleteMember", obj{"name": "dave"})
	s.waitTeam(t, "dave gone", presenceIs("dave", obj{"gone": true}))

	// The roster says who is an agent, and so does a new stream.
	roster := mustCall(t, d, admin, "GetRoster", nil)
	agents := map[string]any{}
	for _, tm := range listOf(t, roster, "teammates") {
		agents[tm["name"].(string)] = tm["agent"]
	}
	require.Equal(t, map[string]any{"admin": false, "bob": true, "carol": false}, agents)
	snap = p.openTeam(t, "admin", withBearer(adminTok)).snapshotOf(t)
	require.Equal(t, true, snap["bob"]["agent"])
	require.Equal(t, false, snap["carol"]["agent"])
}

// An agent stays one across a restart, even after kill -9: the mark is
// stored before the stream announces it.
func TestTeamStreamAgentSurvivesRestart(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{dbPath: t.TempDir() + "/svc.db"})
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	bob := createMember(t, d, admin, "bob")
	s := p.openTeam(t, "bob", withBearer(bob))
	s.snapshotOf(t)
	p.subscribeSSE(t, bob, "bob", "&runner=1").close()
	s.waitTeam(t, "bob an agent", presenceIs("bob", obj{"agent": true}))
	s.close()

	// Killed, not stopped: the mark was stored before it was announced.
	p.kill(t)
	p = p.restart(t)
	snap := p.openTeam(t, "bob", withBearer(bob)).snapshotOf(t)
	require.Equal(t, true, snap["bob"]["agent"], "still an agent, offline, after a restart")
	require.Equal(t, float64(0), snap["bob"]["connected"])
}

// A non-idle state nobody refreshes lapses to idle after 30 s, and the
// stream says so (the roster reads it idle from then on).
func TestTeamStreamActivityLapses(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	bob := createMember(t, d, admin, "bob")
	s := p.openTeam(t, "bob", withBearer(bob))
	s.snapshotOf(t)
	mustCall(t, d, bearer(bob), "SetActivity", obj{"state": "working"})
	s.waitTeam(t, "bob working", presenceIs("bob", obj{"state": "working"}))
	set := time.Now()
	select {
	case ev, ok := <-s.events:
		require.True(t, ok, "stream ended: %v", s.endErr())
		var o obj
		require.Equal(t, "team", ev.event)
		require.NoError(t, json.Unmarshal([]byte(ev.data[0]), &o))
		require.True(t, presenceIs("bob", obj{"state": "idle"})(o), "the next event is the lapse: %v", o)
		require.GreaterOrEqual(t, time.Since(set), 25*time.Second, "not before the 30 s lapse")
	case <-time.After(30*time.Second + streamWait):
		t.Fatal("no lapse to idle within 30 s")
	}
	require.NotContains(t, presenceOf(t, p, admin, "bob"), "activity", "the roster reads idle too")
}

// Revoking the credential a stream was opened with ends it: a session by
// logout, a token by revocation. Deleting the member ends every one.
func TestTeamStreamEndsOnRevoke(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	createMember(t, d, admin, "bob")
	u := enroll(t, d, admin, "bob")
	sess := login(t, d, u)

	bySession := p.openTeam(t, "bob", withSession(sess))
	bySession.snapshotOf(t)
	mustCall(t, d, sessionCred(sess), "Logout", nil)
	bySession.requireEnds(t)
	p.sseFail(t, "/team/stream", "unauthenticated", withSession(sess))

	rotated := mustCall(t, d, admin, "RotateToken", obj{"name": "bob"})
	tok := rotated["token"].(string)
	byToken := p.openTeam(t, "bob", withBearer(tok))
	byToken.snapshotOf(t)
	mustCall(t, d, admin, "RevokeToken", obj{"name": "bob", "id": rotated["tokenInfo"].(obj)["id"]})
	byToken.requireEnds(t)
	p.sseFail(t, "/team/stream", "unauthenticated", withBearer(tok))
	p.sseFail(t, "/team/stream", "unauthenticated")
}

// The same stream over gRPC: ready, the snapshot, then changes.
func TestTeamStreamGRPC(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	tok := p.adminToken(t)
	d := restDriver{p}
	ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+tok))
	defer cancel()
	st, err := p.broker(t).StreamTeam(ctx, &apiv1.StreamTeamRequest{})
	require.NoError(t, err)
	first, err := st.Recv()
	require.NoError(t, err)
	require.Equal(t, "admin", first.GetReady().GetMember())
	snap, err := st.Recv()
	require.NoError(t, err)
	require.Len(t, snap.GetSnapshot().GetMembers(), 1, "%v", protojson.Format(snap))
	mustCall(t, d, bearer(tok), "CreateChannel", obj{"slug": "ops"})
	for {
		ev, err := st.Recv()
		require.NoError(t, err)
		if c := ev.GetChannel(); c != nil {
			require.Equal(t, "created", c.GetOp())
			require.Equal(t, "ops", c.GetChannel().GetSlug())
			return
		}
	}
}
