package server

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	apiv1 "svc/gen/svc/v1"
	"svc/server/auth"
	"svc/server/hub"
	"svc/server/teamconfig"
	"svc/store"
)

// The team stream (GET /team/stream, Broker.StreamTeam): what the team
// looks like to a signed-in member, live, so the web app never polls the
// roster (docs/API.md, "Team stream"). A stream starts with a snapshot of
// every member's presence, then carries every change of presence or live
// activity (its 30 s lapse included), of a channel and of an objective.
//
// What it carries is what the roster, the channel list and the objective
// reads already show every member: each is open to any member (there is
// no private channel, and objectives are readable by all; their discussion
// threads are not, and never go on this stream). So every change goes to
// every stream; per-viewer fields (a channel's joined, my role) are left
// to the client, which knows who it is.

// streamTeam is the svc_live_streams kind of team streams.
const streamTeam = "team"

// teamLive publishes the team stream's changes. Each change is numbered
// and published under mu, and a stream's snapshot is taken under mu too:
// the snapshot reflects exactly the changes numbered up to its own, and
// the stream skips those (Feed's seq filter), so nothing is applied twice
// nor out of order.
type teamLive struct {
	hub *hub.Hub
	mu  sync.Mutex
	seq int64
	// cluster, with several brokers, shares presence and the team
	// stream's changes with the others (clusterpresence.go).
	cluster *clusterPresence
}

// teamPublish publishes a channel or objective change ev builds to this
// broker's team streams and, with several brokers, to theirs.
func (c *core) teamPublish(ev func() *apiv1.StreamTeamResponse) {
	if c.live != nil && c.live.cluster != nil {
		c.live.cluster.publishTeam(ev())
	}
	c.teamPublishLocal(ev)
}

// teamPublishLocal numbers and publishes the event ev builds to this
// broker's team streams. ev runs under mu, so the state it reads is the
// state as of its number.
func (c *core) teamPublishLocal(ev func() *apiv1.StreamTeamResponse) {
	t := c.live
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.hub.Live(true, "", nil) == 0 {
		return // nobody watches: build nothing
	}
	t.seq++
	t.hub.Publish(hub.NewEvent(t.seq, ev()), true, "", nil)
}

// teamMember is member's presence as the team stream carries it; gone when
// it is no member now.
func (c *core) teamMember(name string) *apiv1.TeamMember {
	m, ok := c.team.Member(name)
	if !ok {
		return &apiv1.TeamMember{Name: name, State: stateIdle, Gone: true}
	}
	n := c.connected(name)
	return &apiv1.TeamMember{Name: name, Connected: int32(n), State: c.presence.state(name, n), Agent: c.agents.is(m)}
}

// presenceChanged tells the team streams member's presence or live
// activity may read differently now.
func (c *core) presenceChanged(member string) {
	if c.live != nil && c.live.cluster != nil {
		c.live.cluster.changed(member)
	}
	c.teamPresence(member)
}

// teamPresence tells this broker's team streams member's presence may read
// differently now. Each broker builds presence events from its own sum of
// every broker's tables, so they never travel.
func (c *core) teamPresence(member string) {
	c.teamPublishLocal(func() *apiv1.StreamTeamResponse {
		return &apiv1.StreamTeamResponse{Event: &apiv1.StreamTeamResponse_Presence{Presence: c.teamMember(member)}}
	})
}

// Channel change ops.
const (
	channelCreated  = "created"
	channelUpdated  = "updated"
	channelArchived = "archived"
	channelMembers  = "members"
)

// channelChanged tells the team streams a channel changed: op, and for
// members the member who joined with role, or left (role empty).
func (c *core) channelChanged(op string, ch store.Channel, member, role string) {
	pc := channelToProto(ch)
	c.teamPublish(func() *apiv1.StreamTeamResponse {
		return &apiv1.StreamTeamResponse{Event: &apiv1.StreamTeamResponse_Channel{Channel: &apiv1.ChannelChange{Op: op, Channel: pc, Member: member, Role: role}}}
	})
}

// Objective change ops.
const (
	objectiveCreated = "created"
	objectiveUpdated = "updated"
)

// objectiveChanged tells the team streams an objective was created or
// changed.
func (c *core) objectiveChanged(op string, o store.Objective) {
	po := objectiveToProto(o)
	c.teamPublish(func() *apiv1.StreamTeamResponse {
		return &apiv1.StreamTeamResponse{Event: &apiv1.StreamTeamResponse_Objective{Objective: &apiv1.ObjectiveChange{Op: op, Objective: po}}}
	})
}

// attachTeam opens p's team stream: its first event is the snapshot of
// every member's presence, then live changes. Bounded like every stream
// (per-member cap, slow readers cut), and ended when p's credential is
// revoked (core.disconnect).
func (c *core) attachTeam(p *auth.Principal) (*Feed, error) {
	t := c.live
	t.mu.Lock()
	sub, err := c.subscribe(t.hub, p.Member, p)
	if err != nil {
		t.mu.Unlock()
		return nil, err
	}
	snap := &apiv1.TeamSnapshot{}
	for _, m := range c.team.Members() {
		snap.Members = append(snap.Members, c.teamMember(m.Name))
	}
	at := t.seq
	t.mu.Unlock()
	first := hub.NewEvent(at, &apiv1.StreamTeamResponse{Event: &apiv1.StreamTeamResponse_Snapshot{Snapshot: snap}})
	sent := false
	f := newFeed(sub, at, true, func(context.Context, int64, int) ([]*hub.Event, int64, bool, error) {
		if sent {
			return nil, at, false, nil
		}
		sent = true
		return []*hub.Event{first}, at, false, nil
	}, teamIDs)
	return c.counted(f, nil, streamTeam)
}

// endTeamStreams ends every team stream of this broker: their clients
// reconnect to a fresh snapshot.
func (c *core) endTeamStreams() {
	if c.live == nil {
		return
	}
	for _, m := range c.team.Members() {
		c.live.hub.Disconnect(m.Name, nil)
	}
}

// connected is member's live chat streams on every broker: this one's,
// plus what the others last said (clusterpresence.go).
func (c *core) connected(member string) int {
	n := c.hub.Connected(member)
	if c.live != nil && c.live.cluster != nil {
		n += c.live.cluster.remoteConns(member)
	}
	return n
}

// formatTeamID is a team stream event's SSE id. The stream is not
// resumable (a new one starts with a snapshot), so it only orders.
func formatTeamID(seq int64) string { return strconv.FormatInt(seq, 10) }

// StreamTeam implements apiv1.BrokerServer.
func (b *brokerPresence) StreamTeam(_ *apiv1.StreamTeamRequest, stream apiv1.Broker_StreamTeamServer) error {
	ctx := stream.Context()
	p := mustPrincipal(ctx)
	f, err := b.attachTeam(p)
	if err != nil {
		return err
	}
	defer f.Close()
	return serveFeed(ctx, f, func() error {
		return stream.Send(&apiv1.StreamTeamResponse{Event: &apiv1.StreamTeamResponse_Ready{Ready: &apiv1.Ready{Member: p.Member}}})
	}, func(ev *hub.Event) error {
		return stream.Send(ev.Value.(*apiv1.StreamTeamResponse))
	})
}

// AttachTeam opens p's team stream for the SSE route (see StreamTeam).
func (s *Server) AttachTeam(p *auth.Principal) (*Feed, error) { return s.core.attachTeam(p) }

// agentMetaPrefix keys, in the store's meta facts, the members a runner
// has connected for, by member id: a name deleted and created again is a
// new member, not an agent until its own runner connects.
const agentMetaPrefix = "agent:"

// agentSet is the members known to be agents: a runner has connected for
// them (docs/DECISIONS.md, "Agents"). Kept in the store, so a member reads
// as an agent while offline and after a restart.
type agentSet struct {
	mu  sync.Mutex
	ids map[string]bool
}

func newAgentSet() *agentSet { return &agentSet{ids: map[string]bool{}} }

// agentKey is the member's key in the set: its id, its name before ids.
func agentKey(m teamconfig.Member) string {
	if m.ID != "" {
		return m.ID
	}
	return "name:" + m.Name
}

// is reports whether m is an agent.
func (a *agentSet) is(m teamconfig.Member) bool {
	if a == nil {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ids[agentKey(m)]
}

// load reads which current members are agents.
func (a *agentSet) load(ctx context.Context, st store.MetaStore, members []teamconfig.Member) error {
	var errs []error
	for _, m := range members {
		_, err := st.GetMeta(ctx, agentMetaPrefix+agentKey(m))
		switch {
		case err == nil:
			a.mu.Lock()
			a.ids[agentKey(m)] = true
			a.mu.Unlock()
		case !errors.Is(err, store.ErrNotFound):
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// runnerConnected records that a runner connected for member: from now on
// (and after a restart) it is an agent. The first time, the fact is stored
// and the team streams told.
func (c *core) runnerConnected(ctx context.Context, member string) {
	m, ok := c.team.Member(member)
	if !ok || c.agents.is(m) {
		return
	}
	key := agentKey(m)
	if c.store != nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := c.store.PutMeta(ctx, agentMetaPrefix+key, strconv.FormatInt(c.now().UnixMilli(), 10)); err != nil {
			// Shown as an agent while this process runs; after a
			// restart, once its runner connects again.
			c.log.WarnContext(ctx, "agent mark not stored", "member", member, "err", err)
		}
	}
	c.agents.mu.Lock()
	c.agents.ids[key] = true
	c.agents.mu.Unlock()
	c.presenceChanged(member)
}
