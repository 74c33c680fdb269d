package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"svc/store"
)

const hookEndpointColumns = `slug, display_name, targets, auth_kind, auth_header, auth_prefix, auth_profile, filters, template, policy,
dedupe_header, enabled, level, secret, created_at, updated_at`

// CreateHookEndpoint stores an endpoint.
func (q queries) CreateHookEndpoint(ctx context.Context, e store.HookEndpoint) error {
	created := q.orNow(e.CreatedAt)
	updated := e.UpdatedAt
	if updated.IsZero() {
		updated = created
	}
	_, err := q.w.ExecContext(ctx, `INSERT INTO hook_endpoints (`+hookEndpointColumns+`)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		e.Slug, e.DisplayName, jsonOr(e.Targets, "[]"), e.Auth.Kind, e.Auth.HeaderName, e.Auth.Prefix, nullString(e.AuthProfile),
		jsonOr(e.Filters, "[]"), e.Template, jsonOr(e.Policy, "{}"), e.DedupeHeader, e.Enabled, e.Level, nullBytes(e.Secret),
		created.UnixMilli(), updated.UnixMilli())
	return translate("create hook endpoint", err)
}

// PruneHookDeliveries deletes old receipts that hold no pending row.
func (q queries) PruneHookDeliveries(ctx context.Context, before time.Time, limit int) (int, error) {
	res, err := q.w.ExecContext(ctx, `DELETE FROM hook_deliveries WHERE id IN (
SELECT d.id FROM hook_deliveries d WHERE d.received_at < ?
AND NOT EXISTS (SELECT 1 FROM hook_pending p WHERE p.delivery = d.id)
ORDER BY d.received_at LIMIT ?)`, before.UnixMilli(), limit)
	if err != nil {
		return 0, translate("prune hook deliveries", err)
	}
	n, err := res.RowsAffected()
	return int(n), translate("prune hook deliveries", err)
}

// Statements of every delivery's transaction, prepared on the writer at
// open (see Open).
var (
	addHookDeliveryQuery = `INSERT INTO hook_deliveries (` + hookDeliveryColumns + `, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	setHookMessagesQuery = `UPDATE hook_deliveries SET message_ids = ? WHERE id = ?`
	getHookDeliveryQuery = `SELECT ` + hookDeliveryColumns + `, body FROM hook_deliveries WHERE id = ?`
)

// getHookEndpointQuery runs on every hook delivery: a cached statement.
var getHookEndpointQuery = `SELECT ` + hookEndpointColumns + ` FROM hook_endpoints WHERE slug = ?`

// GetHookEndpoint returns an endpoint.
func (q queries) GetHookEndpoint(ctx context.Context, slug string) (store.HookEndpoint, error) {
	st, err := q.stmt(ctx, false, getHookEndpointQuery)
	if err != nil {
		return store.HookEndpoint{}, translate("get hook endpoint", err)
	}
	e, err := scanHookEndpoint(st.QueryRowContext(ctx, slug))
	return e, translate("get hook endpoint", err)
}

// ListHookEndpoints returns every endpoint by slug.
func (q queries) ListHookEndpoints(ctx context.Context) ([]store.HookEndpoint, error) {
	rows, err := q.r.QueryContext(ctx, `SELECT `+hookEndpointColumns+` FROM hook_endpoints ORDER BY slug`)
	if err != nil {
		return nil, translate("list hook endpoints", err)
	}
	defer rows.Close()
	out := []store.HookEndpoint{}
	for rows.Next() {
		e, err := scanHookEndpoint(rows)
		if err != nil {
			return nil, translate("list hook endpoints", err)
		}
		out = append(out, e)
	}
	return out, translate("list hook endpoints", rows.Err())
}

// UpdateHookEndpoint replaces an endpoint's mutable fields.
func (q queries) UpdateHookEndpoint(ctx context.Context, e store.HookEndpoint) error {
	res, err := q.w.ExecContext(ctx, `UPDATE hook_endpoints SET display_name = ?, targets = ?, auth_kind = ?, auth_header = ?, auth_prefix = ?,
auth_profile = ?, filters = ?, template = ?, policy = ?, dedupe_header = ?, enabled = ?, level = ?, updated_at = ? WHERE slug = ?`,
		e.DisplayName, jsonOr(e.Targets, "[]"), e.Auth.Kind, e.Auth.HeaderName, e.Auth.Prefix, nullString(e.AuthProfile),
		jsonOr(e.Filters, "[]"), e.Template, jsonOr(e.Policy, "{}"), e.DedupeHeader, e.Enabled, e.Level, q.orNow(e.UpdatedAt).UnixMilli(), e.Slug)
	if err != nil {
		return translate("update hook endpoint", err)
	}
	return notFound("update hook endpoint", res)
}

// DeleteHookEndpoint removes an endpoint; its receipts go with it.
func (q queries) DeleteHookEndpoint(ctx context.Context, slug string) error {
	res, err := q.w.ExecContext(ctx, `DELETE FROM hook_endpoints WHERE slug = ?`, slug)
	if err != nil {
		return translate("delete hook endpoint", err)
	}
	return notFound("delete hook endpoint", res)
}

// SetHookEndpointSecret replaces an endpoint's sealed secret.
func (q queries) SetHookEndpointSecret(ctx context.Context, slug string, secret []byte, at time.Time) error {
	res, err := q.w.ExecContext(ctx, `UPDATE hook_endpoints SET secret = ?, updated_at = ? WHERE slug = ?`, nullBytes(secret), q.orNow(at).UnixMilli(), slug)
	if err != nil {
		return translate("set hook endpoint secret", err)
	}
	return notFound("set hook endpoint secret", res)
}

func scanHookEndpoint(s scanner) (store.HookEndpoint, error) {
	var (
		e                        store.HookEndpoint
		targets, filters, policy string
		profile                  sql.NullString
		secret                   []byte
		created, updated         int64
	)
	if err := s.Scan(&e.Slug, &e.DisplayName, &targets, &e.Auth.Kind, &e.Auth.HeaderName, &e.Auth.Prefix, &profile, &filters, &e.Template, &policy,
		&e.DedupeHeader, &e.Enabled, &e.Level, &secret, &created, &updated); err != nil {
		return store.HookEndpoint{}, err
	}
	e.Targets, e.Filters, e.Policy = []byte(targets), []byte(filters), []byte(policy)
	e.AuthProfile = profile.String
	if len(secret) > 0 {
		e.Secret = secret
	}
	e.CreatedAt, e.UpdatedAt = fromMS(created), fromMS(updated)
	return e, nil
}

const hookProfileColumns = `p.slug, p.description, p.auth_kind, p.auth_header, p.auth_prefix, p.secret, p.created_at, p.updated_at,
(SELECT count(*) FROM hook_endpoints e WHERE e.auth_profile = p.slug)`

// CreateHookProfile stores a profile.
func (q queries) CreateHookProfile(ctx context.Context, p store.HookProfile) error {
	created := q.orNow(p.CreatedAt)
	updated := p.UpdatedAt
	if updated.IsZero() {
		updated = created
	}
	_, err := q.w.ExecContext(ctx, `INSERT INTO hook_profiles (slug, description, auth_kind, auth_header, auth_prefix, secret, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, p.Slug, p.Description, p.Auth.Kind, p.Auth.HeaderName, p.Auth.Prefix, nullBytes(p.Secret),
		created.UnixMilli(), updated.UnixMilli())
	return translate("create hook profile", err)
}

// GetHookProfile returns a profile with its endpoint count.
func (q queries) GetHookProfile(ctx context.Context, slug string) (store.HookProfile, error) {
	p, err := scanHookProfile(q.r.QueryRowContext(ctx, `SELECT `+hookProfileColumns+` FROM hook_profiles p WHERE p.slug = ?`, slug))
	return p, translate("get hook profile", err)
}

// ListHookProfiles returns every profile by slug.
func (q queries) ListHookProfiles(ctx context.Context) ([]store.HookProfile, error) {
	rows, err := q.r.QueryContext(ctx, `SELECT `+hookProfileColumns+` FROM hook_profiles p ORDER BY p.slug`)
	if err != nil {
		return nil, translate("list hook profiles", err)
	}
	defer rows.Close()
	out := []store.HookProfile{}
	for rows.Next() {
		p, err := scanHookProfile(rows)
		if err != nil {
			return nil, translate("list hook profiles", err)
		}
		out = append(out, p)
	}
	return out, translate("list hook profiles", rows.Err())
}

// UpdateHookProfile replaces a profile's description and auth.
func (q queries) UpdateHookProfile(ctx context.Context, p store.HookProfile) error {
	res, err := q.w.ExecContext(ctx, `UPDATE hook_profiles SET description = ?, auth_kind = ?, auth_header = ?, auth_prefix = ?, updated_at = ? WHERE slug = ?`,
		p.Description, p.Auth.Kind, p.Auth.HeaderName, p.Auth.Prefix, q.orNow(p.UpdatedAt).UnixMilli(), p.Slug)
	if err != nil {
		return translate("update hook profile", err)
	}
	return notFound("update hook profile", res)
}

// DeleteHookProfile removes a profile no endpoint references; when none
// is removed, a second read tells a referenced profile (ErrConflict) from
// a missing one.
func (q queries) DeleteHookProfile(ctx context.Context, slug string) error {
	res, err := q.w.ExecContext(ctx, `DELETE FROM hook_profiles WHERE slug = ?
AND NOT EXISTS (SELECT 1 FROM hook_endpoints WHERE auth_profile = ?)`, slug, slug)
	if err != nil {
		return translate("delete hook profile", err)
	}
	if n, err := res.RowsAffected(); err != nil || n > 0 {
		return translate("delete hook profile", err)
	}
	var one int
	if err := q.w.QueryRowContext(ctx, `SELECT 1 FROM hook_profiles WHERE slug = ?`, slug).Scan(&one); err != nil {
		return translate("delete hook profile", err)
	}
	return fmt.Errorf("delete hook profile: referenced by an endpoint: %w", store.ErrConflict)
}

// SetHookProfileSecret replaces a profile's sealed secret.
func (q queries) SetHookProfileSecret(ctx context.Context, slug string, secret []byte, at time.Time) error {
	res, err := q.w.ExecContext(ctx, `UPDATE hook_profiles SET secret = ?, updated_at = ? WHERE slug = ?`, nullBytes(secret), q.orNow(at).UnixMilli(), slug)
	if err != nil {
		return translate("set hook profile secret", err)
	}
	return notFound("set hook profile secret", res)
}

func scanHookProfile(s scanner) (store.HookProfile, error) {
	var (
		p                store.HookProfile
		secret           []byte
		created, updated int64
	)
	if err := s.Scan(&p.Slug, &p.Description, &p.Auth.Kind, &p.Auth.HeaderName, &p.Auth.Prefix, &secret, &created, &updated, &p.EndpointCount); err != nil {
		return store.HookProfile{}, err
	}
	if len(secret) > 0 {
		p.Secret = secret
	}
	p.CreatedAt, p.UpdatedAt = fromMS(created), fromMS(updated)
	return p, nil
}

const hookDeliveryColumns = `id, endpoint, status, reason, dedupe_key, message_ids, received_at, size, if_offline, if_busy, level`

// AddHookDelivery stores a receipt.
func (q queries) AddHookDelivery(ctx context.Context, d store.HookDelivery) error {
	ids, err := json.Marshal(nonNilStrings(d.MessageIDs))
	if err != nil {
		return err
	}
	body := d.Body
	if body == nil {
		body = []byte{}
	}
	st, err := q.stmt(ctx, true, addHookDeliveryQuery)
	if err != nil {
		return translate("add hook delivery", err)
	}
	_, err = st.ExecContext(ctx,
		d.ID, d.Endpoint, d.Status, d.Reason, d.DedupeKey, string(ids), q.orNow(d.ReceivedAt).UnixMilli(), d.Size, d.IfOffline, d.IfBusy, d.Level, body)
	return translate("add hook delivery", err)
}

// SetHookDeliveryMessages records a delivery's message ids.
func (q queries) SetHookDeliveryMessages(ctx context.Context, id string, messageIDs []string) error {
	ids, err := json.Marshal(nonNilStrings(messageIDs))
	if err != nil {
		return err
	}
	st, err := q.stmt(ctx, true, setHookMessagesQuery)
	if err != nil {
		return translate("set hook delivery messages", err)
	}
	res, err := st.ExecContext(ctx, string(ids), id)
	if err != nil {
		return translate("set hook delivery messages", err)
	}
	return notFound("set hook delivery messages", res)
}

// GetHookDelivery returns a receipt with its body.
func (q queries) GetHookDelivery(ctx context.Context, id string) (store.HookDelivery, error) {
	st, err := q.stmt(ctx, false, getHookDeliveryQuery)
	if err != nil {
		return store.HookDelivery{}, translate("get hook delivery", err)
	}
	d, err := scanHookDelivery(st.QueryRowContext(ctx, id), true)
	return d, translate("get hook delivery", err)
}

// ListHookDeliveries returns an endpoint's receipts newest first.
func (q queries) ListHookDeliveries(ctx context.Context, f store.HookDeliveryFilter) ([]store.HookDelivery, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 50
	}
	before := int64(1<<63 - 1)
	if !f.Before.IsZero() {
		before = f.Before.UnixMilli()
	}
	cols := hookDeliveryColumns
	if f.WithBody {
		cols += ", body"
	}
	rows, err := q.r.QueryContext(ctx, `SELECT `+cols+` FROM hook_deliveries WHERE endpoint = ? AND received_at < ?
ORDER BY received_at DESC, rowid DESC LIMIT ?`, f.Endpoint, before, limit)
	if err != nil {
		return nil, translate("list hook deliveries", err)
	}
	defer rows.Close()
	out := []store.HookDelivery{}
	for rows.Next() {
		d, err := scanHookDelivery(rows, f.WithBody)
		if err != nil {
			return nil, translate("list hook deliveries", err)
		}
		out = append(out, d)
	}
	return out, translate("list hook deliveries", rows.Err())
}

// hookDedupeSeenQuery repeats the partial index's condition (no empty
// key) so that SQLite may use hook_deliveries_dedupe: a query must imply
// a partial index's WHERE for the planner to take it.
const hookDedupeSeenQuery = `SELECT 1 FROM hook_deliveries
WHERE endpoint = ? AND dedupe_key = ? AND dedupe_key <> '' AND received_at >= ?
AND status NOT IN ('rejected', 'duplicate') LIMIT 1`

// HookDedupeSeen reports whether a dedupe key was seen since a time; an
// empty key never was.
func (q queries) HookDedupeSeen(ctx context.Context, endpoint, key string, since time.Time) (bool, error) {
	var one int
	st, err := q.stmt(ctx, false, hookDedupeSeenQuery)
	if err != nil {
		return false, translate("hook dedupe seen", err)
	}
	err = st.QueryRowContext(ctx, endpoint, key, since.UnixMilli()).Scan(&one)
	if err == sql.ErrNoRows {
		return false, nil
	}
	return err == nil, translate("hook dedupe seen", err)
}

func scanHookDelivery(s scanner, withBody bool) (store.HookDelivery, error) {
	var (
		d        store.HookDelivery
		ids      string
		received int64
	)
	dest := []any{&d.ID, &d.Endpoint, &d.Status, &d.Reason, &d.DedupeKey, &ids, &received, &d.Size, &d.IfOffline, &d.IfBusy, &d.Level}
	if withBody {
		dest = append(dest, &d.Body)
	}
	if err := s.Scan(dest...); err != nil {
		return store.HookDelivery{}, err
	}
	if withBody && d.Body == nil {
		d.Body = []byte{}
	}
	d.ReceivedAt = fromMS(received)
	if err := json.Unmarshal([]byte(ids), &d.MessageIDs); err != nil {
		return store.HookDelivery{}, fmt.Errorf("hook delivery message ids: %w", err)
	}
	return d, nil
}

// jsonOr is b as a string, or def when b is empty.
func jsonOr(b []byte, def string) string {
	if len(b) == 0 {
		return def
	}
	return string(b)
}
