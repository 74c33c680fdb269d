package server

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"

	"svc/server/cluster"
	"svc/store"
)

// Live activity across brokers: the activity writer's committed rows go
// out on svc.<team>.act through a second cluster.Fanout, and every
// broker's live activity streams get every broker's rows in commit order
// (docs/DECISIONS.md, "Presence and the team stream on several brokers").
// The activity store assigns ids under its own one writer, so they are
// its commit order, as messages' are.

// activityRanges reads what other brokers' activity writers committed.
type activityRanges struct {
	st store.ActivityStore
	r  store.ActivityRanger
}

func (a activityRanges) Range(ctx context.Context, after, upTo int64) ([]store.ActivityEvent, error) {
	return a.r.ActivityBetween(ctx, after, upTo)
}

func (a activityRanges) Last(ctx context.Context) (int64, error) { return a.st.LastActivityID(ctx) }

// joinActivity fans the activity writer's commits out over nc.
func (s *Server) joinActivity(ctx context.Context, nc *nats.Conn, team, origin string) error {
	c := s.core
	if c.activity == nil || !s.act.Enabled() {
		return nil // no activity store: nothing to fan out
	}
	r, ok := c.activity.(store.ActivityRanger)
	if !ok {
		return errors.New("several brokers need an activity store that reads rows by id range")
	}
	var deliver func([]store.ActivityEvent)
	f, err := cluster.New(ctx, cluster.Config[store.ActivityEvent]{
		Conn: nc, Subject: "svc." + team + ".act", Origin: origin, Store: activityRanges{st: c.activity, r: r},
		ID:      func(e store.ActivityEvent) int64 { return e.ID },
		Deliver: func(rows []store.ActivityEvent) { deliver(rows) },
		Log:     c.log, Signer: c.signer,
	})
	if err != nil {
		return err
	}
	deliver = s.act.FanOut(f.Committed)
	c.fanMetrics("act", f.Stats)
	s.run = append(s.run, f.Run)
	return nil
}
