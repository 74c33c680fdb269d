package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"svc/store"
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

// defaultUseCheck is how often the use lock's connection is checked: a
// lock lost with its connection (a server restart, a dropped connection,
// pg_terminate_backend) is taken again within about this long.
const defaultUseCheck = 3 * time.Second

// ErrInUse is the answer when the use lock is held in a mode that excludes
// the one asked for. It wraps store.ErrInUse.
var ErrInUse = fmt.Errorf("the database is %w", store.ErrInUse)

// WithUseLock makes Open take the store's use lock before it applies
// migrations, and hold it until Close: shared for a broker (exclusive
// false), alone for a command that must run alone. Open does not wait: a
// lock held in a mode that excludes this one is ErrInUse. Taken before
// the migrations, a second broker never changes the schema under one that
// runs alone. The activity store ignores it.
//
// The lock lives on a connection of its own, outside the pool, pinged
// every few seconds: a lock lost with its connection is taken again, and
// while it cannot be (another process took it in an excluding mode) Health
// reports it and every write is refused with store.ErrUnavailable
// (docs/DECISIONS.md, "PostgreSQL store: the use lock is watched").
func WithUseLock(exclusive bool) Option {
	return func(o *options) { o.use = &exclusive }
}

// withUseCheck sets how often the use lock's connection is checked; 0
// checks only when a test calls check.
func withUseCheck(every time.Duration) Option {
	return func(o *options) { o.useCheck = &every }
}

// useLock holds the use lock on a connection of its own and keeps it.
type useLock struct {
	cfg       *pgx.ConnConfig
	exclusive bool
	h         *health

	// held is false from the moment the lock is found lost until it is
	// taken again: writes are refused meanwhile (conns.withTx).
	held atomic.Bool

	// ctx ends at close, so a check under way stops connecting.
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex // the connection, used by one goroutine at a time
	conn *pgx.Conn
}

// takeUse takes the use lock on a new connection and starts watching it.
func takeUse(ctx context.Context, cfg *pgx.ConnConfig, exclusive bool, every time.Duration, h *health) (*useLock, error) {
	u := &useLock{cfg: cfg, exclusive: exclusive, h: h, done: make(chan struct{})}
	conn, err := u.take(ctx)
	if err != nil {
		return nil, err
	}
	u.conn = conn
	u.held.Store(true)
	u.ctx, u.cancel = context.WithCancel(context.Background())
	if every <= 0 {
		close(u.done)
		return u, nil
	}
	go u.watch(every)
	return u, nil
}

// take connects and takes the lock in u's mode, without waiting.
func (u *useLock) take(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, u.cfg)
	if err != nil {
		return nil, fmt.Errorf("take the use lock: %w", err)
	}
	fn := "pg_try_advisory_lock_shared"
	if u.exclusive {
		fn = "pg_try_advisory_lock"
	}
	var ok bool
	err = conn.QueryRow(ctx, "SELECT "+fn+"($1)", useKey).Scan(&ok)
	if err == nil && !ok && !u.exclusive {
		// Held alone: by a command, or by a broker upgrading the schema,
		// which a broker waits for (upgrade.go).
		ok, err = waitUpgrade(ctx, conn)
	}
	if err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("take the use lock: %w", err)
	}
	if !ok {
		_ = conn.Close(context.WithoutCancel(ctx))
		if u.exclusive {
			return nil, fmt.Errorf("%w by a running broker or another command (stop them first)", ErrInUse)
		}
		return nil, fmt.Errorf("%w by a maintenance command (svc kek, svc files, svc admin, svc migrate) or a broker running alone: wait for it to finish", ErrInUse)
	}
	return conn, nil
}

func (u *useLock) watch(every time.Duration) {
	defer close(u.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-u.ctx.Done():
			return
		case <-t.C:
			u.check(every)
		}
	}
}

// check pings the lock's connection; when the connection is gone, so is
// the lock (the server released it with the session), and check takes it
// again on a new one. A lock it cannot take again is reported by Health
// and logged, once per run, and refuses writes until a later check takes
// it.
func (u *useLock) check(timeout time.Duration) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.ctx.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(u.ctx, max(timeout, 5*time.Second))
	defer cancel()
	if u.conn != nil {
		if err := u.conn.Ping(ctx); err == nil {
			return
		}
		_ = u.conn.Close(ctx)
		u.conn = nil
		u.held.Store(false)
		u.h.log.Warn("the database's use lock was lost with its connection: taking it again", "database", u.h.database)
	}
	conn, err := u.take(ctx)
	if err != nil {
		if u.ctx.Err() == nil {
			u.h.useLost(err)
		}
		return
	}
	u.conn = conn
	u.held.Store(true)
	u.h.use.Succeed()
	u.h.log.Info("the database's use lock is held again", "database", u.h.database)
}

// refused is a write's error while the lock is not held.
func (u *useLock) refused() error {
	return fmt.Errorf("%w: %w: this broker lost the database's use lock and has not taken it again (see the broker's log)",
		store.ErrUnavailable, store.ErrInUse)
}

// close stops watching and releases the lock.
func (u *useLock) close() {
	u.cancel()
	<-u.done
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.conn == nil {
		return
	}
	// Unlocked at once: the server ends a closed connection's session,
	// and with it the lock, only a little later. Closing it is what still
	// releases the lock if the unlock is lost.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = u.conn.Exec(ctx, "SELECT pg_advisory_unlock_all()")
	_ = u.conn.Close(ctx)
	u.conn = nil
	u.held.Store(false)
}

// useLost records that the lock could not be taken again.
func (h *health) useLost(err error) {
	if !errors.Is(err, store.ErrInUse) {
		// The server cannot be reached: still a lost lock, and the
		// writes that fail meanwhile say unreachable too.
		err = withSentinel(failUnavailable, err)
	}
	if h.use.Fail(err) {
		h.log.Error("the database's use lock is lost and cannot be taken again: writes are refused until it is; stop whatever else holds the database", "database", h.database, "err", err)
	}
}
