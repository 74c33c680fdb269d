package postgres

import (
	"github.com/jackc/pgx/v5"

	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"svc/store"
)

// hookEndpointFields are an endpoint's columns a create fills.
const hookEndpointFields = `slug, display_name, targets, auth_kind, auth_header, auth_prefix, auth_profile, filters, template, policy,
dedupe_header, enabled, level, secret`

// hookEndpoints' get runs on every hook delivery: a cached statement.
var hookEndpoints = newRegistry(registry[store.HookEndpoint]{
	noun: "hook endpoint", table: "hook_endpoints",
	columns: hookEndpointFields + `, created_at, updated_at`,
	scan:    scanHookEndpoint,
	hot:     true,
})

// CreateHookEndpoint stores an endpoint.
func (q queries) CreateHookEndpoint(ctx context.Context, e store.HookEndpoint) error {
	return hookEndpoints.create(ctx, q, e.CreatedAt, e.UpdatedAt, hookEndpointFields,
		e.Slug, e.DisplayName, jsonOr(e.Targets, "[]"), e.Auth.Kind, e.Auth.HeaderName, e.Auth.Prefix, nullString(e.AuthProfile),
		jsonOr(e.Filters, "[]"), e.Template, jsonOr(e.Policy, "{}"), e.DedupeHeader, e.Enabled, e.Level, nullBytes(e.Secret))
}

// GetHookEndpoint returns an endpoint.
func (q queries) GetHookEndpoint(ctx context.Context, slug string) (store.HookEndpoint, error) {
	return hookEndpoints.get(ctx, q, slug)
}

// ListHookEndpoints returns every endpoint by slug.
func (q queries) ListHookEndpoints(ctx context.Context) ([]store.HookEndpoint, error) {
	return hookEndpoints.list(ctx, q)
}

// UpdateHookEndpoint replaces an endpoint's mutable fields.
func (q queries) UpdateHookEndpoint(ctx context.Context, e store.HookEndpoint) error {
	return hookEndpoints.update(ctx, q, "update hook endpoint", `display_name = ?, targets = ?, auth_kind = ?, auth_header = ?, auth_prefix = ?,
auth_profile = ?, filters = ?, template = ?, policy = ?, dedupe_header = ?, enabled = ?, level = ?`, e.Slug, e.UpdatedAt,
		e.DisplayName, jsonOr(e.Targets, "[]"), e.Auth.Kind, e.Auth.HeaderName, e.Auth.Prefix, nullString(e.AuthProfile),
		jsonOr(e.Filters, "[]"), e.Template, jsonOr(e.Policy, "{}"), e.DedupeHeader, e.Enabled, e.Level)
}

// DeleteHookEndpoint removes an endpoint; its receipts go with it.
func (q queries) DeleteHookEndpoint(ctx context.Context, slug string) error {
	return hookEndpoints.remove(ctx, q, slug)
}

// SetHookEndpointSecret replaces an endpoint's sealed secret.
func (q queries) SetHookEndpointSecret(ctx context.Context, slug string, secret []byte, at time.Time) error {
	return hookEndpoints.update(ctx, q, "set hook endpoint secret", `secret = ?`, slug, at, nullBytes(secret))
}

func scanHookEndpoint(s scanner) (store.HookEndpoint, error) {
	var (
		e                        store.HookEndpoint
		targets, filters, policy string
		profile                  sql.NullString
		created, updated         int64
	)
	if err := s.Scan(&e.Slug, &e.DisplayName, &targets, &e.Auth.Kind, &e.Auth.HeaderName, &e.Auth.Prefix, &profile, &filters, &e.Template, &policy,
		&e.DedupeHeader, &e.Enabled, &e.Level, &e.Secret, &created, &updated); err != nil {
		return store.HookEndpoint{}, err
	}
	e.Targets, e.Filters, e.Policy = []byte(targets), []byte(filters), []byte(policy)
	e.AuthProfile = profile.String
	e.Secret = sealed(e.Secret)
	e.CreatedAt, e.UpdatedAt = fromMS(created), fromMS(updated)
	return e, nil
}

// hookProfiles read a profile with its endpoint count.
var hookProfiles = newRegistry(registry[store.HookProfile]{
	noun: "hook profile", table: "hook_profiles", alias: "p",
	columns: `p.slug, p.description, p.auth_kind, p.auth_header, p.auth_prefix, p.secret, p.created_at, p.updated_at,
(SELECT count(*) FROM hook_endpoints e WHERE e.auth_profile = p.slug)`,
	scan: scanHookProfile,
})

// CreateHookProfile stores a profile.
func (q queries) CreateHookProfile(ctx context.Context, p store.HookProfile) error {
	return hookProfiles.create(ctx, q, p.CreatedAt, p.UpdatedAt, `slug, description, auth_kind, auth_header, auth_prefix, secret`,
		p.Slug, p.Description, p.Auth.Kind, p.Auth.HeaderName, p.Auth.Prefix, nullBytes(p.Secret))
}

// GetHookProfile returns a profile with its endpoint count.
func (q queries) GetHookProfile(ctx context.Context, slug string) (store.HookProfile, error) {
	return hookProfiles.get(ctx, q, slug)
}

// ListHookProfiles returns every profile by slug.
func (q queries) ListHookProfiles(ctx context.Context) ([]store.HookProfile, error) {
	return hookProfiles.list(ctx, q)
}

// UpdateHookProfile replaces a profile's description and auth.
func (q queries) UpdateHookProfile(ctx context.Context, p store.HookProfile) error {
	return hookProfiles.update(ctx, q, "update hook profile", `description = ?, auth_kind = ?, auth_header = ?, auth_prefix = ?`, p.Slug, p.UpdatedAt,
		p.Description, p.Auth.Kind, p.Auth.HeaderName, p.Auth.Prefix)
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
	return hookProfiles.update(ctx, q, "set hook profile secret", `secret = ?`, slug, at, nullBytes(secret))
}

func scanHookProfile(s scanner) (store.HookProfile, error) {
	var (
		p                store.HookProfile
		created, updated int64
	)
	if err := s.Scan(&p.Slug, &p.Description, &p.Auth.Kind, &p.Auth.HeaderName, &p.Auth.Prefix, &p.Secret, &created, &updated, &p.EndpointCount); err != nil {
		return store.HookProfile{}, err
	}
	p.Secret = sealed(p.Secret)
	p.CreatedAt, p.UpdatedAt = fromMS(created), fromMS(updated)
	return p, nil
}

const hookDeliveryColumns = `id, endpoint, status, reason, dedupe_key, message_ids, received_at, size, if_offline, if_busy, level`

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

// PruneRejectedHookDeliveries deletes rejected receipts by age and, for
// one endpoint, past its newest keep (store.HookStore). A rejected
// receipt never holds a pending row.
func (q queries) PruneRejectedHookDeliveries(ctx context.Context, endpoint string, before time.Time, keep int) (int, error) {
	var (
		res result
		err error
	)
	if endpoint == "" {
		res, err = q.w.ExecContext(ctx, `DELETE FROM hook_deliveries WHERE status = 'rejected' AND received_at < ?`, before.UnixMilli())
	} else {
		res, err = q.w.ExecContext(ctx, `DELETE FROM hook_deliveries WHERE endpoint = ? AND status = 'rejected'
AND (received_at < ? OR id NOT IN (SELECT id FROM hook_deliveries WHERE endpoint = ? AND status = 'rejected'
ORDER BY received_at DESC, id DESC LIMIT ?))`, endpoint, before.UnixMilli(), endpoint, keep)
	}
	if err != nil {
		return 0, translate("prune rejected hook deliveries", err)
	}
	n, err := res.RowsAffected()
	return int(n), translate("prune rejected hook deliveries", err)
}

// Statements of every delivery's transaction (pgx prepares and caches
// each per connection).
var (
	addHookDeliveryQuery = `INSERT INTO hook_deliveries (` + hookDeliveryColumns + `, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	setHookMessagesQuery = `UPDATE hook_deliveries SET message_ids = ? WHERE id = ?`
	getHookDeliveryQuery = `SELECT ` + hookDeliveryColumns + `, body FROM hook_deliveries WHERE id = ?`
)

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
	scan := func(s scanner) (store.HookDelivery, error) { return scanHookDelivery(s, f.WithBody) }
	return collect(ctx, q.r, "list hook deliveries", scan, `SELECT `+cols+` FROM hook_deliveries WHERE endpoint = ? AND received_at < ?
ORDER BY received_at DESC, rowid DESC LIMIT ?`, f.Endpoint, before, limit)
}

// hookDedupeSeenQuery repeats the partial index's condition (no empty
// key) so that the planner may use hook_deliveries_dedupe: a query must imply
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
	if err == pgx.ErrNoRows {
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
