package postgres

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"svc/store"
)

// TestUseLock: brokers share the use lock, a maintenance command holds it
// alone, and closing a store gives it back.
func TestUseLock(t *testing.T) {
	ctx := context.Background()
	url := cluster.NewDatabase(t)
	open := func(exclusive bool) (*DB, error) {
		db, err := Open(ctx, url, WithUseLock(exclusive))
		if err == nil {
			t.Cleanup(func() { _ = db.Close() })
		}
		return db, err
	}
	a, err := open(false)
	require.NoError(t, err, "a first broker")
	b, err := open(false)
	require.NoError(t, err, "a second broker beside it")
	_, err = open(true)
	require.ErrorIs(t, err, ErrInUse, "a command while brokers run")
	require.ErrorIs(t, err, store.ErrInUse)

	require.NoError(t, a.Close())
	_, err = open(true)
	require.ErrorIs(t, err, ErrInUse, "a command while one broker still runs")
	require.NoError(t, b.Close())
	cmd, err := open(true)
	require.NoError(t, err, "a command once every broker stopped")

	_, err = open(false)
	require.ErrorIs(t, err, ErrInUse, "a broker while a command runs")
	require.NoError(t, cmd.Close())
	_, err = open(false)
	require.NoError(t, err, "a broker once the command is done")
}

// TestUseLockBeforeMigrations: a store refused the use lock has not
// touched the schema. Before, Open migrated and the lock was taken after,
// so a second broker could change the schema under one running alone.
func TestUseLockBeforeMigrations(t *testing.T) {
	ctx := t.Context()
	url := cluster.NewDatabase(t) // empty: no schema yet
	admin, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close(context.Background()) })
	var ok bool
	require.NoError(t, admin.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, useKey).Scan(&ok))
	require.True(t, ok)

	_, err = Open(ctx, url, WithUseLock(false))
	require.ErrorIs(t, err, ErrInUse)
	var migrated bool
	require.NoError(t, admin.QueryRow(ctx, `SELECT to_regclass('schema_migrations') IS NOT NULL`).Scan(&migrated))
	require.False(t, migrated, "a store refused the use lock applied migrations")
}

// useLockHolders are the backends holding the use lock in the database of
// conn.
func useLockHolders(t *testing.T, conn *pgx.Conn) []int32 {
	t.Helper()
	rows, err := conn.Query(t.Context(), `SELECT pid FROM pg_locks
WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND classid = ($1::bigint >> 32)::oid AND objid = ($1::bigint & x'ffffffff'::bigint)::oid AND objsubid = 1`, useKey)
	require.NoError(t, err)
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	require.NoError(t, err)
	return pids
}

// terminate ends backend pid and waits until it is gone, its locks with it.
func terminate(t *testing.T, conn *pgx.Conn, pid int32) {
	t.Helper()
	var ok bool
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT pg_terminate_backend($1, 10000)`, pid).Scan(&ok))
	require.True(t, ok, "backend %d still there", pid)
}

// TestUseLockTakenAgain: the use lock lost with its connection (an
// administrator's pg_terminate_backend, as a server restart or a dropped
// connection would) is held again a moment later, and the store's writes
// go on. Before, the lock lived on a pooled connection nobody watched: it
// stayed lost, and a second broker or a command could start beside the
// running one.
func TestUseLockTakenAgain(t *testing.T) {
	ctx := t.Context()
	url := cluster.NewDatabase(t)
	db, err := Open(ctx, url, WithUseLock(false), withUseCheck(50*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	admin, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close(context.Background()) })

	for range 3 {
		holders := useLockHolders(t, admin)
		require.Len(t, holders, 1)
		terminate(t, admin, holders[0])
		require.Eventually(t, func() bool {
			h := useLockHolders(t, admin)
			return len(h) == 1 && h[0] != holders[0]
		}, 10*time.Second, 10*time.Millisecond, "the use lock is held again on a new connection")
		var ok bool
		require.NoError(t, admin.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, useKey).Scan(&ok))
		require.False(t, ok, "a command takes the lock alone beside the broker")
		require.NoError(t, db.PutMeta(ctx, "k", "v"))
		require.NoError(t, db.Health())
	}
}

// TestUseLockTakenByAnother: when another process took the use lock in
// an excluding mode while this store's was lost, Health says so, an error
// is logged and writes are refused (store.ErrUnavailable, a 503) while
// reads go on; once the other lets go, the lock is taken again and writes
// succeed. Before, nothing noticed: the broker wrote beside a command
// that believed it had the database alone.
func TestUseLockTakenByAnother(t *testing.T) {
	ctx := t.Context()
	url := cluster.NewDatabase(t)
	clock := &testClock{t: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)}
	var logs logBuffer
	// No ticker: the test runs each check, so nothing races it for the lock.
	db, err := Open(ctx, url, WithUseLock(false), withUseCheck(0), WithNow(clock.now),
		WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	require.NoError(t, db.PutMeta(ctx, "k", "before"))
	admin, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close(context.Background()) })

	db.c.use.check(time.Second)
	require.NoError(t, db.Health(), "a check of a held lock changes nothing")

	holders := useLockHolders(t, admin)
	require.Len(t, holders, 1)
	terminate(t, admin, holders[0])
	var ok bool
	require.NoError(t, admin.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, useKey).Scan(&ok))
	require.True(t, ok, "a command takes the lost lock")

	db.c.use.check(time.Second)
	h := db.Health()
	require.ErrorIs(t, h, store.ErrInUse)
	require.ErrorContains(t, h, "use lock failing since 2026-11-28T12:00:00Z")
	require.Contains(t, logs.String(), "level=ERROR msg=\"the database's use lock is lost and cannot be taken again")
	err = db.PutMeta(ctx, "k", "during")
	require.ErrorIs(t, err, store.ErrUnavailable, "a write while another holds the lock")
	require.ErrorIs(t, err, store.ErrInUse)
	_, err = inTx(ctx, db, func(q queries) (int, error) { return 0, nil })
	require.ErrorIs(t, err, store.ErrInUse, "a transaction too")
	v, err := db.GetMeta(ctx, "k")
	require.NoError(t, err, "reads go on")
	require.Equal(t, "before", v)

	db.c.use.check(time.Second)
	require.ErrorIs(t, db.Health(), store.ErrInUse, "still lost while the other holds it")

	require.NoError(t, admin.QueryRow(ctx, `SELECT pg_advisory_unlock($1)`, useKey).Scan(&ok))
	require.True(t, ok)
	db.c.use.check(time.Second)
	require.Len(t, useLockHolders(t, admin), 1, "held again")
	require.NoError(t, db.PutMeta(ctx, "k", "after"))
	clock.advance(store.FailureHold)
	require.NoError(t, db.Health())
	require.Contains(t, logs.String(), "the database's use lock is held again")
}

// TestUseLockCheckedAfterReconnect: when every connection of the broker
// ends at once (what a restart of the server does) and another process
// takes the use lock before the watcher's next tick, the broker's next
// write, which needs a new connection, checks the lock first and is
// refused. Before, it went through: the lock was only looked at every few
// seconds.
func TestUseLockCheckedAfterReconnect(t *testing.T) {
	ctx := t.Context()
	url := cluster.NewDatabase(t)
	// No ticker: only the check before a write can notice.
	db, err := Open(ctx, url, WithUseLock(false), withUseCheck(0))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	require.NoError(t, db.PutMeta(ctx, "k", "before"))
	admin, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close(context.Background()) })

	rows, err := admin.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`)
	require.NoError(t, err)
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	require.NoError(t, err)
	require.NotEmpty(t, pids)
	for _, pid := range pids {
		terminate(t, admin, pid)
	}
	var ok bool
	require.NoError(t, admin.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, useKey).Scan(&ok))
	require.True(t, ok, "another process takes the lock the restart released")

	err = db.PutMeta(ctx, "k", "during")
	require.ErrorIs(t, err, store.ErrInUse, "the first write after the reconnect checks the lock")
	v, err := db.GetMeta(ctx, "k")
	require.NoError(t, err, "reads go on")
	require.Equal(t, "before", v)

	require.NoError(t, admin.QueryRow(ctx, `SELECT pg_advisory_unlock($1)`, useKey).Scan(&ok))
	require.True(t, ok)
	db.c.use.check(time.Second)
	require.NoError(t, db.PutMeta(ctx, "k", "after"), "writes go on once the lock is held again")
}
