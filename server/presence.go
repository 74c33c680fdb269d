package server

import (
	"context"
	"fmt"
	"sort"
	"svc/server/apierr"
	"svc/server/wire"
	"sync"
	"time"

	apiv1 "svc/gen/svc/v1"
	"svc/server/auth"
)

// activityTTL is how long a non-idle state holds without a refresh (spec:
// Limits, activity TTL).
const activityTTL = 30 * time.Second

// Activity states.
const (
	stateIdle    = "idle"
	stateWorking = "working"
	stateBlocked = "blocked"
)

// presence is the per-process registry of members seen: their first and
// last sighting and their live activity. Connection counts come from the
// hub.
type presence struct {
	mu   sync.Mutex
	now  func() time.Time
	seen map[string]*sighting
	// runners counts each member's open runner streams: when the last one
	// closes, the member's live activity is idle at once.
	runners map[string]int
	// onActivity, when set, runs outside the lock after a member reports
	// its activity (the hook scheduler's wake-up).
	onActivity func(member string)
	// blocked, when set, says a member waits on a person's decision (a
	// pending approval): while it is connected, its activity reads blocked
	// until the decision, whatever its runner reports and however long it
	// waits.
	blocked func(member string) bool
	// onChange, when set, runs outside the lock whenever a member's live
	// activity may read differently: a report, a runner gone, and the
	// activityTTL lapse of a state not refreshed (the team stream).
	onChange func(member string)
	// lapses are the timers of the non-idle states, by member: each fires
	// activityTTL after the last report, when the state reads idle.
	lapses map[string]*time.Timer
	// afterFunc arms a lapse timer; time.AfterFunc unless a test sets one.
	afterFunc func(d time.Duration, f func()) *time.Timer
	// remote, with several brokers, is member's live activity as the
	// other brokers last reported it, and until when it holds
	// (clusterpresence.go); it reads when the state here is idle. It must
	// not call back into presence.
	remote func(member string) (state string, until time.Time)
}

type sighting struct {
	createdAt time.Time
	lastSeen  time.Time
	state     string
	stateAt   time.Time
}

func newPresence(now func() time.Time) *presence {
	return &presence{now: now, seen: map[string]*sighting{}, runners: map[string]int{}, lapses: map[string]*time.Timer{}, afterFunc: time.AfterFunc}
}

// touchLocked records a sighting of member.
func (pr *presence) touchLocked(member string) *sighting {
	now := pr.now()
	s := pr.seen[member]
	if s == nil {
		s = &sighting{createdAt: now, state: stateIdle}
		pr.seen[member] = s
	}
	s.lastSeen = now
	return s
}

// touch records that member attached, detached or emitted.
func (pr *presence) touch(member string) {
	pr.mu.Lock()
	pr.touchLocked(member)
	pr.mu.Unlock()
}

// touchIfSeen updates the last sighting of a member already seen; emitting
// alone does not put a member on the roster's presence list.
func (pr *presence) touchIfSeen(member string) {
	pr.mu.Lock()
	if _, ok := pr.seen[member]; ok {
		pr.touchLocked(member)
	}
	pr.mu.Unlock()
}

func (pr *presence) setActivity(member, state string) {
	pr.mu.Lock()
	s := pr.touchLocked(member)
	// A runner refreshes its state every few seconds: only a state that
	// reads differently is news to the team streams.
	was := stateIdle
	if s.state != stateIdle && s.lastSeen.Sub(s.stateAt) < activityTTL {
		was = s.state
	}
	s.state, s.stateAt = state, s.lastSeen
	pr.armLapseLocked(member, state)
	pr.mu.Unlock()
	if pr.onActivity != nil {
		pr.onActivity(member)
	}
	if was != state {
		pr.changed(member)
	}
}

// armLapseLocked (re)arms member's lapse timer for a non-idle state, or
// stops it for idle: nothing else would tell a live view that a state
// nobody refreshed now reads idle.
func (pr *presence) armLapseLocked(member, state string) {
	if t := pr.lapses[member]; t != nil {
		t.Stop()
		delete(pr.lapses, member)
	}
	if state == stateIdle || pr.onChange == nil {
		return
	}
	var t *time.Timer
	t = pr.afterFunc(activityTTL, func() {
		pr.mu.Lock()
		if pr.lapses[member] == t {
			delete(pr.lapses, member)
		}
		pr.mu.Unlock()
		pr.changed(member)
	})
	pr.lapses[member] = t
}

// changed runs onChange for member, when set.
func (pr *presence) changed(member string) {
	if pr.onChange != nil {
		pr.onChange(member)
	}
}

// runnerAttached counts a runner stream of member.
func (pr *presence) runnerAttached(member string) {
	pr.mu.Lock()
	pr.runners[member]++
	pr.mu.Unlock()
}

// runnerDetached uncounts a runner stream of member. With its last runner
// gone, nothing refreshes its activity: a crashed runner's working would
// otherwise hold until the activityTTL lapse, so the member is idle at once.
func (pr *presence) runnerDetached(member string) {
	pr.mu.Lock()
	pr.runners[member]--
	changed := false
	if pr.runners[member] <= 0 {
		delete(pr.runners, member)
		if s := pr.seen[member]; s != nil && s.state != stateIdle {
			s.state, s.stateAt = stateIdle, pr.now()
			pr.armLapseLocked(member, stateIdle)
			changed = true
		}
	}
	pr.mu.Unlock()
	if changed && pr.onActivity != nil {
		pr.onActivity(member)
	}
	if changed {
		pr.changed(member)
	}
}

// busy reports whether member's live activity is working now, and until
// when it holds without a refresh (the activityTTL lapse to idle).
// Blocked counts as free.
func (pr *presence) busy(member string) (bool, time.Time) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.blocked != nil && pr.blocked(member) {
		return false, time.Time{}
	}
	if s := pr.seen[member]; s != nil && s.state == stateWorking {
		if until := s.stateAt.Add(activityTTL); pr.now().Before(until) {
			return true, until
		}
	}
	if pr.remote != nil {
		if state, until := pr.remote(member); state == stateWorking {
			return true, until
		}
	}
	return false, time.Time{}
}

// localState is how member's live activity reads on this broker alone,
// with its live streams here, and until when a non-idle state holds
// without a refresh: what this broker tells the others.
func (pr *presence) localState(member string, connected int) (string, time.Time) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	s := pr.seen[member]
	switch {
	case connected > 0 && pr.blocked != nil && pr.blocked(member):
		// Held while the decision waits: refreshed by every heartbeat.
		return stateBlocked, pr.now().Add(activityTTL)
	case s != nil && s.state != stateIdle && pr.now().Sub(s.stateAt) < activityTTL:
		return s.state, s.stateAt.Add(activityTTL)
	}
	return stateIdle, time.Time{}
}

// list renders every sighting of a current member, by name. A non-idle
// state not refreshed within activityTTL reads as idle.
func (pr *presence) list(connected func(string) int, role func(string) (*apiv1.Role, bool)) []*apiv1.Presence {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	now := pr.now()
	out := make([]*apiv1.Presence, 0, len(pr.seen))
	for name, s := range pr.seen {
		r, ok := role(name)
		if !ok {
			continue // deleted since
		}
		p := &apiv1.Presence{Name: name, Connected: int32(connected(name)), CreatedAt: wire.MS(s.createdAt), LastSeen: wire.MS(s.lastSeen), Role: r}
		if state := pr.stateLocked(name, s, int(p.Connected), now); state != stateIdle {
			busy := state == stateWorking
			p.Activity, p.Busy = &state, &busy
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// stateLocked is how member's live activity reads at now, with connected
// live streams: blocked while it waits on a decision, else its reported
// state until activityTTL lapses without a refresh, else idle.
func (pr *presence) stateLocked(name string, s *sighting, connected int, now time.Time) string {
	switch {
	case connected > 0 && pr.blocked != nil && pr.blocked(name):
		// Only while connected: a runner gone (a crash) leaves its
		// approvals pending, but nothing waits on them any more.
		return stateBlocked
	case s != nil && s.state != stateIdle && now.Sub(s.stateAt) < activityTTL:
		return s.state
	case pr.remote != nil:
		state, _ := pr.remote(name)
		return state
	}
	return stateIdle
}

// state is how member's live activity reads now, with connected live
// streams (see stateLocked).
func (pr *presence) state(name string, connected int) string {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.stateLocked(name, pr.seen[name], connected, pr.now())
}

// brokerPresence serves the roster and live activity.
type brokerPresence struct{ *core }

// GetRoster implements apiv1.BrokerServer.
func (b *brokerPresence) GetRoster(context.Context, *apiv1.GetRosterRequest) (*apiv1.GetRosterResponse, error) {
	resp := &apiv1.GetRosterResponse{}
	roles := map[string]*apiv1.Role{}
	for _, m := range b.team.Members() {
		tm := teammateToProto(m)
		agent := b.agents.is(m)
		tm.Agent = &agent
		resp.Teammates = append(resp.Teammates, tm)
		roles[m.Name] = roleToProto(m.Role)
	}
	resp.Connected = b.presence.list(b.connected, func(name string) (*apiv1.Role, bool) {
		r, ok := roles[name]
		return r, ok
	})
	return resp, nil
}

// SetActivity implements apiv1.BrokerServer.
func (b *brokerPresence) SetActivity(ctx context.Context, req *apiv1.SetActivityRequest) (*apiv1.SetActivityResponse, error) {
	p := mustPrincipal(ctx)
	if !p.BearerPlane() {
		return nil, fmt.Errorf("%w: activity is reported with a bearer token", auth.ErrForbidden)
	}
	var state string
	switch {
	case req.State != nil:
		state = req.GetState()
		if state != stateIdle && state != stateWorking && state != stateBlocked {
			return nil, apierr.Invalid("state", "must be idle, working or blocked")
		}
	case req.Busy != nil:
		state = stateIdle
		if req.GetBusy() {
			state = stateWorking
		}
	default:
		return nil, apierr.Invalid("state", "is required")
	}
	b.presence.setActivity(p.Member, state)
	setHTTPStatus(ctx, 204)
	return &apiv1.SetActivityResponse{}, nil
}
