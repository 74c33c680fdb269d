package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"svc/store"
)

const enrollmentColumns = `id, device_hash, user_code, label_hint, source_ip, user_agent, status, reason,
created_at, expires_at, interval_ms, last_poll_at, member, token_id, sealed_token`

// CreateEnrollment stores a new record; ErrConflict when its id, device
// hash or user code is taken.
func (q queries) CreateEnrollment(ctx context.Context, e store.Enrollment) error {
	_, err := q.w.ExecContext(ctx, `INSERT INTO enrollments (`+enrollmentColumns+`)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		e.ID, e.DeviceHash[:], e.UserCode, e.LabelHint, e.SourceIP, e.UserAgent, e.Status, e.Reason,
		q.orNow(e.CreatedAt).UnixMilli(), e.ExpiresAt.UnixMilli(), e.Interval.Milliseconds(), msOrNull(e.LastPollAt),
		e.Member, e.TokenID, e.SealedToken)
	return translate("create enrollment", err)
}

// GetEnrollmentByDeviceHash looks the hash up through its unique index.
func (q queries) GetEnrollmentByDeviceHash(ctx context.Context, h store.DeviceCodeHash) (store.Enrollment, error) {
	e, err := scanEnrollment(q.r.QueryRowContext(ctx, `SELECT `+enrollmentColumns+` FROM enrollments WHERE device_hash = ?`, h[:]))
	return e, translate("get enrollment", err)
}

// GetEnrollmentByUserCode looks the user code up through its unique index.
func (q queries) GetEnrollmentByUserCode(ctx context.Context, userCode string) (store.Enrollment, error) {
	e, err := scanEnrollment(q.r.QueryRowContext(ctx, `SELECT `+enrollmentColumns+` FROM enrollments WHERE user_code = ?`, userCode))
	return e, translate("get enrollment", err)
}

// ListEnrollments returns the records live at now, oldest first.
func (q queries) ListEnrollments(ctx context.Context, now time.Time) ([]store.Enrollment, error) {
	return collect(ctx, q.r, "list enrollments", scanEnrollment, `SELECT `+enrollmentColumns+` FROM enrollments WHERE expires_at > ? ORDER BY created_at, rowid`, now.UnixMilli())
}

// CountEnrollments returns how many records are live at now.
func (q queries) CountEnrollments(ctx context.Context, now time.Time) (int, error) {
	var n int
	err := q.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM enrollments WHERE expires_at > ?`, now.UnixMilli()).Scan(&n)
	return n, translate("count enrollments", err)
}

// UpdateEnrollment overwrites the mutable fields of the record with e.ID.
func (q queries) UpdateEnrollment(ctx context.Context, e store.Enrollment) error {
	res, err := q.w.ExecContext(ctx, `UPDATE enrollments SET status = ?, reason = ?, expires_at = ?, interval_ms = ?,
last_poll_at = ?, member = ?, token_id = ?, sealed_token = ? WHERE id = ?`,
		e.Status, e.Reason, e.ExpiresAt.UnixMilli(), e.Interval.Milliseconds(), msOrNull(e.LastPollAt),
		e.Member, e.TokenID, e.SealedToken, e.ID)
	if err != nil {
		return translate("update enrollment", err)
	}
	return notFound("update enrollment", res)
}

// DeleteEnrollment removes a record.
func (q queries) DeleteEnrollment(ctx context.Context, id string) error {
	res, err := q.w.ExecContext(ctx, `DELETE FROM enrollments WHERE id = ?`, id)
	if err != nil {
		return translate("delete enrollment", err)
	}
	return notFound("delete enrollment", res)
}

// DeleteExpiredEnrollments removes the records expired at now and returns
// them.
func (q queries) DeleteExpiredEnrollments(ctx context.Context, now time.Time) ([]store.Enrollment, error) {
	return collect(ctx, q.w, "delete expired enrollments", scanEnrollment, `DELETE FROM enrollments WHERE expires_at <= ? RETURNING `+enrollmentColumns, now.UnixMilli())
}

func scanEnrollment(s scanner) (store.Enrollment, error) {
	var (
		e                          store.Enrollment
		hash                       []byte
		created, expires, interval int64
		lastPoll                   sql.NullInt64
	)
	if err := s.Scan(&e.ID, &hash, &e.UserCode, &e.LabelHint, &e.SourceIP, &e.UserAgent, &e.Status, &e.Reason,
		&created, &expires, &interval, &lastPoll, &e.Member, &e.TokenID, &e.SealedToken); err != nil {
		return store.Enrollment{}, err
	}
	if len(hash) != len(e.DeviceHash) {
		return store.Enrollment{}, fmt.Errorf("enrollment %q: stored hash has %d bytes", e.ID, len(hash))
	}
	copy(e.DeviceHash[:], hash)
	e.CreatedAt = fromMS(created)
	e.ExpiresAt = fromMS(expires)
	e.Interval = time.Duration(interval) * time.Millisecond
	e.LastPollAt = fromNullMS(lastPoll)
	return e, nil
}
