package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"svc/server/apierr"
	"svc/server/wire"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	apiv1 "svc/gen/svc/v1"
	"svc/server/auth"
	"svc/server/teamconfig"
	"svc/store"
)

// Objective field bounds. The spec says only "short" for the title.
const (
	maxObjectiveTitle   = 200
	maxObjectiveOutcome = 8 << 10
	maxObjectiveBody    = 64 << 10
	maxObjectiveNote    = 8 << 10 // result, blockReason, cancel reason, reassign note
	maxWatchers         = 256
)

// Audit event kinds (ObjectiveEvent in proto/svc/v1).
const (
	evAssigned       = "assigned"
	evBlocked        = "blocked"
	evUnblocked      = "unblocked"
	evCompleted      = "completed"
	evCancelled      = "cancelled"
	evReassigned     = "reassigned"
	evWatcherAdded   = "watcher_added"
	evWatcherRemoved = "watcher_removed"
)

// Activity markers (docs/TELEMETRY.md): the rows that say who held an
// objective when.
const (
	activityOpen  = store.KindObjectiveOpen
	activityClose = store.KindObjectiveClose
)

// Objectives implements apiv1.ObjectivesServer. Every change runs on the
// message committer (messenger.change): the state check, the new state, its
// audit events and the thread messages that report them commit in one
// transaction, and changes to one objective never interleave.
type Objectives struct {
	apiv1.UnimplementedObjectivesServer
	*core
}

var _ apiv1.ObjectivesServer = (*Objectives)(nil)

// event is an audit event a change appends, with who else its thread
// message reaches (a reassignment's old assignee).
type event struct {
	kind    string
	payload map[string]any
	also    []string
}

// ListObjectives implements apiv1.ObjectivesServer. Objectives are visible
// to every member; their discussion threads are not.
func (s *Objectives) ListObjectives(ctx context.Context, req *apiv1.ListObjectivesRequest) (*apiv1.ListObjectivesResponse, error) {
	f := store.ObjectiveFilter{Assignee: req.GetAssignee()}
	if f.Assignee != "" && !teamconfig.ValidName(f.Assignee) {
		return nil, apierr.Invalid("assignee", "must be a member name")
	}
	if st := req.GetStatus(); st != "" {
		if !validStatus(st) {
			return nil, apierr.Invalid("status", "must be one of active, blocked, done, cancelled")
		}
		f.Statuses = []string{st}
	}
	os, err := s.store.ListObjectives(ctx, f)
	if err != nil {
		return nil, err
	}
	resp := &apiv1.ListObjectivesResponse{Objectives: make([]*apiv1.Objective, len(os))}
	for i, o := range os {
		resp.Objectives[i] = objectiveToProto(o)
	}
	return resp, nil
}

// CreateObjective implements apiv1.ObjectivesServer.
func (s *Objectives) CreateObjective(ctx context.Context, req *apiv1.CreateObjectiveRequest) (*apiv1.CreateObjectiveResponse, error) {
	p := mustPrincipal(ctx)
	if err := apierr.FirstErr(
		apierr.ValidText("title", req.GetTitle(), maxObjectiveTitle, true),
		apierr.ValidText("outcome", req.GetOutcome(), maxObjectiveOutcome, true),
		apierr.ValidText("body", req.GetBody(), maxObjectiveBody, false),
		s.knownMember("assignee", req.GetAssignee()),
	); err != nil {
		return nil, err
	}
	if len(req.GetWatchers()) > maxWatchers {
		return nil, apierr.Invalid("watchers", "at most %d", maxWatchers)
	}
	var watchers []string
	for i, w := range req.GetWatchers() {
		if err := s.knownMember(fmt.Sprintf("watchers[%d]", i), w); err != nil {
			return nil, err
		}
		if !slices.Contains(watchers, w) {
			watchers = append(watchers, w)
		}
	}
	paths, err := attachmentPaths(req.GetAttachments())
	if err != nil {
		return nil, err
	}
	attachments, err := s.attachments(ctx, p, paths)
	if err != nil {
		return nil, err
	}
	now := s.now()
	managers := s.holders(auth.MembersManage)
	ids := s.memberSnapshot()
	o := store.Objective{
		ID: newID(), Title: req.GetTitle(), Outcome: req.GetOutcome(), Body: req.GetBody(),
		Status: store.StatusActive, Assignee: req.GetAssignee(), Originator: p.Member,
		AssigneeID: ids[req.GetAssignee()], OriginatorID: ids[p.Member],
		Watchers: watchers, Attachments: attachments, CreatedAt: now, UpdatedAt: now,
	}
	r := s.msgs.change(ctx, func(ctx context.Context, tx store.Tx) ([]store.Message, error) {
		if err := tx.CreateObjective(ctx, o); err != nil {
			return nil, err
		}
		if err := tx.GrantEntries(ctx, entryIDs(o.Attachments), participants(o, ids)); err != nil {
			return nil, err
		}
		return s.record(ctx, tx, o, managers, ids, p.Member, now, []event{{kind: evAssigned, payload: map[string]any{
			"assignee": o.Assignee, "title": o.Title, "outcome": o.Outcome,
		}}})
	}, nil, nil)
	if r.err != nil {
		return nil, r.err
	}
	s.mark(ctx, o, o.Assignee, activityOpen, "", now)
	s.objectiveChanged(objectiveCreated, o)
	return &apiv1.CreateObjectiveResponse{Objective: objectiveToProto(o)}, nil
}

// GetObjective implements apiv1.ObjectivesServer.
func (s *Objectives) GetObjective(ctx context.Context, req *apiv1.GetObjectiveRequest) (*apiv1.GetObjectiveResponse, error) {
	o, err := s.store.GetObjective(ctx, req.GetId())
	if err != nil {
		return nil, objectiveErr(err, req.GetId())
	}
	evs, err := s.store.ListObjectiveEvents(ctx, o.ID)
	if err != nil {
		return nil, err
	}
	resp := &apiv1.GetObjectiveResponse{Objective: objectiveToProto(o), Events: make([]*apiv1.ObjectiveEvent, len(evs))}
	for i, e := range evs {
		resp.Events[i] = objectiveEventToProto(e)
	}
	return resp, nil
}

// UpdateObjective implements apiv1.ObjectivesServer: block and unblock.
func (s *Objectives) UpdateObjective(ctx context.Context, req *apiv1.UpdateObjectiveRequest) (*apiv1.UpdateObjectiveResponse, error) {
	p := mustPrincipal(ctx)
	self := s.ids.current(p.Member)
	o, err := s.mutate(ctx, req.GetId(), p, func(o *store.Objective) ([]event, error) {
		if !isAssignee(*o, p.Member, self) && !p.Has(auth.MembersManage) {
			return nil, fmt.Errorf("%w: only the assignee or a members.manage holder may change an objective's status", auth.ErrForbidden)
		}
		if err := notTerminal(*o); err != nil {
			return nil, err
		}
		switch req.GetStatus() {
		case store.StatusBlocked:
			if err := apierr.ValidText("blockReason", req.GetBlockReason(), maxObjectiveNote, true); err != nil {
				return nil, err
			}
			if o.Status != store.StatusActive {
				return nil, apierr.Errorf(apierr.CodeConflict, "objective %s is already blocked", o.ID)
			}
			reason := req.GetBlockReason()
			o.Status, o.BlockReason = store.StatusBlocked, &reason
			return []event{{kind: evBlocked, payload: map[string]any{"reason": reason}}}, nil
		case store.StatusActive:
			if o.Status != store.StatusBlocked {
				return nil, apierr.Errorf(apierr.CodeConflict, "objective %s is not blocked", o.ID)
			}
			o.Status, o.BlockReason = store.StatusActive, nil
			return []event{{kind: evUnblocked, payload: map[string]any{}}}, nil
		case "":
			return nil, apierr.Invalid("status", "is required: active or blocked")
		default:
			return nil, apierr.Invalid("status", "must be active or blocked (complete and cancel have their own calls)")
		}
	})
	if err != nil {
		return nil, err
	}
	return &apiv1.UpdateObjectiveResponse{Objective: objectiveToProto(o)}, nil
}

// CompleteObjective implements apiv1.ObjectivesServer.
func (s *Objectives) CompleteObjective(ctx context.Context, req *apiv1.CompleteObjectiveRequest) (*apiv1.CompleteObjectiveResponse, error) {
	p := mustPrincipal(ctx)
	self := s.ids.current(p.Member)
	o, err := s.mutate(ctx, req.GetId(), p, func(o *store.Objective) ([]event, error) {
		if !isAssignee(*o, p.Member, self) {
			return nil, fmt.Errorf("%w: only the assignee may complete an objective", auth.ErrForbidden)
		}
		if err := notTerminal(*o); err != nil {
			return nil, err
		}
		if err := apierr.ValidText("result", req.GetResult(), maxObjectiveNote, true); err != nil {
			return nil, err
		}
		result := req.GetResult()
		o.Status, o.Result, o.BlockReason = store.StatusDone, &result, nil
		return []event{{kind: evCompleted, payload: map[string]any{"result": result}}}, nil
	})
	if err != nil {
		return nil, err
	}
	s.mark(ctx, o, o.Assignee, activityClose, "done", o.UpdatedAt)
	return &apiv1.CompleteObjectiveResponse{Objective: objectiveToProto(o)}, nil
}

// CancelObjective implements apiv1.ObjectivesServer.
func (s *Objectives) CancelObjective(ctx context.Context, req *apiv1.CancelObjectiveRequest) (*apiv1.CancelObjectiveResponse, error) {
	p := mustPrincipal(ctx)
	self := s.ids.current(p.Member)
	o, err := s.mutate(ctx, req.GetId(), p, func(o *store.Objective) ([]event, error) {
		if !isOriginator(*o, p.Member, self) && !p.Has(auth.ObjectivesCancel) {
			return nil, fmt.Errorf("%w: only the originator or an objectives.cancel holder may cancel an objective", auth.ErrForbidden)
		}
		if err := notTerminal(*o); err != nil {
			return nil, err
		}
		if err := apierr.ValidText("reason", req.GetReason(), maxObjectiveNote, false); err != nil {
			return nil, err
		}
		o.Status, o.BlockReason = store.StatusCancelled, nil
		payload := map[string]any{}
		if req.GetReason() != "" {
			payload["reason"] = req.GetReason()
		}
		return []event{{kind: evCancelled, payload: payload}}, nil
	})
	if err != nil {
		return nil, err
	}
	s.mark(ctx, o, o.Assignee, activityClose, "cancelled", o.UpdatedAt)
	return &apiv1.CancelObjectiveResponse{Objective: objectiveToProto(o)}, nil
}

// ReassignObjective implements apiv1.ObjectivesServer. The permission table
// already demands members.manage.
func (s *Objectives) ReassignObjective(ctx context.Context, req *apiv1.ReassignObjectiveRequest) (*apiv1.ReassignObjectiveResponse, error) {
	p := mustPrincipal(ctx)
	if err := apierr.FirstErr(
		s.knownMember("to", req.GetTo()),
		apierr.ValidText("note", req.GetNote(), maxObjectiveNote, false),
	); err != nil {
		return nil, err
	}
	var old string
	to := s.ids.current(req.GetTo())
	o, err := s.mutate(ctx, req.GetId(), p, func(o *store.Objective) ([]event, error) {
		if err := notTerminal(*o); err != nil {
			return nil, err
		}
		if isAssignee(*o, req.GetTo(), to) {
			return nil, apierr.Errorf(apierr.CodeConflict, "objective %s is already assigned to %s", o.ID, o.Assignee)
		}
		old = o.Assignee
		o.Assignee, o.AssigneeID, o.Status, o.BlockReason = req.GetTo(), to, store.StatusActive, nil
		payload := map[string]any{"from": old, "to": o.Assignee}
		if req.GetNote() != "" {
			payload["note"] = req.GetNote()
		}
		return []event{{kind: evReassigned, payload: payload, also: []string{old}}}, nil
	})
	if err != nil {
		return nil, err
	}
	s.mark(ctx, o, old, activityClose, "reassigned", o.UpdatedAt)
	s.mark(ctx, o, o.Assignee, activityOpen, "", o.UpdatedAt)
	return &apiv1.ReassignObjectiveResponse{Objective: objectiveToProto(o)}, nil
}

// UpdateWatchers implements apiv1.ObjectivesServer. Adding a watcher that is
// there, or removing one that is not, changes nothing and records nothing.
func (s *Objectives) UpdateWatchers(ctx context.Context, req *apiv1.UpdateWatchersRequest) (*apiv1.UpdateWatchersResponse, error) {
	p := mustPrincipal(ctx)
	if len(req.GetAdd()) == 0 && len(req.GetRemove()) == 0 {
		return nil, apierr.Invalid("add", "at least one of add and remove is required")
	}
	if len(req.GetAdd())+len(req.GetRemove()) > maxWatchers {
		return nil, apierr.Invalid("add", "at most %d names in one call", maxWatchers)
	}
	for i, n := range req.GetAdd() {
		if err := s.knownMember(fmt.Sprintf("add[%d]", i), n); err != nil {
			return nil, err
		}
	}
	for i, n := range req.GetRemove() {
		if err := s.knownMember(fmt.Sprintf("remove[%d]", i), n); err != nil {
			return nil, err
		}
	}
	self := s.ids.current(p.Member)
	o, err := s.mutate(ctx, req.GetId(), p, func(o *store.Objective) ([]event, error) {
		if !isOriginator(*o, p.Member, self) && !p.Has(auth.ObjectivesWatch) {
			return nil, fmt.Errorf("%w: only the originator or an objectives.watch holder may change watchers", auth.ErrForbidden)
		}
		var evs []event
		for _, n := range req.GetAdd() {
			if !slices.Contains(o.Watchers, n) {
				if len(o.Watchers) >= maxWatchers {
					return nil, apierr.Invalid("add", "an objective has at most %d watchers", maxWatchers)
				}
				o.Watchers = append(o.Watchers, n)
				evs = append(evs, event{kind: evWatcherAdded, payload: map[string]any{"watcher": n}})
			}
		}
		for _, n := range req.GetRemove() {
			if i := slices.Index(o.Watchers, n); i >= 0 {
				o.Watchers = slices.Delete(o.Watchers, i, i+1)
				// A removed watcher hears of it once more.
				evs = append(evs, event{kind: evWatcherRemoved, payload: map[string]any{"watcher": n}, also: []string{n}})
			}
		}
		return evs, nil
	})
	if err != nil {
		return nil, err
	}
	return &apiv1.UpdateWatchersResponse{Objective: objectiveToProto(o)}, nil
}

// DiscussObjective implements apiv1.ObjectivesServer: a post on the thread,
// not an audit event.
func (s *Objectives) DiscussObjective(ctx context.Context, req *apiv1.DiscussObjectiveRequest) (*apiv1.DiscussObjectiveResponse, error) {
	p := mustPrincipal(ctx)
	if err := apierr.FirstErr(
		apierr.ValidText("body", req.GetBody(), maxBody, true),
		apierr.ValidText("title", req.GetTitle(), maxTitle, false),
	); err != nil {
		return nil, err
	}
	attachments, err := s.attachments(ctx, p, req.GetAttachments())
	if err != nil {
		return nil, err
	}
	paths := make([]string, len(attachments))
	for i, a := range attachments {
		paths[i] = a.Path
	}
	managers := s.holders(auth.MembersManage)
	ids := s.memberSnapshot()
	r := s.msgs.push(ctx, func(ctx context.Context, tx store.Tx) ([]store.Message, error) {
		o, err := tx.GetObjective(ctx, req.GetId())
		if err != nil {
			return nil, objectiveErr(err, req.GetId())
		}
		members := threadMembers(o, managers, ids)
		if !slices.Contains(members, p.Member) {
			return nil, fmt.Errorf("%w: only the objective's thread members may discuss it", auth.ErrForbidden)
		}
		thread := objectiveThread(o.ID)
		msg := store.Message{
			From: p.Member, Thread: thread, Title: req.GetTitle(), Body: req.GetBody(), Level: "info",
			Attachments: paths, Recipients: slices.DeleteFunc(members, func(m string) bool { return m == p.Member }),
		}
		msg.Data, err = json.Marshal(map[string]any{"thread": thread, "objectiveId": o.ID})
		if err != nil {
			return nil, err
		}
		if err := tx.GrantEntries(ctx, entryIDs(attachments), msg.Recipients); err != nil {
			return nil, err
		}
		return []store.Message{msg}, nil
	}, nil, nil)
	if r.err != nil {
		return nil, r.err
	}
	return &apiv1.DiscussObjectiveResponse{Message: r.msgs[0]}, nil
}

// mutate loads an objective on the committer, lets fn check and change it,
// and commits the change with its audit events and thread messages.
func (s *Objectives) mutate(ctx context.Context, id string, p *auth.Principal, fn func(o *store.Objective) ([]event, error)) (store.Objective, error) {
	return s.mutateObjective(ctx, id, p.Member, fn)
}

// mutateObjective loads an objective on the committer, lets fn check and
// change it, and commits the change with its audit events and thread
// messages, actor named as the one who made it.
func (c *core) mutateObjective(ctx context.Context, id, actor string, fn func(o *store.Objective) ([]event, error)) (store.Objective, error) {
	var out store.Objective
	changed := false
	managers := c.holders(auth.MembersManage)
	ids := c.memberSnapshot()
	r := c.msgs.change(ctx, func(ctx context.Context, tx store.Tx) ([]store.Message, error) {
		o, err := tx.GetObjective(ctx, id)
		if err != nil {
			return nil, objectiveErr(err, id)
		}
		before := participants(o, ids)
		evs, err := fn(&o)
		if err != nil {
			return nil, err
		}
		if len(evs) == 0 {
			out = o
			return nil, nil
		}
		now := c.now()
		if now.Before(o.UpdatedAt) {
			now = o.UpdatedAt
		}
		o.UpdatedAt = now
		if o.Status == store.StatusDone {
			o.CompletedAt = now
		}
		if err := tx.UpdateObjective(ctx, o); err != nil {
			return nil, err
		}
		// New participants (a watcher, a new assignee) can read the
		// objective's attachments from now on: the files that were
		// attached, wherever they are now.
		joined := slices.DeleteFunc(participants(o, ids), func(m string) bool { return slices.Contains(before, m) })
		if err := tx.GrantEntries(ctx, entryIDs(o.Attachments), joined); err != nil {
			return nil, err
		}
		out, changed = o, true
		return record(ctx, tx, o, managers, ids, actor, now, evs)
	}, nil, nil)
	if r.err == nil && changed {
		c.objectiveChanged(objectiveUpdated, out)
	}
	return out, r.err
}

// record appends the audit events of a change and returns the thread
// messages that report them.
func (s *Objectives) record(ctx context.Context, tx store.Tx, o store.Objective, managers []string, ids map[string]string, actor string, at time.Time, evs []event) ([]store.Message, error) {
	return record(ctx, tx, o, managers, ids, actor, at, evs)
}

// record appends the audit events of a change and returns the thread
// messages that report them, to the thread's members now (ids).
func record(ctx context.Context, tx store.Tx, o store.Objective, managers []string, ids map[string]string, actor string, at time.Time, evs []event) ([]store.Message, error) {
	rows := make([]store.ObjectiveEvent, len(evs))
	for i, e := range evs {
		payload, err := json.Marshal(e.payload)
		if err != nil {
			return nil, err
		}
		rows[i] = store.ObjectiveEvent{ObjectiveID: o.ID, Kind: e.kind, Actor: actor, CreatedAt: at, Payload: payload}
	}
	if _, err := tx.AppendObjectiveEvents(ctx, rows); err != nil {
		return nil, err
	}
	members := threadMembers(o, managers, ids)
	msgs := make([]store.Message, len(evs))
	for i, e := range evs {
		recipients := members
		for _, m := range e.also {
			// Only a member: a deleted one hears nothing more.
			if _, ok := ids[m]; ok && !slices.Contains(recipients, m) {
				recipients = append(slices.Clone(recipients), m)
			}
		}
		msg, err := eventMessage(o, actor, e, recipients)
		if err != nil {
			return nil, err
		}
		msgs[i] = msg
	}
	return msgs, nil
}

// eventMessage is the thread message that reports an audit event: from the
// actor, to every thread member (the actor included, so its other sessions
// see the change too).
func eventMessage(o store.Objective, actor string, e event, recipients []string) (store.Message, error) {
	thread := objectiveThread(o.ID)
	msg := store.Message{
		From: actor, Thread: thread, Title: apierr.TruncateUTF8(o.Title, maxTitle), Level: "info",
		Recipients: recipients,
	}
	str := func(k string) string { v, _ := e.payload[k].(string); return v }
	switch e.kind {
	case evAssigned:
		msg.Body = fmt.Sprintf("%s assigned %s: %s\nOutcome: %s", actor, o.Assignee, o.Title, o.Outcome)
		for _, a := range o.Attachments {
			msg.Attachments = append(msg.Attachments, a.Path)
		}
	case evBlocked:
		msg.Level = "warning"
		msg.Body = fmt.Sprintf("%s blocked %q: %s", actor, o.Title, str("reason"))
	case evUnblocked:
		msg.Body = fmt.Sprintf("%s unblocked %q", actor, o.Title)
	case evCompleted:
		msg.Level = "notice"
		msg.Body = fmt.Sprintf("%s completed %q: %s", actor, o.Title, str("result"))
	case evCancelled:
		msg.Body = fmt.Sprintf("%s cancelled %q", actor, o.Title)
		if r := str("reason"); r != "" {
			msg.Body += ": " + r
		}
	case evReassigned:
		msg.Body = fmt.Sprintf("%s reassigned %q from %s to %s", actor, o.Title, str("from"), str("to"))
		if n := str("note"); n != "" {
			msg.Body += ": " + n
		}
	case evWatcherAdded:
		msg.Body = fmt.Sprintf("%s added %s as a watcher of %q", actor, str("watcher"), o.Title)
	case evWatcherRemoved:
		msg.Body = fmt.Sprintf("%s removed %s as a watcher of %q", actor, str("watcher"), o.Title)
	}
	msg.Body = apierr.TruncateUTF8(msg.Body, maxBody)
	data, err := json.Marshal(map[string]any{
		"thread": thread, "kind": "objective_event", "event": e.kind,
		"objectiveId": o.ID, "status": o.Status, "assignee": o.Assignee, "payload": e.payload,
	})
	if err != nil {
		return msg, err
	}
	msg.Data = data
	return msg, nil
}

// threadMembers are the members of obj:<id>: originator, assignee,
// watchers and the members.manage holders given, each once.
func threadMembers(o store.Objective, managers []string, ids map[string]string) []string {
	out := participants(o, ids)
	for _, m := range managers {
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// participants are the objective's originator, assignee and watchers, each
// once: the members its attachments are granted to (members.manage
// holders read every file anyway). ids are the members now, by name: an
// originator or assignee whose name is now another member's (or no
// member's) is left out, and so is a watcher that is no member.
func participants(o store.Objective, ids map[string]string) []string {
	var out []string
	add := func(name string, ok bool) {
		if ok && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	member := func(name string) bool { _, ok := ids[name]; return ok }
	add(o.Originator, member(o.Originator) && isOriginator(o, o.Originator, ids[o.Originator]))
	add(o.Assignee, member(o.Assignee) && isAssignee(o, o.Assignee, ids[o.Assignee]))
	for _, w := range o.Watchers {
		add(w, member(w))
	}
	return out
}

// isAssignee reports whether the member name, whose id is id, is o's
// assignee: the name alone is not enough once a name was deleted and
// created again (an objective from before ids goes by the name).
func isAssignee(o store.Objective, name, id string) bool {
	return o.Assignee == name && (o.AssigneeID == "" || o.AssigneeID == id)
}

// isOriginator is isAssignee for o's originator.
func isOriginator(o store.Objective, name, id string) bool {
	return o.Originator == name && (o.OriginatorID == "" || o.OriginatorID == id)
}

// memberSnapshot is every member's id by name now: what an objective
// change reads before it queues, since the committer may not read the
// team.
func (c *core) memberSnapshot() map[string]string {
	ms := c.team.Members()
	out := make(map[string]string, len(ms))
	for _, m := range ms {
		out[m.Name] = m.ID
	}
	return out
}

// mark writes an activity marker into member's stream. The activity store
// is a separate database, so this follows the commit; a failure is logged,
// the change stands.
func (c *core) mark(ctx context.Context, o store.Objective, member, kind, reason string, at time.Time) {
	c.markAs(ctx, o, member, "", kind, reason, at)
}

// markAs is mark into the stream of member's member id (its name's
// current or last member's when "").
func (c *core) markAs(ctx context.Context, o store.Objective, member, id, kind, reason string, at time.Time) {
	if !c.act.Enabled() {
		return
	}
	data := map[string]any{"objectiveId": o.ID, "title": o.Title}
	if reason != "" {
		data["reason"] = reason
	}
	b, err := json.Marshal(data)
	if err == nil {
		_, err = c.act.Write(context.WithoutCancel(ctx), store.ActivityBatch{Events: []store.ActivityEvent{{
			Member: member, MemberUID: id, Kind: kind, TS: at, ObjectiveID: o.ID, Data: b,
		}}})
	}
	if err != nil {
		c.log.ErrorContext(ctx, "activity marker lost", "member", member, "kind", kind, "objective", o.ID, "err", err)
	}
}

// attachmentPaths reads create's attachments: paths, as strings or as
// {path} objects.
func attachmentPaths(vs []*structpb.Value) ([]string, error) {
	if len(vs) > maxAttachments {
		return nil, apierr.Invalid("attachments", "at most %d", maxAttachments)
	}
	paths := make([]string, len(vs))
	for i, v := range vs {
		switch k := v.GetKind().(type) {
		case *structpb.Value_StringValue:
			paths[i] = k.StringValue
		case *structpb.Value_StructValue:
			pv, ok := k.StructValue.GetFields()["path"].GetKind().(*structpb.Value_StringValue)
			if !ok {
				return nil, apierr.Invalid(fmt.Sprintf("attachments[%d].path", i), "is required")
			}
			paths[i] = pv.StringValue
		default:
			return nil, apierr.Invalid(fmt.Sprintf("attachments[%d]", i), "must be a path or {path}")
		}
	}
	return paths, nil
}

func objectiveThread(id string) string { return "obj:" + id }

func validStatus(s string) bool {
	switch s {
	case store.StatusActive, store.StatusBlocked, store.StatusDone, store.StatusCancelled:
		return true
	}
	return false
}

// notTerminal refuses changes to done and cancelled objectives.
func notTerminal(o store.Objective) error {
	if o.Status == store.StatusDone || o.Status == store.StatusCancelled {
		return apierr.Errorf(apierr.CodeConflict, "objective %s is %s", o.ID, o.Status)
	}
	return nil
}

func objectiveErr(err error, id string) error {
	if errors.Is(err, store.ErrNotFound) {
		return apierr.Errorf(apierr.CodeNotFound, "no objective %q", id)
	}
	return err
}

func objectiveToProto(o store.Objective) *apiv1.Objective {
	po := &apiv1.Objective{
		Id: o.ID, Title: o.Title, Outcome: o.Outcome, Body: o.Body, Status: o.Status,
		Assignee: o.Assignee, Originator: o.Originator, Watchers: nonNil(o.Watchers),
		CreatedAt: wire.MS(o.CreatedAt), UpdatedAt: wire.MS(o.UpdatedAt), CompletedAt: wire.OptMS(o.CompletedAt),
		Result: o.Result, BlockReason: o.BlockReason, Attachments: []*apiv1.Attachment{},
	}
	for _, a := range o.Attachments {
		po.Attachments = append(po.Attachments, &apiv1.Attachment{Path: a.Path, Name: a.Name, Size: float64(a.Size), MimeType: a.MimeType})
	}
	return po
}

func objectiveEventToProto(e store.ObjectiveEvent) *apiv1.ObjectiveEvent {
	return &apiv1.ObjectiveEvent{
		Id: fmt.Sprint(e.ID), ObjectiveId: e.ObjectiveID, Kind: e.Kind, Actor: e.Actor,
		CreatedAt: wire.MS(e.CreatedAt), Payload: wire.Struct(e.Payload),
	}
}
