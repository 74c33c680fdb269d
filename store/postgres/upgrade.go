package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Schema upgrades beside running brokers (docs/DECISIONS.md, "Schema
// upgrades on several brokers"). Brokers that share a team hold the use
// lock shared, so a broker of a newer build could otherwise apply its
// migrations under brokers of the older one, which then run on a schema
// they were not written for. A broker that has migrations to apply needs
// the use lock alone while it applies them: with other brokers running,
// it is refused, and the operator upgrades the schema with them stopped.
// A build with nothing to apply joins running brokers as before, so
// releases without a schema change roll one broker at a time.

// errUpgradeBeside is the refusal of a schema upgrade beside running
// brokers.
var errUpgradeBeside = fmt.Errorf("%w by other brokers, and this build has schema migrations to apply: stop every broker of the team, start one of this build (it upgrades the schema), then the others on this build (docs/OPERATIONS.md, Upgrading several brokers)", ErrInUse)

// pendingMigrations counts the migrations of dir this build has that the
// database at pool has not had. A schema table that does not exist yet
// counts every migration (a fresh database), unless absentOK: then none
// (the activity store lives in another database).
func pendingMigrations(ctx context.Context, pool *pgxpool.Pool, dir string, absentOK bool) (int, error) {
	ms, err := loadMigrations(dir)
	if err != nil {
		return 0, err
	}
	table := migrationsTable(dir)
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&exists); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	if !exists {
		if absentOK {
			return 0, nil
		}
		return len(ms), nil
	}
	var newest int64
	if err := pool.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM `+table).Scan(&newest); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	if known := ms[len(ms)-1].version; newest > int64(known) {
		// As applyMigration says: a later build migrated the database.
		return 0, fmt.Errorf("database schema version %d is newer than this build knows (%d)", newest, known)
	}
	applied := map[int]bool{}
	rows, err := pool.Query(ctx, `SELECT version FROM `+table)
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	for _, v := range versions {
		applied[int(v)] = true
	}
	n := 0
	for _, m := range ms {
		if !applied[m.version] {
			n++
		}
	}
	return n, nil
}

// upgradeKey is held, alone, by a broker upgrading the schema for as long
// as it holds the use lock alone for it: a broker starting meanwhile,
// refused the use lock shared, tells an upgrade (which it waits for) from
// a maintenance command (which it does not).
const upgradeKey int64 = 0x5356_4322

// upgradeAlone takes the use lock alone over the shared hold u has, for
// a schema upgrade, with upgradeKey; false (holding neither) when another
// session holds either. A session's own holds never conflict with its
// requests, so only other brokers refuse it.
func (u *useLock) upgradeAlone(ctx context.Context) (bool, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	var ok bool
	if err := u.conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, upgradeKey).Scan(&ok); err != nil || !ok {
		return false, wrapUpgrade(err)
	}
	if err := u.conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, useKey).Scan(&ok); err != nil || !ok {
		_, uerr := u.conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, upgradeKey)
		return false, wrapUpgrade(errors.Join(err, uerr))
	}
	return true, nil
}

func wrapUpgrade(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("take the use lock for a schema upgrade: %w", err)
}

// endUpgrade gives up the holds upgradeAlone took; the shared one stays.
func (u *useLock) endUpgrade(ctx context.Context) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	var use, upgrade bool
	if err := u.conn.QueryRow(ctx, `SELECT pg_advisory_unlock($1), pg_advisory_unlock($2)`, useKey, upgradeKey).Scan(&use, &upgrade); err != nil {
		return fmt.Errorf("end the schema upgrade's use lock: %w", err)
	}
	if !use || !upgrade {
		return errors.New("end the schema upgrade's use lock: it was not held")
	}
	return nil
}

// waitUpgrade waits, on conn, while a broker upgrades the schema (it
// holds upgradeKey), up to upgradeWait, then takes the use lock shared;
// false at once when the use lock is held alone by anything else (a
// command), or still after the wait.
func waitUpgrade(ctx context.Context, conn *pgx.Conn) (bool, error) {
	deadline := time.Now().Add(upgradeWait)
	for {
		var upgrading, ok bool
		err := conn.QueryRow(ctx, `SELECT NOT pg_try_advisory_lock_shared($1)`, upgradeKey).Scan(&upgrading)
		if err == nil && !upgrading {
			_, err = conn.Exec(ctx, `SELECT pg_advisory_unlock_shared($1)`, upgradeKey)
		}
		if err == nil {
			// Once more: the upgrade may have ended between the two looks.
			err = conn.QueryRow(ctx, `SELECT pg_try_advisory_lock_shared($1)`, useKey).Scan(&ok)
		}
		if err != nil || ok || !upgrading || time.Now().After(deadline) {
			return ok, err
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(100*time.Millisecond + rand.N(200*time.Millisecond)):
		}
	}
}

// upgradeWait bounds how long a broker with migrations to apply waits
// for the use lock alone: brokers of one build started at once on a
// database that needs them each hold it shared, so each lets go in turn
// (after a random pause) until one gets it alone and the others find
// nothing left to apply. Brokers that keep holding it are running ones.
var upgradeWait = 20 * time.Second

// migrateShared applies the migrations of a broker that holds the use
// lock shared: the main store's, and the activity store's when it shares
// the database and has been created there. With anything to apply, it
// needs the use lock alone for the while (errUpgradeBeside otherwise).
func (c *conns) migrateShared(ctx context.Context, o options) error {
	deadline := time.Now().Add(upgradeWait)
	for {
		mainN, err := pendingMigrations(ctx, c.pool, mainMigrations, false)
		if err != nil {
			return err
		}
		actN, err := pendingMigrations(ctx, c.pool, activityMigrations, true)
		if err != nil {
			return err
		}
		if mainN == 0 && actN == 0 {
			return nil
		}
		ok, err := c.use.upgradeAlone(ctx)
		if err != nil {
			return err
		}
		if ok {
			err = migrate(ctx, c.pool, mainMigrations, mainMigrateKey, o)
			if err == nil && actN > 0 {
				err = migrate(ctx, c.pool, activityMigrations, activityMigrateKey, o)
			}
			return errors.Join(err, c.use.endUpgrade(context.WithoutCancel(ctx)))
		}
		if time.Now().After(deadline) {
			return errUpgradeBeside
		}
		if err := c.use.yieldShared(ctx, deadline); err != nil {
			return err
		}
	}
}

// yieldShared lets go of the shared hold for a random pause, so that of
// brokers starting at once one can take the lock alone, then takes it
// shared again, waiting while another holds it alone (upgrading) until
// deadline.
func (u *useLock) yieldShared(ctx context.Context, deadline time.Time) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, err := u.conn.Exec(ctx, `SELECT pg_advisory_unlock_shared($1)`, useKey); err != nil {
		return fmt.Errorf("take the use lock for a schema upgrade: %w", err)
	}
	for {
		pause := 100*time.Millisecond + rand.N(400*time.Millisecond)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
		var ok bool
		if err := u.conn.QueryRow(ctx, `SELECT pg_try_advisory_lock_shared($1)`, useKey).Scan(&ok); err != nil {
			return fmt.Errorf("take the use lock: %w", err)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w by a maintenance command or a broker upgrading the schema: wait for it to finish", ErrInUse)
		}
	}
}
