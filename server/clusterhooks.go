package server

import (
	"context"
	"encoding/json"

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
// (queued copies may go) or attached and free (held copies may go).
type hookReport struct {
	V        int    `json:"v"`
	Origin   string `json:"origin"`
	Member   string `json:"member"`
	Attached bool   `json:"attached"`
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
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
		var r hookReport
		if len(m.Data) > maxHookReport || json.Unmarshal(m.Data, &r) != nil || r.V != 1 || r.Origin == origin || r.Member == "" {
			return // hostile or our own: dropped
		}
		hooked.RemoteReach(r.Member, r.Attached)
	})
	if err != nil {
		return err
	}
	s.run = append(s.run, s.core.runApprovalSync, func(ctx context.Context) {
		defer func() { _ = sub.Unsubscribe() }()
		hooked.Announce(ctx, func(member string, attached bool) {
			data, err := json.Marshal(hookReport{V: 1, Origin: origin, Member: member, Attached: attached})
			if err == nil {
				_ = nc.Publish(subject, data) // lost: repeated at the next look
			}
		})
	})
	return nil
}
