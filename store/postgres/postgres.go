package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Keys of the transaction-level advisory locks (pg_advisory_xact_lock).
// Each database of svc may share one PostgreSQL database with the other
// (the activity store in the main store's database by default), so each
// has its own write key; migrations have theirs.
const (
	mainWriteKey         int64 = 0x5356_4301 // "SVC" 1
	activityWriteKey     int64 = 0x5356_4302
	mainMigrateKey       int64 = 0x5356_4311
	activityMigrateKey   int64 = 0x5356_4312
	stmtSavepoint              = "svc_stmt"
	defaultMaxConns            = 8
	defaultConnectTimout       = 10 * time.Second
)

// Option configures Open and OpenActivity.
type Option func(*options)

type options struct {
	now func() time.Time
	log *slog.Logger
	// onCommit, when set, is told how long each write transaction's
	// COMMIT took (WithCommitObserver).
	onCommit func(time.Duration)
	// use, when set, is the use lock's mode (WithUseLock); useCheck how
	// often its connection is checked.
	use      *bool
	useCheck *time.Duration
}

// WithNow sets the clock used for timestamps the caller leaves zero. The
// default is time.Now.
func WithNow(now func() time.Time) Option {
	return func(o *options) {
		if now != nil {
			o.now = now
		}
	}
}

// WithLogger sets the logger. The default discards everything.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.log = l
		}
	}
}

// WithCommitObserver sets f to be told how long each write transaction's
// COMMIT took: with synchronous_commit on, the server's WAL flush and the
// round trip. f runs on the committing goroutine and must be cheap
// (metrics).
func WithCommitObserver(f func(took time.Duration)) Option {
	return func(o *options) { o.onCommit = f }
}

func newOptions(opts []Option) options {
	o := options{now: time.Now, log: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// conns is the pool of one store and the key its writes serialise on.
type conns struct {
	pool     *pgxpool.Pool
	writeKey int64
	onCommit func(time.Duration)
	// health is what the store's writes and reads say about the database
	// (health.go).
	health *health
	// writing admits one write transaction of this process at a time,
	// before it takes a connection: the others wait here rather than on
	// the advisory lock, each holding a pooled connection, which could
	// leave none for the reads of the one that holds the lock.
	writing chan struct{}

	// use is the use lock when the store holds it (uselock.go), released
	// by Close.
	use *useLock
	// newConn is set when the pool opened a connection: the next write
	// checks the use lock first (see withTx).
	newConn atomic.Bool

	closeOnce sync.Once
}

// openConns connects to url, checks the settings durability rests on and
// applies the migrations of dir.
func openConns(ctx context.Context, url, dir string, writeKey, migrateKey int64, o options) (*conns, error) {
	cfg, err := poolConfig(url)
	if err != nil {
		return nil, err
	}
	c := &conns{writeKey: writeKey, onCommit: o.onCommit, writing: make(chan struct{}, 1),
		health: newHealth(cfg.ConnConfig.Database, o)}
	cfg.AfterConnect = func(context.Context, *pgx.Conn) error {
		c.newConn.Store(true)
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	c.pool = pool
	if err := c.checkSettings(ctx); err != nil {
		c.Close()
		return nil, err
	}
	if o.use != nil {
		every := defaultUseCheck
		if o.useCheck != nil {
			every = *o.useCheck
		}
		if c.use, err = takeUse(ctx, cfg.ConnConfig.Copy(), *o.use, every, c.health); err != nil {
			c.Close()
			return nil, err
		}
	}
	if c.use != nil && !c.use.exclusive && dir == mainMigrations {
		err = c.migrateShared(ctx, o)
	} else {
		err = migrate(ctx, pool, dir, migrateKey, o)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// poolConfig parses url with the store's defaults: a connect timeout, and
// defaultMaxConns connections unless the URL's pool_max_conns says.
func poolConfig(url string) (*pgxpool.Config, error) {
	// The URL may carry a password: a parse error is not repeated.
	const invalid = "parse database url: not a valid postgres:// url or connection string"
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, errors.New(invalid)
	}
	// pgxpool takes pool_max_conns out of what it parsed, and its default
	// (the number of CPUs, at least 4) cannot be told from a value given:
	// pgconn's parse of the same string keeps it among the parameters it
	// does not know, from a URL's query or a key=value string alike.
	cc, err := pgconn.ParseConfig(url)
	if err != nil {
		return nil, errors.New(invalid)
	}
	if _, given := cc.RuntimeParams["pool_max_conns"]; !given {
		cfg.MaxConns = defaultMaxConns
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = defaultConnectTimout
	}
	return cfg, nil
}

// checkSettings refuses a server on which an acknowledged commit could be
// lost: the store's durability is PostgreSQL's commit.
func (c *conns) checkSettings(ctx context.Context) error {
	for _, s := range []struct{ name, bad string }{{"fsync", "off"}, {"synchronous_commit", "off"}} {
		var v string
		if err := c.pool.QueryRow(ctx, `SELECT current_setting($1)`, s.name).Scan(&v); err != nil {
			return fmt.Errorf("read setting %s: %w", s.name, err)
		}
		if v == s.bad {
			return fmt.Errorf("the server has %s=%s: acknowledged writes could be lost; turn it on", s.name, v)
		}
	}
	return nil
}

// Close closes the pool; calling it again does nothing.
func (c *conns) Close() {
	c.closeOnce.Do(func() {
		if c.use != nil {
			c.use.close()
		}
		c.pool.Close()
	})
}

// withTx runs fn in one write transaction holding the store's write lock
// (the process's, then the database's advisory lock, held to the commit):
// it commits when fn returns nil and rolls back otherwise (a panic carries
// on up the stack after the rollback). Its outcome is reported to health
// (health.go).
func (c *conns) withTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	if c.use != nil && !c.use.held.Load() {
		return c.use.refused()
	}
	select {
	case c.writing <- struct{}{}:
	case <-ctx.Done():
		return translate("begin", ctx.Err())
	}
	defer func() { <-c.writing }()
	// The transaction runs under a detached context (detach.go), which the
	// caller's end still ends; ctx is kept for health.
	dctx, unlink := detach(ctx)
	defer unlink()
	// A BEGIN changes nothing: retried on a connection the server closed.
	var tx pgx.Tx
	err := c.retryIdle(ctx, func() error {
		var err error
		tx, err = c.pool.Begin(dctx)
		return err
	})
	if err != nil {
		return c.health.wrote(ctx, translate("begin", err), false)
	}
	lost := func() bool { return tx.Conn().IsClosed() }
	// After a commit this is a no-op; on an error or a panic it ends the
	// transaction (the panic then carries on up the stack).
	defer func() { _ = tx.Rollback(context.WithoutCancel(dctx)) }()
	// A write on a connection the pool opened since the last write may
	// follow a restart of the server, which ended the use lock's session
	// too: the lock is checked now, not at the watcher's next tick, so
	// no write goes through while another process may hold it.
	if c.use != nil && c.newConn.Swap(false) {
		c.use.check(defaultUseCheck)
		if !c.use.held.Load() {
			return c.use.refused()
		}
	}
	if _, err := tx.Exec(dctx, `SELECT pg_advisory_xact_lock($1)`, c.writeKey); err != nil {
		return c.health.wrote(ctx, translate("take write lock", err), lost())
	}
	if err := fn(detachedTx{tx, dctx}); err != nil {
		return c.health.wrote(ctx, err, lost())
	}
	start := time.Now()
	err = tx.Commit(dctx)
	if c.onCommit != nil {
		c.onCommit(time.Since(start))
	}
	// The commit gave the connection back to the pool, where another
	// goroutine may already use it: only the error says whether it was
	// lost (reading the connection's state here was a data race).
	return c.health.wrote(ctx, translate("commit", err), false)
}

// result is what ExecContext returns, shaped as database/sql's.
type result struct{ tag pgconn.CommandTag }

func (r result) RowsAffected() (int64, error) { return r.tag.RowsAffected(), nil }

// dbtx is the database/sql shape the queries are written in, so this store
// reads side by side with store/sqlite: the same placeholders (?, ?N),
// rewritten to PostgreSQL's $N by rebind.
type dbtx interface {
	ExecContext(ctx context.Context, query string, args ...any) (result, error)
	QueryContext(ctx context.Context, query string, args ...any) (pgx.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) pgx.Row
}

// scanner is a pgx.Row or pgx.Rows.
type scanner interface {
	Scan(dest ...any) error
}

// reader runs statements on the pool, outside any transaction: for reads.
// What they say about the database goes to health (health.go).
type reader struct{ c *conns }

// ExecContext is not retried: a statement run with Exec may write.
func (h reader) ExecContext(ctx context.Context, query string, args ...any) (result, error) {
	dctx, unlink := detach(ctx)
	defer unlink()
	tag, err := h.c.pool.Exec(dctx, rebind(query), args...)
	return result{tag}, h.c.health.read(ctx, err)
}

// QueryContext reads the first row before it returns: a connection the
// server closed fails there, in time to retry on another.
func (h reader) QueryContext(ctx context.Context, query string, args ...any) (pgx.Rows, error) {
	var rows *peekedRows
	err := h.retry(ctx, func() error {
		dctx, unlink := detach(ctx)
		r, err := h.c.pool.Query(dctx, rebind(query), args...)
		if err != nil {
			unlink()
			return err
		}
		ok := r.Next()
		if !ok {
			if err := r.Err(); err != nil {
				r.Close()
				unlink()
				return err
			}
		}
		rows = &peekedRows{Rows: r, pending: true, ok: ok, unlink: unlink}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return watchedRows{Rows: rows, ctx: ctx, h: h.c.health}, nil
}

// peekedRows are rows whose first Next was called already, read under a
// detached context (detach.go) that Close unlinks.
type peekedRows struct {
	pgx.Rows
	pending bool // the first Next's answer is still to give
	ok      bool
	unlink  func()
}

func (r *peekedRows) Close() {
	r.Rows.Close()
	r.unlink()
}

func (r *peekedRows) Next() bool {
	if r.pending {
		r.pending = false
		return r.ok
	}
	return r.Rows.Next()
}

func (h reader) QueryRowContext(ctx context.Context, query string, args ...any) pgx.Row {
	return rowOf(h.QueryContext(ctx, query, args...))
}

// retry runs a read with retryIdle (a read changes nothing) and tells
// health its outcome.
func (h reader) retry(ctx context.Context, read func() error) error {
	return h.c.health.read(ctx, h.c.retryIdle(ctx, read))
}

// retryIdle runs op, which must change nothing when it fails, again on the
// next pooled connection when the one it took was closed by the server
// while it sat idle (a restart, an administrator's pg_terminate_backend):
// the pool drops that connection and the next may serve. Every pooled
// connection may be dead, so it tries up to the pool's size more times; a
// failure to connect ends the retries.
func (c *conns) retryIdle(ctx context.Context, op func() error) error {
	err := op()
	for range c.pool.Config().MaxConns {
		var ce *pgconn.ConnectError
		if err == nil || failureOfErr(ctx, err) != failUnavailable || errors.As(err, &ce) {
			break
		}
		err = op()
	}
	return err
}

// watchedRows tells health the error a read ends with: a row the server
// could not read fails there, after the query started.
type watchedRows struct {
	pgx.Rows
	ctx context.Context
	h   *health
}

func (r watchedRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return r.h.read(r.ctx, err)
	}
	return nil
}

// writer runs each statement in a transaction of its own that holds the
// store's write lock: writes outside WithTx are serial like the others.
type writer struct{ c *conns }

func (h writer) ExecContext(ctx context.Context, query string, args ...any) (result, error) {
	var tag pgconn.CommandTag
	err := h.c.withTx(ctx, func(tx pgx.Tx) error {
		var err error
		tag, err = tx.Exec(ctx, rebind(query), args...)
		return err
	})
	return result{tag}, err
}

func (h writer) QueryContext(ctx context.Context, query string, args ...any) (pgx.Rows, error) {
	var rows *bufferedRows
	err := h.c.withTx(ctx, func(tx pgx.Tx) error {
		var err error
		rows, err = buffer(tx.Query(ctx, rebind(query), args...))
		return err
	})
	if err != nil {
		return nil, err
	}
	return rows, nil
}

func (h writer) QueryRowContext(ctx context.Context, query string, args ...any) pgx.Row {
	return rowOf(h.QueryContext(ctx, query, args...))
}

// txHandle runs statements in a transaction. SQLite undoes only the
// statement that failed and the transaction goes on; PostgreSQL would
// abort the whole transaction. So each write statement runs in a
// savepoint, rolled back to when it fails (docs/DECISIONS.md, "PostgreSQL
// store").
type txHandle struct{ tx pgx.Tx }

func (h txHandle) ExecContext(ctx context.Context, query string, args ...any) (result, error) {
	sql := rebind(query)
	if !needsSavepoint(sql) {
		tag, err := h.tx.Exec(ctx, sql, args...)
		return result{tag}, err
	}
	// One round trip: the savepoint, the statement and its release.
	b := &pgx.Batch{}
	b.Queue(`SAVEPOINT ` + stmtSavepoint)
	b.Queue(sql, args...)
	b.Queue(`RELEASE SAVEPOINT ` + stmtSavepoint)
	br := h.tx.SendBatch(ctx, b)
	_, spErr := br.Exec()
	tag, err := br.Exec()
	_, relErr := br.Exec()
	closeErr := br.Close()
	switch {
	case spErr != nil:
		return result{}, spErr
	case err != nil:
		return result{}, h.rollbackTo(ctx, err)
	case relErr != nil:
		return result{}, relErr
	}
	return result{tag}, closeErr
}

func (h txHandle) QueryContext(ctx context.Context, query string, args ...any) (pgx.Rows, error) {
	sql := rebind(query)
	if !needsSavepoint(sql) {
		return h.tx.Query(ctx, sql, args...)
	}
	if _, err := h.tx.Exec(ctx, `SAVEPOINT `+stmtSavepoint); err != nil {
		return nil, err
	}
	rows, err := buffer(h.tx.Query(ctx, sql, args...))
	if err != nil {
		return nil, h.rollbackTo(ctx, err)
	}
	if _, err := h.tx.Exec(ctx, `RELEASE SAVEPOINT `+stmtSavepoint); err != nil {
		return nil, err
	}
	return rows, nil
}

func (h txHandle) QueryRowContext(ctx context.Context, query string, args ...any) pgx.Row {
	return rowOf(h.QueryContext(ctx, query, args...))
}

// rollbackTo undoes the failed statement, keeping the transaction usable,
// and returns the statement's error.
func (h txHandle) rollbackTo(ctx context.Context, stmtErr error) error {
	if _, err := h.tx.Exec(ctx, `ROLLBACK TO SAVEPOINT `+stmtSavepoint); err != nil {
		return errors.Join(stmtErr, fmt.Errorf("roll back to savepoint: %w", err))
	}
	if _, err := h.tx.Exec(ctx, `RELEASE SAVEPOINT `+stmtSavepoint); err != nil {
		return errors.Join(stmtErr, fmt.Errorf("release savepoint: %w", err))
	}
	return stmtErr
}

// noSavepoint marks statements that cannot fail on a constraint, so a
// batch of them spends no subtransaction per row.
const noSavepoint = "/* no savepoint */ "

// needsSavepoint reports whether sql (rebound) writes and may fail on a
// constraint.
func needsSavepoint(sql string) bool {
	if strings.HasPrefix(sql, noSavepoint) {
		return false
	}
	s := strings.TrimLeft(sql, " \t\n")
	return !(len(s) >= 6 && strings.EqualFold(s[:6], "SELECT"))
}

// bufferedRows holds the rows of a statement read whole, so its
// transaction or savepoint can end before the caller reads them.
type bufferedRows struct {
	fields []pgconn.FieldDescription
	tag    pgconn.CommandTag
	values [][]any
	conn   *pgx.Conn
	i      int
	err    error
}

// buffer reads rows whole, keeping the decoded values.
func buffer(rows pgx.Rows, err error) (*bufferedRows, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	b := &bufferedRows{fields: rows.FieldDescriptions(), conn: rows.Conn(), i: -1}
	for rows.Next() {
		v, err := rows.Values()
		if err != nil {
			return nil, err
		}
		b.values = append(b.values, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	b.tag = rows.CommandTag()
	return b, nil
}

func (b *bufferedRows) Close()                                       {}
func (b *bufferedRows) Err() error                                   { return b.err }
func (b *bufferedRows) CommandTag() pgconn.CommandTag                { return b.tag }
func (b *bufferedRows) FieldDescriptions() []pgconn.FieldDescription { return b.fields }
func (b *bufferedRows) Conn() *pgx.Conn                              { return b.conn }
func (b *bufferedRows) RawValues() [][]byte                          { return nil }
func (b *bufferedRows) TypeMap() *pgtype.Map                         { return b.conn.TypeMap() }

func (b *bufferedRows) Next() bool {
	if b.err != nil || b.i+1 >= len(b.values) {
		b.i = len(b.values)
		return false
	}
	b.i++
	return true
}

func (b *bufferedRows) Values() ([]any, error) {
	if b.i < 0 || b.i >= len(b.values) {
		return nil, errors.New("no current row")
	}
	return b.values[b.i], nil
}

// Scan assigns the current row's decoded values to dest, converting as
// database/sql would for the types the queries use.
func (b *bufferedRows) Scan(dest ...any) error {
	v, err := b.Values()
	if err != nil {
		return err
	}
	if len(dest) != len(v) {
		return fmt.Errorf("scan: %d destinations for %d columns", len(dest), len(v))
	}
	for i := range dest {
		if err := assign(dest[i], v[i]); err != nil {
			return fmt.Errorf("scan column %d (%s): %w", i, b.fields[i].Name, err)
		}
	}
	return nil
}

// rowOf is the first row of rows as a pgx.Row: pgx.ErrNoRows when there is
// none.
func rowOf(rows pgx.Rows, err error) pgx.Row { return &firstRow{rows: rows, err: err} }

type firstRow struct {
	rows pgx.Rows
	err  error
}

func (r *firstRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

var rebound sync.Map // SQLite-style query -> PostgreSQL query

// rebind rewrites the ? and ?N placeholders of query to $N, outside
// quoted strings, remembering the result per query text.
func rebind(query string) string {
	if v, ok := rebound.Load(query); ok {
		return v.(string)
	}
	var (
		sb      strings.Builder
		next    = 1
		inQuote byte
	)
	for i := 0; i < len(query); i++ {
		ch := query[i]
		switch {
		case inQuote != 0:
			if ch == inQuote {
				inQuote = 0
			}
			sb.WriteByte(ch)
		case ch == '\'' || ch == '"':
			inQuote = ch
			sb.WriteByte(ch)
		case ch == '?':
			j := i + 1
			for j < len(query) && query[j] >= '0' && query[j] <= '9' {
				j++
			}
			n := next
			if j > i+1 {
				n, _ = strconv.Atoi(query[i+1 : j])
			}
			if n >= next {
				next = n + 1
			}
			sb.WriteString("$" + strconv.Itoa(n))
			i = j - 1
		default:
			sb.WriteByte(ch)
		}
	}
	out := sb.String()
	rebound.Store(query, out)
	return out
}
