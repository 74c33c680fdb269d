package postgres

import (
	"context"
	"fmt"

	"svc/store"
)

// GetMeta returns the value of key.
func (q queries) GetMeta(ctx context.Context, key string) (string, error) {
	var v string
	err := q.r.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, key).Scan(&v)
	return v, translate("get meta", err)
}

// PutMeta sets key to value.
func (q queries) PutMeta(ctx context.Context, key, value string) error {
	_, err := q.w.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES (?, ?)
ON CONFLICT (key) DO UPDATE SET value = excluded.value`, key, value)
	return translate("put meta", err)
}

// sealedQuery lists every sealed value: one SELECT per sealed column
// (store.SealedKinds), in one statement so the list is one snapshot.
const sealedQuery = `SELECT kind, key, value FROM (
	SELECT 'secret_value' AS kind, slug AS key, value FROM secrets WHERE value IS NOT NULL
	UNION ALL SELECT 'tool_credential', slug, cred_secret FROM tool_sources WHERE cred_secret IS NOT NULL
	UNION ALL SELECT 'hook_endpoint_secret', slug, secret FROM hook_endpoints WHERE secret IS NOT NULL
	UNION ALL SELECT 'hook_profile_secret', slug, secret FROM hook_profiles WHERE secret IS NOT NULL
	UNION ALL SELECT 'enrollment_token', id, convert_to(sealed_token, 'UTF8') FROM enrollments WHERE sealed_token <> ''
) s ORDER BY kind, key`

// Census counts members, messages, file entries and sealed values.
func (q queries) Census(ctx context.Context) (store.Census, error) {
	var c store.Census
	// Messages and file entries are counted up to the cap only, so a boot
	// never scans a large table.
	err := q.r.QueryRowContext(ctx, `SELECT
	(SELECT COUNT(*) FROM members),
	(SELECT COUNT(*) FROM (SELECT 1 FROM messages LIMIT ?1) m),
	(SELECT COUNT(*) FROM (SELECT 1 FROM fs_entries LIMIT ?1) f),
	(SELECT COUNT(*) FROM (`+sealedQuery+`) c)`, store.CensusCap).Scan(&c.Members, &c.Messages, &c.FileEntries, &c.Sealed)
	return c, translate("census", err)
}

// ListSealed returns every sealed value by kind and key.
func (q queries) ListSealed(ctx context.Context) ([]store.SealedValue, error) {
	rows, err := q.r.QueryContext(ctx, sealedQuery)
	if err != nil {
		return nil, translate("list sealed", err)
	}
	defer rows.Close()
	out := []store.SealedValue{}
	for rows.Next() {
		var v store.SealedValue
		if err := rows.Scan(&v.Kind, &v.Key, &v.Value); err != nil {
			return nil, translate("list sealed", err)
		}
		out = append(out, v)
	}
	return out, translate("list sealed", rows.Err())
}

// setSealed is, per kind, the statement that replaces a present sealed
// value (?1 the value, ?2 the key) and the one that removes it (?1 the
// key). Neither touches updated_at: re-sealing changes no setting.
var setSealed = map[store.SealedKind]struct{ set, clear string }{
	store.SealedSecretValue: {
		`UPDATE secrets SET value = ?1 WHERE slug = ?2 AND value IS NOT NULL`,
		`UPDATE secrets SET value = NULL WHERE slug = ?1 AND value IS NOT NULL`,
	},
	store.SealedToolCredential: {
		`UPDATE tool_sources SET cred_secret = ?1 WHERE slug = ?2 AND cred_secret IS NOT NULL`,
		`UPDATE tool_sources SET cred_kind = '', cred_header = '', cred_secret = NULL WHERE slug = ?1 AND cred_secret IS NOT NULL`,
	},
	store.SealedHookEndpointSecret: {
		`UPDATE hook_endpoints SET secret = ?1 WHERE slug = ?2 AND secret IS NOT NULL`,
		`UPDATE hook_endpoints SET secret = NULL WHERE slug = ?1 AND secret IS NOT NULL`,
	},
	store.SealedHookProfileSecret: {
		`UPDATE hook_profiles SET secret = ?1 WHERE slug = ?2 AND secret IS NOT NULL`,
		`UPDATE hook_profiles SET secret = NULL WHERE slug = ?1 AND secret IS NOT NULL`,
	},
	store.SealedEnrollmentToken: {
		`UPDATE enrollments SET sealed_token = CAST(?1 AS TEXT) WHERE id = ?2 AND sealed_token <> ''`,
		`DELETE FROM enrollments WHERE id = ?1 AND sealed_token <> ''`,
	},
}

// SetSealed replaces or removes one sealed value.
func (q queries) SetSealed(ctx context.Context, v store.SealedValue) error {
	st, ok := setSealed[v.Kind]
	if !ok {
		return fmt.Errorf("set sealed: unknown kind %q", v.Kind)
	}
	var (
		res result
		err error
	)
	if len(v.Value) == 0 {
		res, err = q.w.ExecContext(ctx, st.clear, v.Key)
	} else {
		res, err = q.w.ExecContext(ctx, st.set, v.Value, v.Key)
	}
	if err != nil {
		return translate("set sealed", err)
	}
	return notFound("set sealed", res)
}
