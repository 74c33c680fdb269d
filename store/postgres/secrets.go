package postgres

import (
	"context"
	"time"

	"svc/store"
)

// secrets read a secret with its bindings in one statement, so a read
// never sees a secret half changed.
var secrets = newRegistry(registry[store.Secret]{
	noun: "secret", table: "secrets", alias: "s",
	columns:  `s.slug, s.env_name, s.description, s.enabled, s.all_members, s.value, s.created_at, s.updated_at, ` + boundColumn("secret_bindings", "s"),
	scan:     scanSecret,
	bindings: "secret_bindings", bindNoun: "secret binding",
})

// CreateSecret stores a secret.
func (q queries) CreateSecret(ctx context.Context, s store.Secret) error {
	return secrets.create(ctx, q, s.CreatedAt, s.UpdatedAt, `slug, env_name, description, enabled, all_members, value`,
		s.Slug, s.EnvName, s.Description, s.Enabled, s.AllMembers, nullBytes(s.Value))
}

// GetSecret returns a secret with its bindings.
func (q queries) GetSecret(ctx context.Context, slug string) (store.Secret, error) {
	return secrets.get(ctx, q, slug)
}

// ListSecrets returns every secret with its bindings, by slug.
func (q queries) ListSecrets(ctx context.Context) ([]store.Secret, error) {
	return secrets.list(ctx, q)
}

// UpdateSecret replaces a secret's mutable fields.
func (q queries) UpdateSecret(ctx context.Context, s store.Secret) error {
	return secrets.update(ctx, q, "update secret", `env_name = ?, description = ?, enabled = ?, all_members = ?`, s.Slug, s.UpdatedAt,
		s.EnvName, s.Description, s.Enabled, s.AllMembers)
}

// DeleteSecret removes a secret; its bindings go with it.
func (q queries) DeleteSecret(ctx context.Context, slug string) error {
	return secrets.remove(ctx, q, slug)
}

// SetSecretValue replaces a secret's sealed value.
func (q queries) SetSecretValue(ctx context.Context, slug string, value []byte, at time.Time) error {
	return secrets.update(ctx, q, "set secret value", `value = ?`, slug, at, nullBytes(value))
}

// PutSecretBinding binds a member to a secret.
func (q queries) PutSecretBinding(ctx context.Context, slug, member string) error {
	return secrets.bind(ctx, q, slug, member)
}

// DeleteSecretBinding removes a binding.
func (q queries) DeleteSecretBinding(ctx context.Context, slug, member string) error {
	return secrets.unbind(ctx, q, slug, member)
}

func scanSecret(s scanner) (store.Secret, error) {
	var (
		out              store.Secret
		created, updated int64
		bound            string
		err              error
	)
	if err := s.Scan(&out.Slug, &out.EnvName, &out.Description, &out.Enabled, &out.AllMembers, &out.Value, &created, &updated, &bound); err != nil {
		return store.Secret{}, err
	}
	out.Value = sealed(out.Value)
	out.CreatedAt, out.UpdatedAt = fromMS(created), fromMS(updated)
	if out.Bound, err = decodeBound("secret bindings", bound); err != nil {
		return store.Secret{}, err
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
	return inTxErr(ctx, db, func(q queries) error { return q.PutSecretBinding(ctx, slug, member) })
}
