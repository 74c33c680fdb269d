package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"svc/store"
)

const tokenColumns = `id, member, hash, label, origin, created_at, created_by, last_used_at, expires_at, revoked_at`

// CreateToken stores a new token: ErrConflict when the id or hash exists,
// ErrPrecondition when the member does not. A zero CreatedAt becomes the
// clock's time.
func (q queries) CreateToken(ctx context.Context, t store.Token) error {
	defer q.tokensChanging()()
	_, err := q.w.ExecContext(ctx, `INSERT INTO tokens (`+tokenColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		t.ID, t.Member, t.Hash[:], t.Label, t.Origin, q.orNow(t.CreatedAt).UnixMilli(), t.CreatedBy,
		msOrNull(t.LastUsedAt), msOrNull(t.ExpiresAt), msOrNull(t.RevokedAt))
	return translate("create token", err)
}

// GetTokenByHash looks the hash up through its unique index; it returns
// revoked tokens too and ErrNotFound when no row has the hash. Unlike the
// SQLite store it caches nothing: another broker may change the row.
func (q queries) GetTokenByHash(ctx context.Context, h store.TokenHash) (store.Token, error) {
	return q.getTokenByHash(ctx, h)
}

func (q queries) getTokenByHash(ctx context.Context, h store.TokenHash) (store.Token, error) {
	st, err := q.stmt(ctx, false, `SELECT `+tokenColumns+` FROM tokens WHERE hash = ?`)
	if err != nil {
		return store.Token{}, translate("get token", err)
	}
	t, err := scanToken(st.QueryRowContext(ctx, h[:]))
	if err != nil {
		return store.Token{}, translate("get token", err)
	}
	return t, nil
}

// ListTokens returns the member's tokens, oldest first; tokens created in
// the same millisecond come in insertion order.
func (q queries) ListTokens(ctx context.Context, member string) ([]store.Token, error) {
	rows, err := q.r.QueryContext(ctx, `SELECT `+tokenColumns+` FROM tokens WHERE member = ? ORDER BY created_at, rowid`, member)
	if err != nil {
		return nil, translate("list tokens", err)
	}
	defer rows.Close()
	out := []store.Token{}
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, translate("list tokens", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, translate("list tokens", err)
	}
	return out, nil
}

// RevokeToken marks the member's unrevoked token revoked at at (the clock's
// time when zero) and returns it; ErrNotFound when no unrevoked token with
// that id belongs to the member. An expired token can still be revoked.
func (q queries) RevokeToken(ctx context.Context, member, id string, at time.Time) (store.Token, error) {
	defer q.tokensChanging()()
	row := q.w.QueryRowContext(ctx, `UPDATE tokens SET revoked_at = ?
WHERE id = ? AND member = ? AND revoked_at IS NULL
RETURNING `+tokenColumns, q.orNow(at).UnixMilli(), id, member)
	t, err := scanToken(row)
	if err != nil {
		return store.Token{}, translate("revoke token", err)
	}
	return t, nil
}

// RevokeMemberTokens revokes every unrevoked token of the member, expired
// ones included, and returns how many it revoked.
func (q queries) RevokeMemberTokens(ctx context.Context, member string, at time.Time) (int, error) {
	defer q.tokensChanging()()
	res, err := q.w.ExecContext(ctx, `UPDATE tokens SET revoked_at = ? WHERE member = ? AND revoked_at IS NULL`,
		q.orNow(at).UnixMilli(), member)
	if err != nil {
		return 0, translate("revoke member tokens", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, translate("revoke member tokens", err)
	}
	return int(n), nil
}

// TouchToken sets the token's LastUsedAt to at (the clock's time when zero).
// It returns ErrNotFound for an unknown id.
func (q queries) TouchToken(ctx context.Context, id string, at time.Time) error {
	at = q.orNow(at)
	res, err := q.w.ExecContext(ctx, `UPDATE tokens SET last_used_at = ? WHERE id = ?`, at.UnixMilli(), id)
	if err != nil {
		return translate("touch token", err)
	}
	if err := notFound("touch token", res); err != nil {
		return err
	}
	return nil
}

func scanToken(s scanner) (store.Token, error) {
	var (
		t                          store.Token
		hash                       []byte
		created                    int64
		lastUsed, expires, revoked sql.NullInt64
	)
	if err := s.Scan(&t.ID, &t.Member, &hash, &t.Label, &t.Origin, &created, &t.CreatedBy, &lastUsed, &expires, &revoked); err != nil {
		return store.Token{}, err
	}
	if len(hash) != len(t.Hash) {
		return store.Token{}, fmt.Errorf("token %q: stored hash has %d bytes", t.ID, len(hash))
	}
	copy(t.Hash[:], hash)
	t.CreatedAt = fromMS(created)
	t.LastUsedAt = fromNullMS(lastUsed)
	t.ExpiresAt = fromNullMS(expires)
	t.RevokedAt = fromNullMS(revoked)
	return t, nil
}
