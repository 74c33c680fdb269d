package postgres

import (
	"context"
	"errors"
	"fmt"
)

// useKey is the advisory lock that says who is using the main store: a
// broker holds it shared for as long as it runs (several brokers may serve
// one team), a maintenance command (svc kek rotate, svc files sweep…)
// exclusively. It is what the lock file beside an SQLite database is: a
// maintenance command refuses while a broker runs, and a broker refuses to
// start while a command works on the store. Advisory locks are scoped to
// the database, so teams in other databases of the cluster are not
// concerned.
const useKey int64 = 0x5356_4321

// ErrInUse is Use's answer when the lock is held in a mode that excludes
// the one asked for.
var ErrInUse = errors.New("the database is in use")

// Use takes the store's use lock on a connection of its own and holds it
// until Close: shared for a broker, exclusive for a command that must run
// alone. It does not wait: a lock held by another process is ErrInUse.
func (db *DB) Use(ctx context.Context, exclusive bool) error {
	conn, err := db.c.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("take the use lock: %w", err)
	}
	fn := "pg_try_advisory_lock_shared"
	if exclusive {
		fn = "pg_try_advisory_lock"
	}
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT "+fn+"($1)", useKey).Scan(&ok); err != nil {
		conn.Release()
		return fmt.Errorf("take the use lock: %w", err)
	}
	if !ok {
		conn.Release()
		if exclusive {
			return fmt.Errorf("%w by a running broker or another command (stop them first)", ErrInUse)
		}
		return fmt.Errorf("%w by a maintenance command (svc kek, svc files, svc admin, svc migrate): wait for it to finish", ErrInUse)
	}
	db.c.held(conn)
	return nil
}
