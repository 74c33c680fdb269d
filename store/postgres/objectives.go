package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"svc/store"
)

const objectiveColumns = `id, title, outcome, body, status, assignee, originator, watchers, attachments,
created_at, updated_at, completed_at, result, block_reason, assignee_id, originator_id`

// attachmentJSON is the stored form of an attachment.
type attachmentJSON struct {
	Path     string `json:"path"`
	Name     string `json:"name"`
	Size     int64  `json:"size"`
	MimeType string `json:"mimeType"`
	EntryID  int64  `json:"entryId"`
}

// objectiveArgs renders the JSON columns of o.
func objectiveArgs(o store.Objective) (watchers, attachments string, err error) {
	w := o.Watchers
	if w == nil {
		w = []string{}
	}
	wb, err := json.Marshal(w)
	if err != nil {
		return "", "", err
	}
	as := make([]attachmentJSON, len(o.Attachments))
	for i, a := range o.Attachments {
		as[i] = attachmentJSON(a)
	}
	ab, err := json.Marshal(as)
	if err != nil {
		return "", "", err
	}
	return string(wb), string(ab), nil
}

// CreateObjective stores a new objective.
func (q queries) CreateObjective(ctx context.Context, o store.Objective) error {
	watchers, attachments, err := objectiveArgs(o)
	if err != nil {
		return fmt.Errorf("create objective: %w", err)
	}
	created := q.orNow(o.CreatedAt)
	_, err = q.w.ExecContext(ctx, `INSERT INTO objectives (`+objectiveColumns+`)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		o.ID, o.Title, o.Outcome, o.Body, o.Status, o.Assignee, o.Originator, watchers, attachments,
		created.UnixMilli(), q.orNow(o.UpdatedAt).UnixMilli(), msOrNull(o.CompletedAt), o.Result, o.BlockReason,
		o.AssigneeID, o.OriginatorID)
	return translate("create objective", err)
}

// GetObjective returns one objective.
func (q queries) GetObjective(ctx context.Context, id string) (store.Objective, error) {
	o, err := scanObjective(q.r.QueryRowContext(ctx, `SELECT `+objectiveColumns+` FROM objectives WHERE id = ?`, id))
	return o, translate("get objective", err)
}

// ListObjectives returns matching objectives, newest first.
func (q queries) ListObjectives(ctx context.Context, f store.ObjectiveFilter) ([]store.Objective, error) {
	var where []string
	var args []any
	if f.Assignee != "" {
		where, args = append(where, "assignee = ?"), append(args, f.Assignee)
	}
	if len(f.Statuses) > 0 {
		where = append(where, "status IN (?"+strings.Repeat(", ?", len(f.Statuses)-1)+")")
		for _, s := range f.Statuses {
			args = append(args, s)
		}
	}
	query := `SELECT ` + objectiveColumns + ` FROM objectives`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	return collect(ctx, q.r, "list objectives", scanObjective, query+" ORDER BY created_at DESC, rowid DESC", args...)
}

// UpdateObjective replaces the mutable fields of an objective.
func (q queries) UpdateObjective(ctx context.Context, o store.Objective) error {
	watchers, attachments, err := objectiveArgs(o)
	if err != nil {
		return fmt.Errorf("update objective: %w", err)
	}
	res, err := q.w.ExecContext(ctx, `UPDATE objectives SET title = ?, outcome = ?, body = ?, status = ?,
assignee = ?, assignee_id = ?, watchers = ?, attachments = ?, updated_at = ?, completed_at = ?, result = ?, block_reason = ?
WHERE id = ?`,
		o.Title, o.Outcome, o.Body, o.Status, o.Assignee, o.AssigneeID, watchers, attachments,
		q.orNow(o.UpdatedAt).UnixMilli(), msOrNull(o.CompletedAt), o.Result, o.BlockReason, o.ID)
	if err != nil {
		return translate("update objective", err)
	}
	return notFound("update objective", res)
}

// AppendObjectiveEvents stores audit events in one transaction, so an
// event of an unknown objective leaves none of the batch behind.
func (db *DB) AppendObjectiveEvents(ctx context.Context, evs []store.ObjectiveEvent) ([]store.ObjectiveEvent, error) {
	return inTx(ctx, db, func(q queries) ([]store.ObjectiveEvent, error) { return q.AppendObjectiveEvents(ctx, evs) })
}

// AppendObjectiveEvents stores audit events in order. It runs a statement
// per event on q.w, which must be a transaction.
func (q queries) AppendObjectiveEvents(ctx context.Context, evs []store.ObjectiveEvent) ([]store.ObjectiveEvent, error) {
	out := make([]store.ObjectiveEvent, len(evs))
	for i, e := range evs {
		e.CreatedAt = q.orNow(e.CreatedAt)
		var payload sql.NullString
		if e.Payload != nil {
			payload = sql.NullString{String: string(e.Payload), Valid: true}
		}
		err := q.w.QueryRowContext(ctx, `INSERT INTO objective_events (objective_id, kind, actor, created_at, payload)
VALUES (?, ?, ?, ?, ?) RETURNING id`, e.ObjectiveID, e.Kind, e.Actor, e.CreatedAt.UnixMilli(), payload).Scan(&e.ID)
		if err != nil {
			return nil, translate("append objective event", err)
		}
		e.CreatedAt = fromMS(e.CreatedAt.UnixMilli())
		out[i] = e
	}
	return out, nil
}

// ListObjectiveEvents returns an objective's audit log, oldest first.
func (q queries) ListObjectiveEvents(ctx context.Context, objectiveID string) ([]store.ObjectiveEvent, error) {
	rows, err := q.r.QueryContext(ctx, `SELECT id, objective_id, kind, actor, created_at, payload
FROM objective_events WHERE objective_id = ? ORDER BY id`, objectiveID)
	if err != nil {
		return nil, translate("list objective events", err)
	}
	defer rows.Close()
	out := []store.ObjectiveEvent{}
	for rows.Next() {
		var e store.ObjectiveEvent
		var created int64
		var payload sql.NullString
		if err := rows.Scan(&e.ID, &e.ObjectiveID, &e.Kind, &e.Actor, &created, &payload); err != nil {
			return nil, translate("list objective events", err)
		}
		e.CreatedAt = fromMS(created)
		if payload.Valid {
			e.Payload = []byte(payload.String)
		}
		out = append(out, e)
	}
	return out, translate("list objective events", rows.Err())
}

func scanObjective(s scanner) (store.Objective, error) {
	var o store.Objective
	var watchers, attachments string
	var created, updated int64
	var completed sql.NullInt64
	var result, blockReason sql.NullString
	if err := s.Scan(&o.ID, &o.Title, &o.Outcome, &o.Body, &o.Status, &o.Assignee, &o.Originator,
		&watchers, &attachments, &created, &updated, &completed, &result, &blockReason, &o.AssigneeID, &o.OriginatorID); err != nil {
		return o, err
	}
	o.CreatedAt, o.UpdatedAt, o.CompletedAt = fromMS(created), fromMS(updated), fromNullMS(completed)
	if result.Valid {
		o.Result = &result.String
	}
	if blockReason.Valid {
		o.BlockReason = &blockReason.String
	}
	if err := json.Unmarshal([]byte(watchers), &o.Watchers); err != nil {
		return o, fmt.Errorf("objective %s watchers: %w", o.ID, err)
	}
	var as []attachmentJSON
	if err := json.Unmarshal([]byte(attachments), &as); err != nil {
		return o, fmt.Errorf("objective %s attachments: %w", o.ID, err)
	}
	o.Attachments = make([]store.Attachment, len(as))
	for i, a := range as {
		o.Attachments[i] = store.Attachment(a)
	}
	return o, nil
}

// AdoptObjectiveMembers gives assignees and originators without an id one:
// owners' for the names it lists, orphan for the others.
func (q queries) AdoptObjectiveMembers(ctx context.Context, owners map[string]string, orphan string) (int64, error) {
	if orphan == "" {
		return 0, fmt.Errorf("adopt objective members: no orphan id: %w", store.ErrPrecondition)
	}
	b, err := json.Marshal(owners)
	if err != nil {
		return 0, fmt.Errorf("adopt objective members: %w", err)
	}
	res, err := q.w.ExecContext(ctx, `UPDATE objectives SET
	assignee_id = CASE WHEN assignee_id = '' THEN COALESCE(?1::jsonb ->> assignee, ?2) ELSE assignee_id END,
	originator_id = CASE WHEN originator_id = '' THEN COALESCE(?1::jsonb ->> originator, ?2) ELSE originator_id END
WHERE assignee_id = '' OR originator_id = ''`, string(b), orphan)
	if err != nil {
		return 0, translate("adopt objective members", err)
	}
	n, err := res.RowsAffected()
	return n, translate("adopt objective members", err)
}
