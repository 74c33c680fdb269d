package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"golang.org/x/time/rate"
	"google.golang.org/protobuf/encoding/protojson"

	apiv1 "svc/gen/svc/v1"
	"svc/server/cluster"
)

// Presence and the team stream across brokers (docs/DECISIONS.md,
// "Presence and the team stream on several brokers"). Each broker
// publishes its own table (per member: its live streams here, and its
// live activity as reported here) on svc.<team>.presence: a member's
// entry when it changes, the whole table every presenceHeartbeat, and an
// empty goodbye when it stops. Every broker adds what it heard to its own
// counts; a table not refreshed within presenceMissed heartbeats of its
// sender is dropped, so a dead broker stops counting.
//
// Channel and objective changes go out on svc.<team>.team as the event
// the team stream carries; every other broker hands them to its own team
// streams. That subject is plain NATS (the team stream is not resumable):
// when NATS drops, and again when it is back, the broker ends its team
// streams, and their clients reconnect to a fresh snapshot.

const (
	// presenceHeartbeat is how often a broker sends its whole table, and
	// the interval its peers expect from it.
	presenceHeartbeat = 5 * time.Second
	// presenceMissed is how many heartbeats a table outlives without a
	// word from its broker: 15 s with the default heartbeat.
	presenceMissed = 3
	// minHeartbeat and maxHeartbeat bound the interval a peer announces:
	// neither a table that lapses at once nor one that outlives its
	// broker by minutes.
	minHeartbeat = time.Second
	maxHeartbeat = 30 * time.Second
	// maxPresenceMembers bounds the entries one message may name (a team
	// has far fewer members); a larger one is dropped as malformed. What
	// a table holds is bounded tighter: only the team's members are kept.
	maxPresenceMembers = 10_000
	// maxPresencePeers bounds the other brokers' tables held: a team runs
	// a handful of brokers. Past it a new origin takes the place of the
	// one heard from longest ago, so a broker that restarts (with a new
	// origin) is always let in; a table that names none of the team's
	// members takes no place at all.
	maxPresencePeers = 256
	// maxOriginLen bounds a sender's origin (JoinCluster's brokerOrigin
	// makes at most 64 bytes).
	maxOriginLen = 64
	// presenceWarnEvery is the most often a kind of dropped presence
	// message is logged: anyone who can publish on the subject could
	// otherwise fill the log.
	presenceWarnEvery = time.Minute
	// maxTeamEvent bounds a team-stream event from NATS.
	maxTeamEvent = 256 << 10
	// presenceVersion is the version of what the presence subject
	// carries; another is dropped. 2: counted and timed, for Replays.
	presenceVersion = 2
	// replayWindow is the oldest presence or team-stream message taken,
	// and so the most the brokers' clocks may differ (docs/DECISIONS.md,
	// "Signed NATS messages").
	replayWindow = time.Minute
)

// peerEntry is one member's presence on one broker.
type peerEntry struct {
	// Conns is the member's live streams on that broker.
	Conns int `json:"c,omitempty"`
	// State is its live activity as reported there, idle when empty;
	// Left the milliseconds it holds without a refresh.
	State string `json:"s,omitempty"`
	Left  int64  `json:"t,omitempty"`
	// until is when State lapses, on this broker's clock.
	until time.Time
}

func (e peerEntry) idle() bool { return e.Conns == 0 && e.State == "" }

// presenceEnvelope is one message on the presence subject.
type presenceEnvelope struct {
	V      int    `json:"v"`
	Origin string `json:"o"`
	// HB is the sender's heartbeat in milliseconds.
	HB int64 `json:"hb"`
	// Full: Members is the sender's whole table; otherwise only the
	// entries that changed (an idle entry removes one).
	Full bool `json:"f,omitempty"`
	// Bye: the sender stops; drop its table.
	Bye     bool                 `json:"b,omitempty"`
	Members map[string]peerEntry `json:"m,omitempty"`
	// N counts the sender's messages on the subject, from 1; At is when
	// it sent this one (Unix milliseconds): a replay is refused.
	N  int64 `json:"n"`
	At int64 `json:"at"`
}

// teamEnvelope is one message on the team-stream subject: a channel or
// objective change as the team stream carries it.
type teamEnvelope struct {
	Origin string          `json:"o"`
	N      int64           `json:"n"`
	At     int64           `json:"at"`
	Event  json.RawMessage `json:"e"`
}

// peerTable is what one other broker last said.
type peerTable struct {
	heard   time.Time
	life    time.Duration // how long the table holds without a word
	members map[string]peerEntry
}

// clusterPresence is a broker's share of the team's presence.
type clusterPresence struct {
	c        *core
	nc       *nats.Conn
	subject  string
	teamSubj string
	origin   string
	log      *slog.Logger
	now      func() time.Time
	beat     time.Duration

	mu    sync.Mutex
	peers map[string]*peerTable
	// dirty are the members whose local entry may have changed since it
	// was last sent; sent is what was last sent, by member.
	dirty map[string]bool
	sent  map[string]peerEntry
	wake  chan struct{}

	subs   []*nats.Subscription
	status chan nats.Status
	// sentN and sentTeamN count what this broker sent on each subject;
	// replays and teamReplays refuse its peers' old messages sent again.
	sentN, sentTeamN atomic.Int64
	// teamMu makes numbering and publishing one step: publishTeam runs on
	// request goroutines, and a peer refuses a count below one it took.
	teamMu               sync.Mutex
	replays, teamReplays *cluster.Replays
	// poke wakes the hook scheduler: a member's reach changed.
	poke func()

	// warnMalformed, warnState, warnPeers and warnReplay limit the
	// warnings about dropped messages and tables to one per
	// presenceWarnEvery each; dropped counts what was dropped since the
	// last warning.
	warnMalformed, warnState, warnPeers, warnReplay rate.Sometimes
	dropped                                         atomic.Int64
}

// newClusterPresence is a broker's share of presence, not yet joined.
func newClusterPresence(c *core, origin string) *clusterPresence {
	return &clusterPresence{
		c: c, origin: origin, log: c.log, now: c.now, beat: PresenceHeartbeat,
		peers: map[string]*peerTable{}, dirty: map[string]bool{}, sent: map[string]peerEntry{},
		wake:          make(chan struct{}, 1),
		warnMalformed: rate.Sometimes{First: 1, Interval: presenceWarnEvery},
		warnState:     rate.Sometimes{First: 1, Interval: presenceWarnEvery},
		warnPeers:     rate.Sometimes{First: 1, Interval: presenceWarnEvery},
		warnReplay:    rate.Sometimes{First: 1, Interval: presenceWarnEvery},
		replays:       cluster.NewReplays(replayWindow), teamReplays: cluster.NewReplays(replayWindow),
	}
}

// PresenceHeartbeat is the heartbeat a broker announces; tests of several
// brokers lengthen it, so that a table outlives what they measure.
var PresenceHeartbeat = presenceHeartbeat

// joinPresence starts sharing presence and the team stream over nc, as
// the broker origin names.
func (s *Server) joinPresence(nc *nats.Conn, team, origin string) error {
	c := s.core
	cp := newClusterPresence(c, origin)
	cp.nc, cp.subject, cp.teamSubj = nc, "svc."+team+".presence", "svc."+team+".team"
	cp.status = nc.StatusChanged(nats.CONNECTED, nats.DISCONNECTED, nats.RECONNECTING)
	for _, sub := range []struct {
		subj string
		f    nats.MsgHandler
	}{{cp.subject, cp.receive}, {cp.teamSubj, cp.receiveTeam}} {
		ns, err := nc.Subscribe(sub.subj, sub.f)
		if err != nil {
			cp.stop()
			return fmt.Errorf("presence: subscribe %s: %w", sub.subj, err)
		}
		cp.subs = append(cp.subs, ns)
	}
	if s.notify != nil {
		cp.poke = s.notify.Poke
	}
	c.live.cluster = cp
	c.presence.remote = cp.remoteState
	c.msgs.connected = c.connected
	c.msgs.live = c.liveAddressed
	s.run = append(s.run, cp.run)
	return nil
}

func (cp *clusterPresence) stop() {
	for _, s := range cp.subs {
		_ = s.Unsubscribe()
	}
	cp.nc.RemoveStatusListener(cp.status)
}

// changed marks member's local entry for sending; it never blocks.
func (cp *clusterPresence) changed(member string) {
	cp.mu.Lock()
	cp.dirty[member] = true
	cp.mu.Unlock()
	select {
	case cp.wake <- struct{}{}:
	default:
	}
}

// local is member's entry on this broker alone.
func (cp *clusterPresence) local(member string) peerEntry {
	n := cp.c.hub.Connected(member)
	state, until := cp.c.presence.localState(member, n)
	e := peerEntry{Conns: n}
	if state != stateIdle {
		e.State = state
		e.Left = max(until.Sub(cp.now()).Milliseconds(), 1)
	}
	return e
}

// run sends changes as they come and the whole table every heartbeat,
// drops tables whose broker went quiet, and says goodbye when ctx ends.
func (cp *clusterPresence) run(ctx context.Context) {
	defer cp.stop()
	tick := time.NewTicker(cp.beat)
	defer tick.Stop()
	sweep := time.NewTicker(minHeartbeat)
	defer sweep.Stop()
	cp.sendFull()
	for {
		select {
		case <-ctx.Done():
			cp.send(presenceEnvelope{Bye: true})
			_ = cp.nc.FlushTimeout(time.Second)
			return
		case <-cp.wake:
			cp.sendDirty()
		case <-tick.C:
			cp.sendFull()
		case <-sweep.C:
			cp.sweep()
		case st := <-cp.status:
			// The team stream is plain NATS: what was published while
			// this broker was cut off is gone, so its team streams end
			// (when NATS drops, and when it is back) and their clients
			// start again from a snapshot.
			cp.c.endTeamStreams()
			if st == nats.CONNECTED {
				cp.sendFull()
			}
		}
	}
}

// sendDirty sends the entries of the members marked changed whose local
// entry reads differently from what was last sent.
func (cp *clusterPresence) sendDirty() {
	cp.mu.Lock()
	dirty := cp.dirty
	cp.dirty = map[string]bool{}
	cp.mu.Unlock()
	out := map[string]peerEntry{}
	for m := range dirty {
		e := cp.local(m)
		cp.mu.Lock()
		was, had := cp.sent[m]
		if e.idle() {
			delete(cp.sent, m)
		} else {
			cp.sent[m] = e
		}
		cp.mu.Unlock()
		if had != !e.idle() || was.Conns != e.Conns || was.State != e.State {
			out[m] = e
		}
	}
	if len(out) > 0 {
		cp.send(presenceEnvelope{Members: out})
	}
}

// sendFull sends the whole local table: every member with a live stream
// here or a live activity reported here.
func (cp *clusterPresence) sendFull() {
	table := map[string]peerEntry{}
	for _, m := range cp.c.team.Members() {
		if e := cp.local(m.Name); !e.idle() {
			table[m.Name] = e
		}
	}
	cp.mu.Lock()
	cp.sent = maps.Clone(table)
	cp.mu.Unlock()
	cp.send(presenceEnvelope{Full: true, Members: table})
}

func (cp *clusterPresence) send(e presenceEnvelope) {
	e.V, e.Origin, e.HB = presenceVersion, cp.origin, cp.beat.Milliseconds()
	e.N, e.At = cp.sentN.Add(1), cp.now().UnixMilli()
	data, err := json.Marshal(e)
	if err != nil {
		cp.log.Error("presence: table not encoded", "err", err)
		return
	}
	if err := cp.nc.PublishMsg(cp.c.signer.Msg(cp.subject, data)); err != nil {
		// The next heartbeat sends the whole table again.
		cp.log.Debug("presence: not published", "err", err)
	}
}

// warn logs a dropped message through limit: at most one line per
// presenceWarnEvery, with how many were dropped since the last.
func (cp *clusterPresence) warn(limit *rate.Sometimes, msg string, args ...any) {
	cp.dropped.Add(1)
	limit.Do(func() {
		cp.log.Warn(msg, append(args, "dropped", cp.dropped.Swap(0))...)
	})
}

// receive takes another broker's table or changes. Like everything from
// NATS it is checked first: bounded, known states, sane counts. Only the
// team's members are kept: a name the team does not know counts for
// nobody, so a forged table holds no more than the team's size and tells
// the team streams nothing.
func (cp *clusterPresence) receive(m *nats.Msg) {
	if !cp.signedByPeer(m) {
		return
	}
	var e presenceEnvelope
	if err := json.Unmarshal(m.Data, &e); err != nil || e.V != presenceVersion || e.Origin == "" || len(e.Origin) > maxOriginLen || len(e.Members) > maxPresenceMembers {
		cp.warn(&cp.warnMalformed, "presence: malformed table dropped", "bytes", len(m.Data), "err", err)
		return
	}
	if e.Origin == cp.origin {
		return
	}
	now := cp.now()
	if !cp.fresh(cp.replays, "presence", e.Origin, e.N, e.At, now) {
		return
	}
	members := make(map[string]peerEntry, min(len(e.Members), 64))
	for name, pe := range e.Members {
		switch pe.State {
		case "", stateWorking, stateBlocked:
		case stateIdle:
			pe.State = ""
		default:
			cp.warn(&cp.warnState, "presence: table with an unknown state dropped")
			return
		}
		if pe.Conns < 0 || pe.Conns > 1<<20 || pe.Left < 0 || name == "" {
			cp.warn(&cp.warnMalformed, "presence: malformed table dropped", "bytes", len(m.Data))
			return
		}
		if _, ok := cp.c.team.Member(name); !ok {
			// Not (yet) a member here: one created on another broker a
			// moment ago is counted from that broker's next whole table.
			continue
		}
		left := min(time.Duration(pe.Left)*time.Millisecond, activityTTL)
		if pe.State == "" {
			left = 0
		}
		pe.until = now.Add(left)
		members[name] = pe
	}
	life := min(max(time.Duration(e.HB)*time.Millisecond, minHeartbeat), maxHeartbeat) * presenceMissed
	var news []string
	cp.mu.Lock()
	t := cp.peers[e.Origin]
	if t == nil {
		if e.Bye || !anyLive(members) {
			// Nothing of this origin is held and it says nothing that
			// counts: it takes no place.
			cp.mu.Unlock()
			return
		}
		if len(cp.peers) >= maxPresencePeers {
			news = cp.evictStalest()
		}
		t = &peerTable{members: map[string]peerEntry{}}
		cp.peers[e.Origin] = t
	}
	t.heard, t.life = now, life
	apply := func(name string, pe peerEntry) {
		was, had := t.members[name]
		if pe.idle() {
			delete(t.members, name)
		} else {
			t.members[name] = pe
		}
		if had != !pe.idle() || was.Conns != pe.Conns || was.State != pe.State {
			news = append(news, name)
		}
	}
	switch {
	case e.Bye:
		for name := range t.members {
			news = append(news, name)
		}
		delete(cp.peers, e.Origin)
	case e.Full:
		for name := range t.members {
			if _, ok := members[name]; !ok {
				apply(name, peerEntry{})
			}
		}
		fallthrough
	default:
		for name, pe := range members {
			apply(name, pe)
		}
	}
	cp.mu.Unlock()
	cp.told(news)
}

// liveAddressed counts the members a message addresses (as hub.Live's
// arguments) that hold a live stream on any broker.
func (c *core) liveAddressed(all bool, sender string, recipients []string) int {
	n := 0
	count := func(member string) {
		if c.connected(member) > 0 {
			n++
		}
	}
	if !all {
		for _, r := range recipients {
			count(r)
		}
		return n
	}
	for _, m := range c.team.Members() {
		if m.Name != sender {
			count(m.Name)
		}
	}
	return n
}

// signedByPeer reports whether m may be taken: signed by a broker of the
// team, or unsigned where this broker has no key (then the subject is
// only as private as the NATS account).
func (cp *clusterPresence) signedByPeer(m *nats.Msg) bool {
	switch cp.c.signer.Check(m) {
	case cluster.Signed:
		return true
	case cluster.Unsigned:
		if cp.c.signer == nil {
			return true
		}
		cp.warn(&cp.warnMalformed, "presence: unsigned message dropped (a broker without the team's KEK, or not a broker)", "subject", m.Subject)
	default:
		cp.warn(&cp.warnMalformed, "presence: message with a bad signature dropped", "subject", m.Subject)
	}
	return false
}

// fresh reports whether origin's message n, sent at (Unix ms), is new,
// and records it if so.
func (cp *clusterPresence) fresh(r *cluster.Replays, what, origin string, n, at int64, now time.Time) bool {
	err := r.Take(origin, n, time.UnixMilli(at), now)
	switch {
	case err == nil:
		return true
	case errors.Is(err, cluster.ErrStale):
		cp.warn(&cp.warnReplay, what+": message dropped: its sender's clock and this one differ by more than "+replayWindow.String()+", or it was sent again later", "broker", origin, "skew", now.Sub(time.UnixMilli(at)).Round(time.Millisecond))
	default:
		cp.warn(&cp.warnReplay, what+": message sent again dropped", "broker", origin)
	}
	return false
}

// anyLive reports whether a table holds an entry that counts.
func anyLive(members map[string]peerEntry) bool {
	for _, pe := range members {
		if !pe.idle() {
			return true
		}
	}
	return false
}

// evictStalest drops the table heard from longest ago, to make room for a
// new origin, and returns the members it held. cp.mu is held. A real
// broker evicted by a flood of forged origins is back at its next whole
// table.
func (cp *clusterPresence) evictStalest() []string {
	var stalest string
	var heard time.Time
	for origin, t := range cp.peers {
		if stalest == "" || t.heard.Before(heard) {
			stalest, heard = origin, t.heard
		}
	}
	t := cp.peers[stalest]
	delete(cp.peers, stalest)
	gone := make([]string, 0, len(t.members))
	for name := range t.members {
		gone = append(gone, name)
	}
	cp.warn(&cp.warnPeers, "presence: too many brokers; the table heard from longest ago dropped", "broker", stalest)
	return gone
}

// told tells this broker's team streams and hook scheduler that members'
// presence on another broker changed.
func (cp *clusterPresence) told(members []string) {
	if len(members) == 0 {
		return
	}
	for _, m := range members {
		if _, ok := cp.c.team.Member(m); ok {
			// Seen by the team: the roster lists it as it would a member
			// seen here.
			cp.c.presence.touch(m)
		}
		cp.c.teamPresence(m)
	}
	if cp.poke != nil {
		cp.poke()
	}
}

// sweep drops the tables of brokers not heard from within their life.
func (cp *clusterPresence) sweep() {
	now := cp.now()
	var gone []string
	cp.mu.Lock()
	for origin, t := range cp.peers {
		if now.Sub(t.heard) >= t.life {
			for name := range t.members {
				gone = append(gone, name)
			}
			delete(cp.peers, origin)
			cp.log.Warn("presence: a broker went quiet; its streams no longer count", "broker", origin)
		}
	}
	cp.mu.Unlock()
	cp.told(gone)
}

// remoteConns is member's live streams on the other brokers.
func (cp *clusterPresence) remoteConns(member string) int {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	n := 0
	for _, t := range cp.peers {
		n += t.members[member].Conns
	}
	return n
}

// remoteState is member's live activity on the other brokers: working
// when any reports it, else blocked when any does; and until when it
// holds.
func (cp *clusterPresence) remoteState(member string) (string, time.Time) {
	now := cp.now()
	cp.mu.Lock()
	defer cp.mu.Unlock()
	state, until := stateIdle, time.Time{}
	for _, t := range cp.peers {
		e, ok := t.members[member]
		if !ok || e.State == "" || !now.Before(e.until) {
			continue
		}
		switch {
		case e.State == stateWorking && (state != stateWorking || e.until.After(until)):
			state, until = stateWorking, e.until
		case e.State == stateBlocked && state == stateIdle:
			state, until = stateBlocked, e.until
		}
	}
	return state, until
}

// publishTeam sends a channel or objective change to the other brokers'
// team streams.
func (cp *clusterPresence) publishTeam(ev *apiv1.StreamTeamResponse) {
	event, err := protojson.Marshal(ev)
	if err != nil || len(event) > maxTeamEvent {
		cp.log.Error("team stream: change not sent to the other brokers", "bytes", len(event), "err", err)
		return
	}
	cp.teamMu.Lock()
	defer cp.teamMu.Unlock()
	data, err := json.Marshal(teamEnvelope{Origin: cp.origin, N: cp.sentTeamN.Add(1), At: cp.now().UnixMilli(), Event: event})
	if err != nil {
		cp.log.Error("team stream: change not sent to the other brokers", "err", err)
		return
	}
	if err := cp.nc.PublishMsg(cp.c.signer.Msg(cp.teamSubj, data)); err != nil {
		cp.log.Debug("team stream: not published", "err", err)
	}
}

// receiveTeam hands another broker's channel or objective change to this
// broker's team streams. Only those two kinds come this way: presence is
// built here from the tables.
func (cp *clusterPresence) receiveTeam(m *nats.Msg) {
	if !cp.signedByPeer(m) {
		return
	}
	var e teamEnvelope
	ev := &apiv1.StreamTeamResponse{}
	if len(m.Data) > maxTeamEvent+1024 || json.Unmarshal(m.Data, &e) != nil || e.Origin == "" || len(e.Origin) > maxOriginLen || protojson.Unmarshal(e.Event, ev) != nil {
		cp.warn(&cp.warnMalformed, "team stream: malformed change dropped", "bytes", len(m.Data))
		return
	}
	if e.Origin == cp.origin || !cp.fresh(cp.teamReplays, "team stream", e.Origin, e.N, e.At, cp.now()) {
		return
	}
	switch ev.Event.(type) {
	case *apiv1.StreamTeamResponse_Channel, *apiv1.StreamTeamResponse_Objective:
		cp.c.teamPublishLocal(func() *apiv1.StreamTeamResponse { return ev })
	default:
		cp.log.Warn("team stream: unexpected change dropped")
	}
}
