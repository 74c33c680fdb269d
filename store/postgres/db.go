package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"svc/store"
)

var (
	_ store.Store         = (*DB)(nil)
	_ store.Tx            = queries{}
	_ store.ActivityStore = (*ActivityDB)(nil)
)

// DB is the main store on PostgreSQL. It implements store.Store.
type DB struct {
	// queries runs reads on the pool and each write in a transaction of
	// its own. Methods of queries that issue more than one statement
	// assume they run inside a transaction; DB overrides each of them to
	// open one.
	queries
	c *conns
}

// Open connects to the database at url (a postgres:// URL or a libpq
// connection string) and applies the main store's migrations.
//
// Timestamps the caller leaves zero where a row needs one (a member's,
// token's or session's creation, a member's update, the time of a revoke or
// touch) are taken from the WithNow clock.
func Open(ctx context.Context, url string, opts ...Option) (*DB, error) {
	o := newOptions(opts)
	c, err := openConns(ctx, url, mainMigrations, mainWriteKey, mainMigrateKey, o)
	if errors.Is(err, ErrInUse) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	q := queries{r: reader{c}, w: writer{c}, now: o.now, c: c}
	return &DB{queries: q, c: c}, nil
}

// Close closes the pool. Calling it again does nothing.
func (db *DB) Close() error {
	db.c.Close()
	return nil
}

// WithTx runs fn in one write transaction, committing when fn returns nil
// and rolling back when it returns an error or panics; the panic continues
// after the rollback. fn must use only tx: the transaction holds the
// store's write lock until it ends.
func (db *DB) WithTx(ctx context.Context, fn func(tx store.Tx) error) error {
	return db.c.withTx(ctx, func(tx pgx.Tx) error {
		return fn(db.in(tx))
	})
}

// ReplaceMembers makes the stored member set equal to members in one
// transaction.
func (db *DB) ReplaceMembers(ctx context.Context, members []store.Member) error {
	return db.c.withTx(ctx, func(tx pgx.Tx) error {
		return db.in(tx).ReplaceMembers(ctx, members)
	})
}

// inTx runs fn on the queries of one write transaction and returns its
// result: the DB form of a method that runs several statements.
func inTx[T any](ctx context.Context, db *DB, fn func(q queries) (T, error)) (T, error) {
	var out T
	err := db.c.withTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = fn(db.in(tx))
		return err
	})
	return out, err
}

// in returns the queries that run everything on tx.
func (db *DB) in(tx pgx.Tx) queries {
	h := txHandle{tx}
	return queries{r: h, w: h, now: db.now, c: db.c, tx: tx}
}

// queries implements store.Tx over a read handle and a write handle: the
// pool and the serialised writer for DB, the same transaction twice inside
// WithTx.
type queries struct {
	r   dbtx
	w   dbtx
	now func() time.Time
	c   *conns
	tx  pgx.Tx // set inside a transaction
}

// bound is a query bound to the handle it runs on: what a prepared
// statement is on SQLite (pgx prepares and caches statements itself).
type bound struct {
	h     dbtx
	query string
}

func (b bound) ExecContext(ctx context.Context, args ...any) (result, error) {
	return b.h.ExecContext(ctx, b.query, args...)
}

func (b bound) QueryContext(ctx context.Context, args ...any) (pgx.Rows, error) {
	return b.h.QueryContext(ctx, b.query, args...)
}

func (b bound) QueryRowContext(ctx context.Context, args ...any) pgx.Row {
	return b.h.QueryRowContext(ctx, b.query, args...)
}

// stmt returns query bound to the writer or the reader (the transaction
// when in one).
func (q queries) stmt(_ context.Context, writer bool, query string) (bound, error) {
	if writer || q.tx != nil {
		return bound{q.w, query}, nil
	}
	return bound{q.r, query}, nil
}

// orNow returns t, or the clock's time when t is zero.
func (q queries) orNow(t time.Time) time.Time {
	if t.IsZero() {
		return q.now()
	}
	return t
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
	if _, err := q.tx.Exec(ctx, "SAVEPOINT svc_sp"); err != nil {
		return fmt.Errorf("savepoint: %w", err)
	}
	if err := fn(); err != nil {
		if _, rbErr := q.tx.Exec(ctx, "ROLLBACK TO SAVEPOINT svc_sp; RELEASE SAVEPOINT svc_sp"); rbErr != nil {
			return errors.Join(err, fmt.Errorf("roll back to savepoint: %w", rbErr))
		}
		return err
	}
	if _, err := q.tx.Exec(ctx, "RELEASE SAVEPOINT svc_sp"); err != nil {
		return fmt.Errorf("release savepoint: %w", err)
	}
	return nil
}

// tokensChanging is where the SQLite store drops its token cache; this
// store keeps none (another broker may write the same rows).
func (q queries) tokensChanging() func() { return func() {} }
