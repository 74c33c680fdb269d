package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"svc/store"
)

const sessionColumns = `id, hash, member, created_at, last_seen_at, expires_at`

// CreateSession stores a session; ErrPrecondition when the member does not
// exist, ErrConflict when the hash does. A zero CreatedAt becomes the
// clock's time and a zero LastSeenAt the creation time. A zero ExpiresAt is
// stored as NULL: the session never expires.
func (q queries) CreateSession(ctx context.Context, s store.Session) error {
	if s.ID == "" {
		return fmt.Errorf("create session: no id: %w", store.ErrPrecondition)
	}
	created := q.orNow(s.CreatedAt)
	seen := s.LastSeenAt
	if seen.IsZero() {
		seen = created
	}
	_, err := q.w.ExecContext(ctx, `INSERT INTO sessions (`+sessionColumns+`) VALUES (?, ?, ?, ?, ?, ?)`,
		s.ID, s.Hash[:], s.Member, created.UnixMilli(), seen.UnixMilli(), msOrNull(s.ExpiresAt))
	return translate("create session", err)
}

// GetSession returns the session, expired or not; ErrNotFound for an unknown
// hash.
func (q queries) GetSession(ctx context.Context, h store.SessionHash) (store.Session, error) {
	s, err := scanSession(q.r.QueryRowContext(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE hash = ?`, h[:]))
	return s, translate("get session", err)
}

// ListSessions returns the member's sessions, oldest first.
func (q queries) ListSessions(ctx context.Context, member string) ([]store.Session, error) {
	return collect(ctx, q.r, "list sessions", scanSession, `SELECT `+sessionColumns+` FROM sessions WHERE member = ? ORDER BY created_at, id`, member)
}

// DeleteSessionByID removes the member's session with that id and returns
// it; ErrNotFound when the member has none such.
func (q queries) DeleteSessionByID(ctx context.Context, member, id string) (store.Session, error) {
	s, err := scanSession(q.w.QueryRowContext(ctx, `DELETE FROM sessions WHERE member = ? AND id = ? RETURNING `+sessionColumns, member, id))
	return s, translate("delete session", err)
}

// DeleteMemberSessions removes every session of the member.
func (q queries) DeleteMemberSessions(ctx context.Context, member string) (int, error) {
	res, err := q.w.ExecContext(ctx, `DELETE FROM sessions WHERE member = ?`, member)
	if err != nil {
		return 0, translate("delete member sessions", err)
	}
	n, err := res.RowsAffected()
	return int(n), translate("delete member sessions", err)
}

func scanSession(row scanner) (store.Session, error) {
	var (
		s             store.Session
		id            sql.NullString
		hash          []byte
		created, seen int64
		expires       sql.NullInt64
	)
	if err := row.Scan(&id, &hash, &s.Member, &created, &seen, &expires); err != nil {
		return store.Session{}, err
	}
	if len(hash) != len(s.Hash) {
		return store.Session{}, fmt.Errorf("stored session hash has %d bytes", len(hash))
	}
	s.ID = id.String
	copy(s.Hash[:], hash)
	s.CreatedAt = fromMS(created)
	s.LastSeenAt = fromMS(seen)
	s.ExpiresAt = fromNullMS(expires)
	return s, nil
}

// TouchSession sets the session's LastSeenAt (the clock's time when zero)
// and ExpiresAt; ErrNotFound when absent.
func (q queries) TouchSession(ctx context.Context, h store.SessionHash, lastSeen, expires time.Time) error {
	res, err := q.w.ExecContext(ctx, `UPDATE sessions SET last_seen_at = ?, expires_at = ? WHERE hash = ?`,
		q.orNow(lastSeen).UnixMilli(), msOrNull(expires), h[:])
	if err != nil {
		return translate("touch session", err)
	}
	return notFound("touch session", res)
}

// DeleteSession removes a session; ErrNotFound when absent.
func (q queries) DeleteSession(ctx context.Context, h store.SessionHash) error {
	res, err := q.w.ExecContext(ctx, `DELETE FROM sessions WHERE hash = ?`, h[:])
	if err != nil {
		return translate("delete session", err)
	}
	return notFound("delete session", res)
}

// DeleteExpiredSessions removes sessions whose expiry is at or before now
// (the clock's time when zero) and returns how many it removed. Sessions
// without expiry stay.
func (q queries) DeleteExpiredSessions(ctx context.Context, now time.Time) (int, error) {
	res, err := q.w.ExecContext(ctx, `DELETE FROM sessions WHERE expires_at <= ?`, q.orNow(now).UnixMilli())
	if err != nil {
		return 0, translate("delete expired sessions", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, translate("delete expired sessions", err)
	}
	return int(n), nil
}
