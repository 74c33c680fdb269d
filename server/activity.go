package server

import (
	"context"
	"errors"
	"strconv"
	"time"

	"svc/server/activity"
	"svc/server/auth"
	"svc/server/hub"
	"svc/store"
)

// The activity capability (server/activity) is the Activity service, OTLP
// ingest, ingest redaction and the activity writer. This file is what it
// is given of the core (members, secrets, objectives, the stream
// machinery) and what the core asks of it.

// kindToolAction is the kind of the rows the core records of a tool call
// or an approval decision.
const kindToolAction = store.KindToolAction

// activityLog is what the core asks of the activity capability
// (activity.Service): to record rows (objective markers, approval
// decisions, tool actions), to end a member's live activity streams, to
// store what a deleted member's telemetry still had waiting, and to
// build its redactor again once the team's secrets changed.
type activityLog interface {
	// Enabled reports whether the broker keeps activity.
	Enabled() bool
	Write(ctx context.Context, b store.ActivityBatch) ([]store.ActivityEvent, error)
	Disconnect(member string, match func(cred string) bool)
	DrainTelemetry(ctx context.Context, member, id string) error
	SecretsChanged()
}

// activityMembers tells the capability which member of a name a row is.
type activityMembers struct{ c *core }

func (m activityMembers) Current(name string) (string, bool) {
	if m.c.team == nil {
		return "", false
	}
	mem, ok := m.c.team.Member(name)
	return mem.ID, ok
}

func (m activityMembers) WasMember(name string) bool { return m.c.ids.wasMember(name) }
func (m activityMembers) Owner(name string) string   { return m.c.ids.owner(name) }
func (m activityMembers) Label(name, id string) (bool, time.Time) {
	return m.c.ids.label(name, id)
}

// secretsChanged tells ingest redaction the team's secrets changed: called
// after a change to a secret commits, never before.
func (c *core) secretsChanged() { c.act.SecretsChanged() }

// activityFeeds opens activity streams as Feeds over h, the activity hub,
// so they are counted, cut and bounded as chat streams are.
type activityFeeds struct {
	c *core
	h *hub.Hub
}

func (a activityFeeds) Open(ctx context.Context, p *auth.Principal, member, lastID string, newest func(context.Context) (int64, error), page activity.Pager) (activity.Stream, error) {
	after, err := ParseMessageID(lastID)
	if err != nil {
		return nil, err
	}
	resume := lastID != ""
	sub, err := a.c.subscribe(a.h, member, p)
	if err != nil {
		return nil, err
	}
	if resume && after > 0 {
		// An id past the newest row comes from before a store reset: every
		// row here is new to the client.
		last, err := newest(ctx)
		if err != nil {
			sub.Close()
			return nil, err
		}
		if after > last {
			after = 0
		}
	}
	f, err := a.c.counted(newFeed(sub, after, resume, page, activityIDs), nil, streamActivity)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (a activityFeeds) Serve(ctx context.Context, s activity.Stream, first func() error, send func(*hub.Event) error) error {
	f, ok := s.(*Feed)
	if !ok {
		return errors.New("activity stream not opened by activityFeeds")
	}
	return serveFeed(ctx, f, first, send)
}

// formatActivityID is a row's id on the wire (the SSE id).
func formatActivityID(id int64) string { return strconv.FormatInt(id, 10) }

// objectiveForTrace reads objective id for its trace.
func (c *core) objectiveForTrace(ctx context.Context, id string) (store.Objective, error) {
	o, err := c.store.GetObjective(ctx, id)
	if err != nil {
		return o, objectiveErr(err, id)
	}
	return o, nil
}
