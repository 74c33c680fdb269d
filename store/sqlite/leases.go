package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"svc/store"
)

// takeLeaseQuery takes a lease in one statement: a new row, or the row
// of a holder whose time ran out (?4 is now), or a renewal by its holder.
// It returns no row when someone else holds the lease.
const takeLeaseQuery = `INSERT INTO leases (name, owner, epoch, expires_at) VALUES (?1, ?2, 1, ?3)
ON CONFLICT (name) DO UPDATE SET
	epoch = CASE WHEN leases.owner = excluded.owner THEN leases.epoch ELSE leases.epoch + 1 END,
	owner = excluded.owner, expires_at = excluded.expires_at
WHERE leases.owner = excluded.owner OR leases.expires_at < ?4
RETURNING owner, epoch, expires_at`

// TakeLease takes, takes over or renews the lease name for owner.
func (q queries) TakeLease(ctx context.Context, name, owner string, now time.Time, ttl time.Duration) (store.Lease, bool, error) {
	if name == "" || owner == "" || ttl <= 0 {
		return store.Lease{}, false, fmt.Errorf("take lease: a name, an owner and a positive ttl")
	}
	l := store.Lease{Name: name}
	var exp int64
	err := q.w.QueryRowContext(ctx, takeLeaseQuery, name, owner, now.Add(ttl).UnixMilli(), now.UnixMilli()).Scan(&l.Owner, &l.Epoch, &exp)
	if err == nil {
		l.ExpiresAt = fromMS(exp)
		return l, true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return store.Lease{}, false, translate("take lease", err)
	}
	err = q.w.QueryRowContext(ctx, `SELECT owner, epoch, expires_at FROM leases WHERE name = ?`, name).Scan(&l.Owner, &l.Epoch, &exp)
	if err != nil {
		return store.Lease{}, false, translate("take lease", err)
	}
	l.ExpiresAt = fromMS(exp)
	return l, false, nil
}

// HoldsLease reports whether owner still holds name at epoch.
func (q queries) HoldsLease(ctx context.Context, name, owner string, epoch int64) (bool, error) {
	var n int
	err := q.w.QueryRowContext(ctx, `SELECT count(*) FROM leases WHERE name = ? AND owner = ? AND epoch = ?`, name, owner, epoch).Scan(&n)
	return n > 0, translate("holds lease", err)
}
