package sqlite

import (
	"context"
	"time"

	"svc/store"
)

// AddRevocation appends r to the revocations log. Inside WithTx the id is
// assigned under the write lock held to the commit, so ids are the commit
// order (docs/DECISIONS.md, "Revocation and login limits across brokers").
func (q queries) AddRevocation(ctx context.Context, r store.Revocation) (store.Revocation, error) {
	r.At = q.orNow(r.At)
	err := q.w.QueryRowContext(ctx, `INSERT INTO revocations (member, what, at) VALUES (?, ?, ?) RETURNING id`,
		r.Member, r.What, r.At.UnixMilli()).Scan(&r.ID)
	return r, translate("add revocation", err)
}

// RevocationsBetween returns the entries with after < id <= upTo, oldest
// first.
func (q queries) RevocationsBetween(ctx context.Context, after, upTo int64) ([]store.Revocation, error) {
	return collect(ctx, q.r, "revocations between", scanRevocation,
		`SELECT id, member, what, at FROM revocations WHERE id > ? AND id <= ? ORDER BY id`, after, upTo)
}

// LastRevocationID returns the newest entry's id. The prune keeps the
// newest entry, so this never goes back.
func (q queries) LastRevocationID(ctx context.Context) (int64, error) {
	var n int64
	err := q.r.QueryRowContext(ctx, `SELECT COALESCE(MAX(id), 0) FROM revocations`).Scan(&n)
	return n, translate("last revocation id", err)
}

// PruneRevocations deletes the entries from before before, except the
// newest, which keeps LastRevocationID from going back.
func (q queries) PruneRevocations(ctx context.Context, before time.Time) (int, error) {
	res, err := q.w.ExecContext(ctx, `DELETE FROM revocations WHERE at < ? AND id < (SELECT MAX(id) FROM revocations)`, before.UnixMilli())
	if err != nil {
		return 0, translate("prune revocations", err)
	}
	n, err := res.RowsAffected()
	return int(n), translate("prune revocations", err)
}

func scanRevocation(row scanner) (store.Revocation, error) {
	var (
		r  store.Revocation
		at int64
	)
	if err := row.Scan(&r.ID, &r.Member, &r.What, &at); err != nil {
		return store.Revocation{}, err
	}
	r.At = fromMS(at)
	return r, nil
}
