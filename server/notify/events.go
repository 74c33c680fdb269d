package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"svc/server/auth"
	"svc/store"
)

// EventKind is the data.kind of the messages that report a change of a
// notification endpoint, on thread hook:<slug> (docs/HOOKS.md).
const EventKind = "notification_endpoint"

// change is one change of an endpoint, for the message that reports it.
// It never holds a secret.
type change struct {
	slug, event, actor string
	// before and after are the endpoint's direct member targets before
	// and after the change; managers hold notifications.manage.
	before, after, managers []string
}

// message reports ch to its direct targets before and after and to the
// managers; none when nobody is to be told. Channel members are not told:
// a channel is not a member target.
func (ch change) message() ([]store.Message, error) {
	var to []string
	for _, set := range [][]string{ch.before, ch.after, ch.managers} {
		for _, m := range set {
			if !slices.Contains(to, m) {
				to = append(to, m)
			}
		}
	}
	if len(to) == 0 {
		return nil, nil
	}
	slices.Sort(to)
	const noun = "notification endpoint"
	thread := "hook:" + ch.slug
	data, err := json.Marshal(map[string]any{"thread": thread, "kind": EventKind, "event": ch.event, "slug": ch.slug})
	if err != nil {
		return nil, err
	}
	return []store.Message{{
		From: ch.actor, Thread: thread, Title: noun + " " + ch.slug, Body: fmt.Sprintf("%s %s %s %s", ch.actor, eventVerb(ch.event), noun, ch.slug),
		Level: "info", Data: data, Recipients: to,
	}}, nil
}

// eventVerb words an endpoint event for a message body.
func eventVerb(event string) string {
	switch event {
	case "created", "deleted":
		return event
	case "secret_set":
		return "set the secret of"
	case "secret_deleted":
		return "removed the secret of"
	}
	return "updated"
}

// commitEvent runs apply on the committer and commits the change it
// reports with its event message, in one transaction. apply returns nil
// for a call that changed nothing (no event).
func (s *Service) commitEvent(ctx context.Context, apply func(ctx context.Context, tx store.Tx) (*change, error)) error {
	return s.d.Commit.CommitStored(ctx, func(ctx context.Context, tx store.Tx) ([]store.Message, error) {
		ch, err := apply(ctx, tx)
		if err != nil || ch == nil {
			return nil, err
		}
		return ch.message()
	}, nil)
}

// changeEndpoint loads endpoint slug on the committer, lets fn change it
// and name the event, and answers the endpoint as it then is. fn returns
// false when nothing changed: no event is sent. The audiences are taken
// in the transaction that makes the change; actor makes it.
func (s *Service) changeEndpoint(ctx context.Context, actor, slug string, fn func(ctx context.Context, tx store.Tx, e *Endpoint, ch *change) (bool, error)) (Endpoint, error) {
	var out Endpoint
	if err := validSlug("slug", slug); err != nil {
		return out, err
	}
	managers := s.holders(auth.NotificationsManage)
	err := s.commitEvent(ctx, func(ctx context.Context, tx store.Tx) (*change, error) {
		e, err := Read(ctx, tx, slug)
		if err != nil {
			return nil, EndpointErr(err, slug)
		}
		ch := &change{slug: slug, actor: actor, managers: managers, before: e.MemberTargets()}
		changed, err := fn(ctx, tx, &e, ch)
		if err != nil || !changed {
			out = e
			return nil, err
		}
		if ch.event != "deleted" {
			if e, err = Read(ctx, tx, slug); err != nil {
				return nil, err
			}
			ch.after = e.MemberTargets()
		}
		out = e
		return ch, nil
	})
	return out, err
}

// holders are the members who hold leaf now (none without Deps.Holders).
func (s *Service) holders(leaf string) []string {
	if s.d.Holders == nil {
		return nil
	}
	return s.d.Holders(leaf)
}
