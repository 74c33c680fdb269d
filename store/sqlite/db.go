package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"svc/store"
)

var (
	_ store.Store         = (*DB)(nil)
	_ store.Tx            = queries{}
	_ store.ActivityStore = (*ActivityDB)(nil)
)

// DB is the main store on SQLite. It implements store.Store.
type DB struct {
	// queries runs reads on the read pool and writes on the writer. Methods
	// of queries that issue more than one statement assume they run inside a
	// transaction; DB overrides each of them to open one.
	queries
	c *conns
}

// Open opens or creates the main database at path and applies its
// migrations. An empty path or ":memory:" gives an in-memory database on a
// single connection: there, reads wait while a WithTx closure runs.
//
// Timestamps the caller leaves zero where a row needs one (a member's,
// token's or session's creation, a member's update, the time of a revoke or
// touch) are taken from the WithNow clock.
func Open(ctx context.Context, path string, opts ...Option) (*DB, error) {
	o := newOptions(opts)
	o.exclusive = true
	c, err := openConns(ctx, path, subFS(mainMigrations), o)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	// Statements hot inside the messenger's transactions are prepared on
	// the writer now: a transaction holds the writer's one connection.
	for _, q := range append(messageStatements(), []string{
		activeTurnQuery, activeTurnsQuery, addLoopStopQuery,
		hookDedupeSeenQuery, addHookDeliveryQuery, setHookMessagesQuery, getHookDeliveryQuery,
		countHookPendingQuery, hookMessageIDsQuery, setHookStatusQuery,
	}...) {
		if _, err := c.prepared(ctx, true, q); err != nil {
			return nil, errors.Join(fmt.Errorf("open store: prepare: %w", err), c.Close())
		}
	}
	q := queries{r: watched{db: c.reader, h: c.health}, w: watched{db: c.writer, h: c.health, writer: true}, now: o.now, c: c}
	return &DB{queries: q, c: c}, nil
}

// Health implements store.HealthReporter: why the store is failing now
// (writes refused for a full disk, I/O errors, damage), or nil.
func (db *DB) Health() error { return db.c.health.err() }

// Close closes the database. Calling it again returns the same result.
func (db *DB) Close() error { return db.c.Close() }

// WithTx runs fn in one write transaction, committing when fn returns nil
// and rolling back when it returns an error or panics; the panic continues
// after the rollback. fn must use only tx: the writer has one connection,
// which tx holds until fn returns.
func (db *DB) WithTx(ctx context.Context, fn func(tx store.Tx) error) error {
	return db.c.withTx(ctx, func(tx *sql.Tx) error {
		return fn(db.in(tx))
	})
}

// ReplaceMembers makes the stored member set equal to members in one
// transaction.
func (db *DB) ReplaceMembers(ctx context.Context, members []store.Member) error {
	return db.c.withTx(ctx, func(tx *sql.Tx) error {
		return db.in(tx).ReplaceMembers(ctx, members)
	})
}

// inTx runs fn on the queries of one write transaction and returns its
// result: the DB form of a method that runs several statements.
func inTx[T any](ctx context.Context, db *DB, fn func(q queries) (T, error)) (T, error) {
	var out T
	err := db.c.withTx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = fn(db.in(tx))
		return err
	})
	return out, err
}

// in returns the queries that run everything on tx.
func (db *DB) in(tx *sql.Tx) queries {
	return queries{r: tx, w: tx, now: db.now, c: db.c, tx: tx}
}

// dbtx is what *sql.DB and *sql.Tx have in common.
type dbtx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// queries implements store.Tx over a read handle and a write handle: the
// read pool and the writer for DB, the same transaction twice inside WithTx.
type queries struct {
	r   dbtx
	w   dbtx
	now func() time.Time
	c   *conns
	tx  *sql.Tx // set inside a transaction
}

// stmt returns a cached prepared statement for a hot query: on the writer
// (bound to the transaction when in one) or on the reader pool.
func (q queries) stmt(ctx context.Context, writer bool, query string) (*sql.Stmt, error) {
	if q.tx != nil {
		writer = true // a transaction runs every statement on the writer
	}
	if q.tx == nil {
		return q.c.prepared(ctx, writer, query)
	}
	// The transaction holds the writer's only connection, so nothing can be
	// prepared on the writer now: use a statement prepared at open, or
	// prepare one for this transaction alone.
	if st, ok := q.c.stmts.Load(stmtKey{true, query}); ok {
		return q.tx.StmtContext(ctx, st.(*sql.Stmt)), nil
	}
	return q.tx.PrepareContext(ctx, query)
}

// orNow returns t, or the clock's time when t is zero.
func (q queries) orNow(t time.Time) time.Time {
	if t.IsZero() {
		return q.now()
	}
	return t
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface {
	Scan(dest ...any) error
}

// msOrNull stores a time as epoch milliseconds, the zero time as NULL.
func msOrNull(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixMilli(), Valid: true}
}

// fromMS is the inverse of storing t.UnixMilli().
func fromMS(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// fromNullMS is the inverse of msOrNull.
func fromNullMS(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return fromMS(n.Int64)
}

// Savepoint runs fn inside a savepoint: an error from fn rolls back what fn
// wrote and leaves the rest of the transaction alone. Outside a transaction
// fn runs as is.
func (q queries) Savepoint(ctx context.Context, fn func() error) error {
	if q.tx == nil {
		return fn()
	}
	if _, err := q.tx.ExecContext(ctx, "SAVEPOINT sp"); err != nil {
		return fmt.Errorf("savepoint: %w", err)
	}
	if err := fn(); err != nil {
		if _, rbErr := q.tx.ExecContext(ctx, "ROLLBACK TO sp; RELEASE sp"); rbErr != nil {
			return errors.Join(err, fmt.Errorf("roll back to savepoint: %w", rbErr))
		}
		return err
	}
	if _, err := q.tx.ExecContext(ctx, "RELEASE sp"); err != nil {
		return fmt.Errorf("release savepoint: %w", err)
	}
	return nil
}
