package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mattn/go-sqlite3"
)

const (
	// busyTimeoutMS is how long a connection waits for a lock held by another
	// connection (another process, or a checkpoint) before failing with
	// SQLITE_BUSY. Inside this process writes already queue on the single
	// writer connection, so the wait only covers outside lockers.
	busyTimeoutMS = 5000
	// readerConns bounds the read pool. WAL lets readers run alongside the
	// writer; a few connections cover concurrent requests on small machines.
	readerConns = 4
	// memoryPath is the SQLite name of an in-memory database.
	memoryPath = ":memory:"
)

// Option configures Open and OpenActivity.
type Option func(*options)

type options struct {
	now func() time.Time
	log *slog.Logger
	// checkpointEvery is how often the checkpointer looks at the WAL;
	// zero stops it (tests).
	checkpointEvery time.Duration
	// onCommit, when set, is told how long each write transaction's
	// COMMIT took (WithCommitObserver).
	onCommit func(time.Duration)
	// exclusive takes the file's lock (lock.go): the main store's, whose
	// token cache needs it to be the only writer. The activity store has
	// no cache, and svc activity prune opens it beside a running broker.
	exclusive bool
	// startupCheck bounds the quick_check run when a file is opened
	// (check.go); zero skips it.
	startupCheck time.Duration
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
// COMMIT took: with synchronous=FULL on the WAL, that is the fsync of the
// commit. f runs on the committing goroutine and must be cheap (metrics).
func WithCommitObserver(f func(took time.Duration)) Option {
	return func(o *options) { o.onCommit = f }
}

// WithStartupCheck bounds the PRAGMA quick_check that opening a file runs
// before anything else touches it; d <= 0 skips the check. The default is
// DefaultStartupCheck.
func WithStartupCheck(d time.Duration) Option {
	return func(o *options) { o.startupCheck = max(d, 0) }
}

// withCheckpointEvery sets how often the checkpointer runs; zero starts
// none (tests).
func withCheckpointEvery(d time.Duration) Option {
	return func(o *options) { o.checkpointEvery = d }
}

func newOptions(opts []Option) options {
	o := options{now: time.Now, log: slog.New(slog.DiscardHandler), checkpointEvery: defaultCheckpointEvery, startupCheck: DefaultStartupCheck}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// conns holds the handles of one database file: a single-connection writer
// and a read pool. In memory mode both are the same single connection,
// because an in-memory database lives and dies with its connection.
type conns struct {
	writer *sql.DB
	reader *sql.DB

	// stmts caches statements prepared on the writer or the reader pool,
	// for the hot paths (message appends, token lookups): SQLite would
	// otherwise parse and plan them again on every call.
	stmts sync.Map // stmtKey -> *sql.Stmt

	// ckpt, for a file, copies the WAL into the database file in the
	// background (see checkpointer).
	ckpt *checkpointer
	// onCommit, when set, times each COMMIT (WithCommitObserver).
	onCommit func(time.Duration)

	// tokens caches token rows by hash (tokencache.go); tokenTx is set
	// while the running transaction has changed token rows.
	tokens  tokenCache
	tokenTx atomic.Bool

	// lock, for a file, holds the file's exclusive lock (lock.go).
	lock *os.File

	// health is what the database's writes, reads and checkpoints say
	// about its storage (health.go).
	health *health

	closeOnce sync.Once
	closeErr  error
}

// pragma is a setting every connection must have, as PRAGMA name reports it.
type pragma struct {
	name string
	want string
}

// openConns opens the database at path, applies the migrations in fsys and
// verifies the connection settings.
func openConns(ctx context.Context, path string, fsys fs.FS, o options) (*conns, error) {
	if path == "" || path == memoryPath {
		return openMemory(ctx, fsys, o)
	}
	return openFile(ctx, path, fsys, o)
}

func openMemory(ctx context.Context, fsys fs.FS, o options) (*conns, error) {
	params := url.Values{
		"_busy_timeout": {strconv.Itoa(busyTimeoutMS)},
		"_foreign_keys": {"1"},
		"_txlock":       {"immediate"},
	}
	db := newDB(memoryPath+"?"+params.Encode(), []pragma{
		{"foreign_keys", "1"},
		{"busy_timeout", strconv.Itoa(busyTimeoutMS)},
	})
	// One connection that never expires: closing it would drop the data.
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	c := &conns{writer: db, reader: db, onCommit: o.onCommit, health: newHealth(memoryPath, o)}
	if err := c.init(ctx, "", fsys, o); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return c, nil
}

func openFile(ctx context.Context, path string, fsys fs.FS, o options) (*conns, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("resolve path: %w", err)
	}
	if err := createFile(abs); err != nil {
		return nil, err
	}
	var lock *os.File
	if o.exclusive {
		if lock, err = lockFile(abs + ".lock"); err != nil {
			return nil, err
		}
	}
	params := url.Values{
		"_busy_timeout": {strconv.Itoa(busyTimeoutMS)},
		"_foreign_keys": {"1"},
		"_journal_mode": {"WAL"},
		// FULL fsyncs the WAL on every commit, so an acknowledged write
		// survives kill -9 and power loss alike. The driver would pick
		// NORMAL for WAL, which can lose the last commits on power loss.
		"_synchronous": {"FULL"},
	}
	want := []pragma{
		{"journal_mode", "wal"},
		{"foreign_keys", "1"},
		{"busy_timeout", strconv.Itoa(busyTimeoutMS)},
		{"synchronous", "2"},
	}
	// The writer truncates the WAL back to journalSizeLimit when it
	// starts it over after a burst (checkpoint.go).
	sizeLimit := "PRAGMA journal_size_limit=" + strconv.Itoa(journalSizeLimit)

	wparams := cloneValues(params)
	// BEGIN IMMEDIATE takes the write lock up front, so a transaction never
	// fails half-way on upgrading a read lock to a write lock.
	wparams.Set("_txlock", "immediate")
	// No automatic checkpoint: SQLite runs it inside whichever commit
	// crosses the threshold, and that acknowledgement waits for the copy
	// and an fsync of the database file (a 100-300 ms stall under load).
	// The checkpointer does it on its own connection instead.
	wwant := append(slices.Clip(want), pragma{"wal_autocheckpoint", "0"}, pragma{"journal_size_limit", strconv.Itoa(journalSizeLimit)})
	c := &conns{
		writer:   newDBSetup(fileDSN(abs, wparams), []string{"PRAGMA wal_autocheckpoint=0", sizeLimit}, wwant),
		onCommit: o.onCommit, lock: lock, health: newHealth(abs, o),
	}
	c.writer.SetMaxOpenConns(1)
	c.writer.SetMaxIdleConns(1)
	c.writer.SetConnMaxLifetime(0)
	c.writer.SetConnMaxIdleTime(0)

	rparams := cloneValues(params)
	rparams.Set("_query_only", "1")
	rwant := append(slices.Clip(want), pragma{"query_only", "1"})
	c.reader = newDB(fileDSN(abs, rparams), rwant)
	c.reader.SetMaxOpenConns(readerConns)
	c.reader.SetMaxIdleConns(readerConns)

	if err := c.init(ctx, abs, fsys, o); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	if err := c.reader.PingContext(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("connect reader: %w", err), c.Close())
	}
	if o.checkpointEvery > 0 {
		ck, err := startCheckpointer(ctx, newCheckpointDB(abs, params, want), o.checkpointEvery, c.health)
		if err != nil {
			return nil, errors.Join(err, c.Close())
		}
		c.ckpt = ck
	}
	return c, nil
}

// init connects the writer, which runs the pragma checks, checks a file
// (abs, empty in memory) for damage, then migrates: nothing is written to
// a damaged file.
func (c *conns) init(ctx context.Context, abs string, fsys fs.FS, o options) error {
	if err := c.writer.PingContext(ctx); err != nil {
		if failureOfErr(err) == failDamaged {
			return damagedAtOpen(abs, err)
		}
		return fmt.Errorf("connect writer: %w", err)
	}
	if abs != "" {
		if err := startupCheck(ctx, c.writer, abs, o); err != nil {
			return err
		}
	}
	return migrate(ctx, c.writer, fsys, o)
}

type stmtKey struct {
	writer bool
	query  string
}

// prepared returns the statement of query prepared on the writer or on the
// reader pool, preparing it once.
func (c *conns) prepared(ctx context.Context, writer bool, query string) (*sql.Stmt, error) {
	k := stmtKey{writer, query}
	if st, ok := c.stmts.Load(k); ok {
		return st.(*sql.Stmt), nil
	}
	db := c.reader
	if writer {
		db = c.writer
	}
	st, err := db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if prev, loaded := c.stmts.LoadOrStore(k, st); loaded {
		_ = st.Close()
		return prev.(*sql.Stmt), nil
	}
	return st, nil
}

// Close closes every handle. Calling it again returns the first result.
func (c *conns) Close() error {
	c.closeOnce.Do(func() {
		if c.ckpt != nil {
			c.closeErr = c.ckpt.stop()
		}
		c.stmts.Range(func(_, st any) bool {
			_ = st.(*sql.Stmt).Close()
			return true
		})
		// Readers first: the last connection to close checkpoints the WAL
		// into the main file and removes it, and that should be the writer.
		if c.reader != c.writer {
			c.closeErr = errors.Join(c.closeErr, c.reader.Close())
		}
		c.closeErr = errors.Join(c.closeErr, c.writer.Close())
		if c.lock != nil {
			c.closeErr = errors.Join(c.closeErr, c.lock.Close())
		}
	})
	return c.closeErr
}

// withTx runs fn in one write transaction: it commits when fn returns nil
// and rolls back otherwise. The rollback matters beyond correctness: the
// writer has one connection, so a transaction left open would block every
// later write.
func (c *conns) withTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := c.writer.BeginTx(ctx, nil)
	if err != nil {
		err = translate("begin", err)
		c.health.wrote(err)
		return err
	}
	// After a commit this is a no-op returning sql.ErrTxDone. On an error, a
	// panic or runtime.Goexit it ends the transaction, and a panic then
	// carries on up the stack. Either way the transaction's change to
	// token rows, if any, is over.
	defer func() { _ = tx.Rollback(); c.endTokenTx() }()
	if err := fn(tx); err != nil {
		err = withSentinel(err)
		c.health.wrote(err)
		return err
	}
	start := time.Now()
	err = tx.Commit()
	if c.onCommit != nil {
		c.onCommit(time.Since(start))
	}
	if err != nil {
		err = translate("commit", err)
		c.health.wrote(err)
		return err
	}
	c.health.wrote(nil)
	return nil
}

// createFile creates the parent directory (0700) and the empty database file
// (0600) when they do not exist. SQLite gives the -wal and -shm files the
// mode of the database file.
func createFile(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create database file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("create database file: %w", err)
	}
	return nil
}

// fileDSN builds a URI filename, so that any byte of the path survives.
func fileDSN(abs string, params url.Values) string {
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: params.Encode()}
	return u.String()
}

func cloneValues(v url.Values) url.Values {
	out := make(url.Values, len(v)+1)
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// newDB returns a handle whose every new connection is checked against want,
// so a DSN setting the driver ignored fails the connection instead of
// silently weakening durability or integrity.
func newDB(dsn string, want []pragma) *sql.DB { return newDBSetup(dsn, nil, want) }

// newDBSetup is newDB running setup on each new connection first: the
// settings the DSN cannot carry.
func newDBSetup(dsn string, setup []string, want []pragma) *sql.DB {
	drv := &sqlite3.SQLiteDriver{
		ConnectHook: func(c *sqlite3.SQLiteConn) error {
			for _, q := range setup {
				if _, err := c.Exec(q, nil); err != nil {
					return fmt.Errorf("%s: %w", q, err)
				}
			}
			return checkPragmas(c, want)
		},
	}
	return sql.OpenDB(connector{dsn: dsn, drv: drv})
}

type connector struct {
	dsn string
	drv *sqlite3.SQLiteDriver
}

func (c connector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }

func (c connector) Driver() driver.Driver { return c.drv }

func checkPragmas(c *sqlite3.SQLiteConn, want []pragma) error {
	for _, p := range want {
		got, err := readPragma(c, p.name)
		if err != nil {
			return err
		}
		if got != p.want {
			return fmt.Errorf("pragma %s is %q, want %q", p.name, got, p.want)
		}
	}
	return nil
}

func readPragma(c *sqlite3.SQLiteConn, name string) (string, error) {
	rows, err := c.QueryContext(context.Background(), "PRAGMA "+name, nil)
	if err != nil {
		return "", fmt.Errorf("pragma %s: %w", name, err)
	}
	defer rows.Close()
	dest := make([]driver.Value, len(rows.Columns()))
	if err := rows.Next(dest); err != nil {
		if errors.Is(err, io.EOF) {
			return "", fmt.Errorf("pragma %s: no value", name)
		}
		return "", fmt.Errorf("pragma %s: %w", name, err)
	}
	if b, ok := dest[0].([]byte); ok {
		return string(b), nil
	}
	return fmt.Sprint(dest[0]), nil
}
