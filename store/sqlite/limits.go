package sqlite

import (
	"context"
	"time"
)

// AddLimitHit records one attempt counted under key.
func (q queries) AddLimitHit(ctx context.Context, key string, at time.Time) error {
	_, err := q.w.ExecContext(ctx, `INSERT INTO limit_hits (key, at) VALUES (?, ?)`, key, q.orNow(at).UnixMilli())
	return translate("add limit hit", err)
}

// LimitHits returns the times of key's attempts after since, newest first,
// at most limit of them.
func (q queries) LimitHits(ctx context.Context, key string, since time.Time, limit int) ([]time.Time, error) {
	return collect(ctx, q.r, "limit hits", func(row scanner) (time.Time, error) {
		var at int64
		err := row.Scan(&at)
		return fromMS(at), err
	}, `SELECT at FROM limit_hits WHERE key = ? AND at > ? ORDER BY at DESC, id DESC LIMIT ?`, key, since.UnixMilli(), limit)
}

// PruneLimitHits deletes the attempts from before before.
func (q queries) PruneLimitHits(ctx context.Context, before time.Time) (int, error) {
	res, err := q.w.ExecContext(ctx, `DELETE FROM limit_hits WHERE at < ?`, before.UnixMilli())
	if err != nil {
		return 0, translate("prune limit hits", err)
	}
	n, err := res.RowsAffected()
	return int(n), translate("prune limit hits", err)
}

// ClaimTOTPStep records step as member's last accepted step unless one at
// or after it is recorded, in one statement.
func (q queries) ClaimTOTPStep(ctx context.Context, member string, step int64) (bool, error) {
	res, err := q.w.ExecContext(ctx, `INSERT INTO totp_steps (member, step) VALUES (?, ?)
ON CONFLICT (member) DO UPDATE SET step = excluded.step WHERE totp_steps.step < excluded.step`, member, step)
	if err != nil {
		return false, translate("claim totp step", err)
	}
	n, err := res.RowsAffected()
	return n == 1, translate("claim totp step", err)
}

// ForgetTOTPStep drops member's recorded step.
func (q queries) ForgetTOTPStep(ctx context.Context, member string) error {
	_, err := q.w.ExecContext(ctx, `DELETE FROM totp_steps WHERE member = ?`, member)
	return translate("forget totp step", err)
}
