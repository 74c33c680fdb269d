package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"svc/store"
)

const hookPendingColumns = `delivery, endpoint, member, kind, received_at, due_at, level, items`

// AddHookPending stores a row the delivery policy holds.
func (q queries) AddHookPending(ctx context.Context, p store.HookPending) error {
	_, err := q.w.ExecContext(ctx, `INSERT INTO hook_pending (`+hookPendingColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		p.Delivery, p.Endpoint, p.Member, p.Kind, p.ReceivedAt.UnixMilli(), p.DueAt.UnixMilli(), p.Level, jsonOr(p.Items, "[]"))
	return translate("add hook pending", err)
}

// ListHookPending returns the selected rows by endpoint, newest first.
func (q queries) ListHookPending(ctx context.Context, f store.HookPendingFilter) ([]store.HookPending, error) {
	var (
		where []string
		args  []any
	)
	for _, c := range []struct{ col, v string }{{"kind", f.Kind}, {"member", f.Member}, {"endpoint", f.Endpoint}} {
		if c.v != "" {
			where = append(where, c.col+" = ?")
			args = append(args, c.v)
		}
	}
	if !f.DueBy.IsZero() {
		where = append(where, "due_at <= ?")
		args = append(args, f.DueBy.UnixMilli())
	}
	query := `SELECT ` + hookPendingColumns + ` FROM hook_pending`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	rows, err := q.r.QueryContext(ctx, query+` ORDER BY endpoint, received_at DESC, rowid DESC`, args...)
	if err != nil {
		return nil, translate("list hook pending", err)
	}
	defer rows.Close()
	out := []store.HookPending{}
	for rows.Next() {
		var (
			p             store.HookPending
			received, due int64
			items         string
		)
		if err := rows.Scan(&p.Delivery, &p.Endpoint, &p.Member, &p.Kind, &received, &due, &p.Level, &items); err != nil {
			return nil, translate("list hook pending", err)
		}
		p.ReceivedAt, p.DueAt, p.Items = fromMS(received), fromMS(due), []byte(items)
		out = append(out, p)
	}
	return out, translate("list hook pending", rows.Err())
}

// DeleteHookPending removes one row.
func (q queries) DeleteHookPending(ctx context.Context, delivery, member, kind string) error {
	res, err := q.w.ExecContext(ctx, `DELETE FROM hook_pending WHERE delivery = ? AND member = ? AND kind = ?`, delivery, member, kind)
	if err != nil {
		return translate("delete hook pending", err)
	}
	return notFound("delete hook pending", res)
}

// CountHookPending counts a receipt's rows.
func (q queries) CountHookPending(ctx context.Context, delivery string) (int, error) {
	var n int
	st, err := q.stmt(ctx, false, countHookPendingQuery)
	if err != nil {
		return 0, translate("count hook pending", err)
	}
	err = st.QueryRowContext(ctx, delivery).Scan(&n)
	return n, translate("count hook pending", err)
}

// HookPendingMembers are the members with rows of a kind.
func (q queries) HookPendingMembers(ctx context.Context, kind string) ([]string, error) {
	rows, err := q.r.QueryContext(ctx, `SELECT DISTINCT member FROM hook_pending WHERE kind = ? AND member <> '' ORDER BY member`, kind)
	if err != nil {
		return nil, translate("hook pending members", err)
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var m string
		if err := rows.Scan(&m); err != nil {
			return nil, translate("hook pending members", err)
		}
		out = append(out, m)
	}
	return out, translate("hook pending members", rows.Err())
}

// NextHookPendingDue is the earliest due time of any row.
func (q queries) NextHookPendingDue(ctx context.Context) (time.Time, bool, error) {
	var due sql.NullInt64
	if err := q.r.QueryRowContext(ctx, `SELECT min(due_at) FROM hook_pending`).Scan(&due); err != nil {
		return time.Time{}, false, translate("next hook pending due", err)
	}
	if !due.Valid {
		return time.Time{}, false, nil
	}
	return fromMS(due.Int64), true, nil
}

// Statements of every delivery's transaction (pgx prepares and caches
// each per connection).
const (
	countHookPendingQuery = `SELECT count(*) FROM hook_pending WHERE delivery = ?`
	hookMessageIDsQuery   = `SELECT message_ids FROM hook_deliveries WHERE id = ?`
	setHookStatusQuery    = `UPDATE hook_deliveries SET status = ?, reason = ?, message_ids = ? WHERE id = ?`
)

// SetHookDeliveryStatus sets a receipt's status and reason and appends
// message ids.
func (q queries) SetHookDeliveryStatus(ctx context.Context, id, status, reason string, messageIDs []string) error {
	var raw string
	get, err := q.stmt(ctx, true, hookMessageIDsQuery)
	if err != nil {
		return translate("set hook delivery status", err)
	}
	if err := get.QueryRowContext(ctx, id).Scan(&raw); err != nil {
		return translate("set hook delivery status", err)
	}
	var ids []string
	if err := json.Unmarshal([]byte(raw), &ids); err != nil {
		return fmt.Errorf("set hook delivery status: message ids: %w", err)
	}
	b, err := json.Marshal(nonNilStrings(append(ids, messageIDs...)))
	if err != nil {
		return err
	}
	set, err := q.stmt(ctx, true, setHookStatusQuery)
	if err != nil {
		return translate("set hook delivery status", err)
	}
	res, err := set.ExecContext(ctx, status, reason, string(b), id)
	if err != nil {
		return translate("set hook delivery status", err)
	}
	return notFound("set hook delivery status", res)
}
