package server

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"svc/server/notify"
)

// The hook schedulers on several brokers (docs/DECISIONS.md, "Hook
// schedulers on several brokers"): the loop runs on the holder of the
// team's hooks lease; every other broker reports on svc.<team>.hooks the
// members it serves that queued or held copies wait for.

// HookLeaseTTL is the hooks lease's lifetime; tests of several brokers
// shorten it before the brokers start.
var HookLeaseTTL = notify.LeaseTTL

// hookReport is one broker's report of a member's reach: attached there
// (queued copies may go) or attached and free (held copies may go); or,
// with Due and no member, a notice that its ingress wrote rows the
// holder's loop must time. The holder takes either as a wake-up only.
type hookReport struct {
	V        int    `json:"v"`
	Origin   string `json:"origin"`
	Member   string `json:"member,omitempty"`
	Attached bool   `json:"attached"`
	Due      bool   `json:"due,omitempty"`
}

// maxHookReport bounds a report read from NATS.
const maxHookReport = 1 << 10

// joinHooks makes the hook schedulers one of several brokers': a lease
// for the loop, held as origin, reports of reach sent and heard on
// svc.<team>.hooks.
func (s *Server) joinHooks(nc *nats.Conn, team, origin string) error {
	subject := "svc." + team + ".hooks"
	hooked := s.notify
	hooked.Clustered(origin, HookLeaseTTL)
	hooked.PresenceDoubt(newPresenceDoubt(nc, presenceHeartbeat*presenceMissed, time.Now).doubt)
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
		var r hookReport
		if len(m.Data) > maxHookReport || json.Unmarshal(m.Data, &r) != nil || r.V != 1 || r.Origin == origin || (r.Member == "" && !r.Due) {
			return // hostile or our own: dropped
		}
		hooked.RemoteReach()
	})
	if err != nil {
		return err
	}
	s.run = append(s.run, s.core.runApprovalSync, func(ctx context.Context) {
		defer func() { _ = sub.Unsubscribe() }()
		hooked.Announce(ctx, func(member string, attached bool) {
			data, err := json.Marshal(hookReport{V: 1, Origin: origin, Member: member, Attached: attached, Due: member == ""})
			if err == nil {
				_ = nc.Publish(subject, data) // lost: repeated at the next look
			}
		})
	})
	return nil
}

// presenceDoubt answers how long the presence summed across brokers may
// still miss members attached elsewhere: while NATS is cut off (other
// brokers' tables lapse), and for one presence lifetime after the broker
// joined or NATS came back (every broker's table has arrived again by
// then: each sends it whole every heartbeat). The hook loop neither
// expires queued copies nor reads "free" meanwhile (docs/DECISIONS.md,
// "Hook schedulers: fixes of the review").
type presenceDoubt struct {
	nc   *nats.Conn
	life time.Duration
	now  func() time.Time

	mu         sync.Mutex
	reconnects uint64
	back       time.Time // when the connection was last seen (re)made
}

func newPresenceDoubt(nc *nats.Conn, life time.Duration, now func() time.Time) *presenceDoubt {
	return &presenceDoubt{nc: nc, life: life, now: now, reconnects: nc.Stats().Reconnects, back: now()}
}

func (d *presenceDoubt) doubt() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	if !d.nc.IsConnected() {
		d.back = now // the lifetime counts from when it is back
		return d.life
	}
	// A reconnect seen late (the loop looks every few seconds) only makes
	// the doubt last longer.
	if r := d.nc.Stats().Reconnects; r != d.reconnects {
		d.reconnects, d.back = r, now
	}
	return max(d.back.Add(d.life).Sub(now), 0)
}
