package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"svc/store"
)

// secretColumns read a secret with its bindings in one statement, so a
// read never sees a secret half changed.
const secretColumns = `s.slug, s.env_name, s.description, s.enabled, s.all_members, s.value, s.created_at, s.updated_at,
(SELECT json_group_array(member) FROM (SELECT member FROM secret_bindings b WHERE b.slug = s.slug ORDER BY member))`

// CreateSecret stores a secret.
func (q queries) CreateSecret(ctx context.Context, s store.Secret) error {
	created := q.orNow(s.CreatedAt)
	updated := s.UpdatedAt
	if updated.IsZero() {
		updated = created
	}
	_, err := q.w.ExecContext(ctx, `INSERT INTO secrets (slug, env_name, description, enabled, all_members, value, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, s.Slug, s.EnvName, s.Description, s.Enabled, s.AllMembers, nullBytes(s.Value), created.UnixMilli(), updated.UnixMilli())
	return translate("create secret", err)
}

// GetSecret returns a secret with its bindings.
func (q queries) GetSecret(ctx context.Context, slug string) (store.Secret, error) {
	s, err := scanSecret(q.r.QueryRowContext(ctx, `SELECT `+secretColumns+` FROM secrets s WHERE s.slug = ?`, slug))
	return s, translate("get secret", err)
}

// ListSecrets returns every secret with its bindings, by slug.
func (q queries) ListSecrets(ctx context.Context) ([]store.Secret, error) {
	rows, err := q.r.QueryContext(ctx, `SELECT `+secretColumns+` FROM secrets s ORDER BY s.slug`)
	if err != nil {
		return nil, translate("list secrets", err)
	}
	defer rows.Close()
	out := []store.Secret{}
	for rows.Next() {
		s, err := scanSecret(rows)
		if err != nil {
			return nil, translate("list secrets", err)
		}
		out = append(out, s)
	}
	return out, translate("list secrets", rows.Err())
}

// UpdateSecret replaces a secret's mutable fields.
func (q queries) UpdateSecret(ctx context.Context, s store.Secret) error {
	res, err := q.w.ExecContext(ctx, `UPDATE secrets SET env_name = ?, description = ?, enabled = ?, all_members = ?, updated_at = ? WHERE slug = ?`,
		s.EnvName, s.Description, s.Enabled, s.AllMembers, q.orNow(s.UpdatedAt).UnixMilli(), s.Slug)
	if err != nil {
		return translate("update secret", err)
	}
	return notFound("update secret", res)
}

// DeleteSecret removes a secret; its bindings go with it.
func (q queries) DeleteSecret(ctx context.Context, slug string) error {
	res, err := q.w.ExecContext(ctx, `DELETE FROM secrets WHERE slug = ?`, slug)
	if err != nil {
		return translate("delete secret", err)
	}
	return notFound("delete secret", res)
}

// SetSecretValue replaces a secret's sealed value.
func (q queries) SetSecretValue(ctx context.Context, slug string, value []byte, at time.Time) error {
	res, err := q.w.ExecContext(ctx, `UPDATE secrets SET value = ?, updated_at = ? WHERE slug = ?`, nullBytes(value), q.orNow(at).UnixMilli(), slug)
	if err != nil {
		return translate("set secret value", err)
	}
	return notFound("set secret value", res)
}

// PutSecretBinding binds a member to a secret.
func (q queries) PutSecretBinding(ctx context.Context, slug, member string) error {
	return putBinding(ctx, q, "secrets", "secret_bindings", slug, member)
}

// DeleteSecretBinding removes a binding.
func (q queries) DeleteSecretBinding(ctx context.Context, slug, member string) error {
	res, err := q.w.ExecContext(ctx, `DELETE FROM secret_bindings WHERE slug = ? AND member = ?`, slug, member)
	if err != nil {
		return translate("delete secret binding", err)
	}
	return notFound("delete secret binding", res)
}

// putBinding inserts a binding of member to the entry slug of table:
// ErrNotFound when the entry does not exist, ErrPrecondition when the
// member does not (the foreign key). One statement: the entry's existence
// is part of the insert.
func putBinding(ctx context.Context, q queries, table, bindings, slug, member string) error {
	op := "put " + bindings
	res, err := q.w.ExecContext(ctx, `INSERT INTO `+bindings+` (slug, member) SELECT slug, ? FROM `+table+` WHERE slug = ?
ON CONFLICT (slug, member) DO NOTHING`, member, slug)
	if err != nil {
		return translate(op, err)
	}
	if n, err := res.RowsAffected(); err != nil || n > 0 {
		return translate(op, err)
	}
	// Nothing inserted: already bound, or no such entry.
	var one int
	err = q.w.QueryRowContext(ctx, `SELECT 1 FROM `+table+` WHERE slug = ?`, slug).Scan(&one)
	return translate(op, err)
}

func scanSecret(s scanner) (store.Secret, error) {
	var (
		out              store.Secret
		value            []byte
		created, updated int64
		bound            string
	)
	if err := s.Scan(&out.Slug, &out.EnvName, &out.Description, &out.Enabled, &out.AllMembers, &value, &created, &updated, &bound); err != nil {
		return store.Secret{}, err
	}
	if len(value) > 0 {
		out.Value = value
	}
	out.CreatedAt, out.UpdatedAt = fromMS(created), fromMS(updated)
	if err := json.Unmarshal([]byte(bound), &out.Bound); err != nil {
		return store.Secret{}, fmt.Errorf("secret bindings: %w", err)
	}
	return out, nil
}

// nullBytes stores nil or empty bytes as NULL.
func nullBytes(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return b
}

// PutSecretBinding runs its two statements in one transaction.
func (db *DB) PutSecretBinding(ctx context.Context, slug, member string) error {
	_, err := inTx(ctx, db, func(q queries) (struct{}, error) { return struct{}{}, q.PutSecretBinding(ctx, slug, member) })
	return err
}
