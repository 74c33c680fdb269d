package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	neturl "net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"svc/store"
)

// testClock is a clock the test moves.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// logBuffer is a slog handler's output, safe to read while it is written.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestFailureOfErr(t *testing.T) {
	live := context.Background()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want failure
	}{
		{"disk full", live, &pgconn.PgError{Code: "53100"}, failFull},
		{"disk full, translated", live, translate("commit", &pgconn.PgError{Code: "53100", Message: "could not extend file"}), failFull},
		{"data corrupted", live, &pgconn.PgError{Code: "XX001"}, failDamaged},
		{"index corrupted, translated", live, translate("select", &pgconn.PgError{Code: "XX002"}), failDamaged},
		{"server I/O error", live, &pgconn.PgError{Code: "58030"}, failIO},
		{"backend terminated", live, &pgconn.PgError{Code: "57P01", Severity: "FATAL"}, failUnavailable},
		{"server starting up", live, &pgconn.PgError{Code: "57P03", Severity: "FATAL"}, failUnavailable},
		{"connection failure", live, &pgconn.PgError{Code: "08006"}, failUnavailable},
		{"connection refused", live, fmt.Errorf("begin: %w", &net.OpError{Op: "dial", Net: "unix", Err: syscall.ECONNREFUSED}), failUnavailable},
		{"connection closed before use", live, fmt.Errorf("begin: %w", pgconn.ErrConnClosed), failUnavailable},
		{"connection cut", live, fmt.Errorf("commit: %w", io.ErrUnexpectedEOF), failUnavailable},
		{"unique violation", live, &pgconn.PgError{Code: "23505"}, failNone},
		{"serialization failure", live, &pgconn.PgError{Code: "40001"}, failNone},
		{"plain error", live, errors.New("scan: wrong type"), failNone},
		{"caller's context cancelled", live, context.Canceled, failNone},
		{"anything once the caller cancelled", cancelled, &net.OpError{Op: "read", Err: syscall.ECONNRESET}, failNone},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, failureOfErr(tc.ctx, tc.err))
			got := withSentinel(tc.want, tc.err)
			switch tc.want {
			case failFull:
				require.ErrorIs(t, got, store.ErrStorageFull)
			case failDamaged:
				require.ErrorIs(t, got, store.ErrDamaged)
			case failUnavailable:
				require.ErrorIs(t, got, store.ErrUnavailable)
			default:
				require.Equal(t, tc.err, got)
			}
		})
	}
}

// healthTarget is one store under the health test: how it writes through
// its public API, how a write fails on the server with a given SQLSTATE,
// and its Health.
type healthTarget struct {
	c      *conns
	health func() error
	write  func(ctx context.Context) error
	read   func(ctx context.Context) error
}

var healthStores = []struct {
	name string
	open func(t *testing.T, url string, opts ...Option) healthTarget
}{
	{"main store", func(t *testing.T, url string, opts ...Option) healthTarget {
		var db *DB
		if url == "" {
			db = MustOpen(t, opts...)
		} else {
			var err error
			db, err = Open(t.Context(), url, opts...)
			require.NoError(t, err)
			t.Cleanup(func() { _ = db.Close() })
		}
		return healthTarget{c: db.c, health: db.Health, write: func(ctx context.Context) error {
			return db.PutMeta(ctx, "health_test", strconv.FormatInt(time.Now().UnixNano(), 10))
		}, read: func(ctx context.Context) error {
			_, err := db.GetMeta(ctx, "health_test")
			return err
		}}
	}},
	{"activity store", func(t *testing.T, url string, opts ...Option) healthTarget {
		var db *ActivityDB
		if url == "" {
			db = MustOpenActivity(t, opts...)
		} else {
			var err error
			db, err = OpenActivity(t.Context(), url, opts...)
			require.NoError(t, err)
			t.Cleanup(func() { _ = db.Close() })
		}
		return healthTarget{c: db.c, health: db.Health, write: func(ctx context.Context) error {
			_, err := db.AppendActivity(ctx, []store.ActivityEvent{{
				Member: "alice", Kind: "tool_action", TS: time.UnixMilli(1), Data: []byte(`{}`),
			}})
			return err
		}, read: func(ctx context.Context) error {
			_, err := db.LastActivityID(ctx)
			return err
		}}
	}},
}

// raising is a write transaction the server fails with SQLSTATE code, as
// it does when its disk is full (53100) or a page is corrupted (XX001):
// the error comes over the wire exactly as the real one would.
func raising(c *conns, code string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		return c.withTx(ctx, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `DO $$ BEGIN RAISE EXCEPTION 'simulated' USING ERRCODE = '`+code+`'; END $$`)
			return err // untranslated, as a closure may return it
		})
	}
}

// TestWriteFailuresAreReported: a write the database fails for want of
// room, on damage, or because the server dropped the connection under it
// fails with the store's sentinel, and Health says what fails and since
// when, one log line per run; the next write that succeeds once
// store.FailureHold has passed clears a write failure, while damage stays
// until the store is reopened (as store/sqlite's). Before, Health did not
// exist on this store: /healthz said ok whatever PostgreSQL did.
func TestWriteFailuresAreReported(t *testing.T) {
	tests := []struct {
		name   string
		fail   func(tg healthTarget) func(ctx context.Context) error
		is     error
		what   string
		clears bool
		log    string // what the log says when it clears
	}{
		{name: "disk full", fail: func(tg healthTarget) func(ctx context.Context) error { return raising(tg.c, "53100") },
			is: store.ErrStorageFull, what: "writes failing since", clears: true, log: "store writes succeed again"},
		{name: "data damaged", fail: func(tg healthTarget) func(ctx context.Context) error { return raising(tg.c, "XX001") },
			is: store.ErrDamaged, what: "data failing since", clears: false},
		{name: "index damaged", fail: func(tg healthTarget) func(ctx context.Context) error { return raising(tg.c, "XX002") },
			is: store.ErrDamaged, what: "data failing since", clears: false},
		{name: "backend terminated under a write", fail: func(tg healthTarget) func(ctx context.Context) error {
			return func(ctx context.Context) error {
				return tg.c.withTx(ctx, func(tx pgx.Tx) error {
					_, err := tx.Exec(ctx, `SELECT pg_terminate_backend(pg_backend_pid())`)
					return err
				})
			}
		}, is: store.ErrUnavailable, what: "database connections failing since", clears: true, log: "database reachable again"},
	}
	for _, st := range healthStores {
		for _, tc := range tests {
			t.Run(st.name+"/"+tc.name, func(t *testing.T) {
				ctx := t.Context()
				logs := &logBuffer{}
				clock := &testClock{t: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)}
				tg := st.open(t, "", WithLogger(slog.New(slog.NewTextHandler(logs, nil))), WithNow(clock.now))
				require.NoError(t, tg.write(ctx))
				require.NoError(t, tg.health())

				fail := tc.fail(tg)
				for range 2 {
					require.ErrorIs(t, fail(ctx), tc.is)
				}
				h := tg.health()
				require.ErrorIs(t, h, tc.is)
				require.ErrorContains(t, h, tc.what+" 2026-11-28T12:00:00Z")
				var fe *store.FailingError
				require.ErrorAs(t, h, &fe)
				require.Equal(t, 1, strings.Count(logs.String(), "level=ERROR"), "one error line per run of failures:\n%s", logs)

				// A success within the hold leaves the failure reported
				// (a full disk takes small writes between refused ones).
				require.NoError(t, tg.write(ctx))
				require.ErrorIs(t, tg.health(), tc.is)

				clock.advance(store.FailureHold)
				require.NoError(t, tg.write(ctx))
				if tc.clears {
					require.NoError(t, tg.health())
					require.Contains(t, logs.String(), tc.log)
				} else {
					require.ErrorIs(t, tg.health(), store.ErrDamaged, "damage stays until the broker restarts")
				}
			})
		}
	}
}

// TestDamagedReadIsReported: a read the server fails on a damaged page
// marks the store damaged; a read says nothing about writes.
func TestDamagedReadIsReported(t *testing.T) {
	ctx := t.Context()
	db := MustOpen(t)
	_, err := db.c.pool.Exec(ctx, `CREATE FUNCTION damaged_read() RETURNS int LANGUAGE plpgsql AS
$$ BEGIN RAISE EXCEPTION 'simulated' USING ERRCODE = 'XX001'; END $$`)
	require.NoError(t, err)
	var n int
	err = db.r.QueryRowContext(ctx, `SELECT damaged_read()`).Scan(&n)
	require.Error(t, err)
	require.ErrorIs(t, db.Health(), store.ErrDamaged)
	require.ErrorContains(t, db.Health(), "data failing since")

	// A read that fails otherwise marks nothing.
	db2 := MustOpen(t)
	err = db2.r.QueryRowContext(ctx, `SELECT 1/0`).Scan(&n)
	require.Error(t, err)
	require.NoError(t, db2.Health())
}

// TestUnreachableDatabaseIsReported: with the server out of reach (every
// connection cut and new ones refused), reads and writes fail with
// store.ErrUnavailable (the API's 503) and Health says the database's
// connections fail, whichever noticed first; once the server is reachable
// again the first success after the hold clears it. The server is put out
// of reach by a proxy between store and server, so the test runs against
// any server, shared with the other tests.
func TestUnreachableDatabaseIsReported(t *testing.T) {
	for _, st := range healthStores {
		for _, first := range []string{"read", "write"} {
			t.Run(st.name+"/"+first+" first", func(t *testing.T) {
				ctx := t.Context()
				// A migrated database to reach through the proxy.
				direct := st.open(t, "")
				p := startProxy(t, direct.c.pool.Config().ConnString())

				clock := &testClock{t: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)}
				tg := st.open(t, p.url, WithNow(clock.now))
				require.NoError(t, tg.write(ctx))
				require.NoError(t, tg.read(ctx))
				require.NoError(t, tg.health())

				p.setDown(true)
				ops := []func(context.Context) error{tg.read, tg.write}
				if first == "write" {
					ops = []func(context.Context) error{tg.write, tg.read}
				}
				require.ErrorIs(t, ops[0](ctx), store.ErrUnavailable)
				h := tg.health()
				require.ErrorIs(t, h, store.ErrUnavailable)
				require.ErrorContains(t, h, "database connections failing since 2026-11-28T12:00:00Z")
				require.ErrorIs(t, ops[1](ctx), store.ErrUnavailable)

				p.setDown(false)
				clock.advance(store.FailureHold)
				require.NoError(t, ops[0](ctx))
				require.NoError(t, tg.health())
				require.NoError(t, ops[1](ctx))
			})
		}
	}
}

// TestServerClosedIdleConnections: a read or a write right after the
// server closed the store's idle pooled connections (a restart, an
// administrator's pg_terminate_backend) succeeds on a new connection, and
// Health stays quiet. Before, each failed on a dead connection.
func TestServerClosedIdleConnections(t *testing.T) {
	for _, st := range healthStores {
		for _, op := range []string{"read", "write"} {
			t.Run(st.name+"/"+op, func(t *testing.T) {
				ctx := t.Context()
				tg := st.open(t, "")
				for range 3 {
					require.NoError(t, tg.write(ctx))
					// Several idle connections in the pool, all to be closed.
					var held []*pgxpool.Conn
					for range 4 {
						c, err := tg.c.pool.Acquire(ctx)
						require.NoError(t, err)
						held = append(held, c)
					}
					for _, c := range held {
						c.Release()
					}
					db := tg.c.pool.Config().ConnConfig.Database
					admin, err := pgx.Connect(ctx, tg.c.pool.Config().ConnString())
					require.NoError(t, err)
					_, err = admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
WHERE datname = $1 AND pid <> pg_backend_pid()`, db)
					require.NoError(t, err)
					require.Eventually(t, func() bool {
						var n int
						err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, db).Scan(&n)
						return err == nil && n == 0
					}, 10*time.Second, 5*time.Millisecond)
					require.NoError(t, admin.Close(ctx))
					if op == "read" {
						require.NoError(t, tg.read(ctx))
					} else {
						require.NoError(t, tg.write(ctx))
					}
					require.NoError(t, tg.health())
				}
			})
		}
	}
}

// proxy forwards TCP connections on 127.0.0.1 to a PostgreSQL server; when
// down, it cuts every connection and closes new ones at once.
type proxy struct {
	url    string // the database's URL through the proxy
	target func() (net.Conn, error)

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]struct{}
}

func startProxy(t *testing.T, url string) *proxy {
	t.Helper()
	cfg, err := pgconn.ParseConfig(url)
	require.NoError(t, err)
	host, port := cfg.Host, cfg.Port
	p := &proxy{conns: map[net.Conn]struct{}{}}
	p.target = func() (net.Conn, error) {
		if strings.HasPrefix(host, "/") {
			return net.Dial("unix", filepath.Join(host, ".s.PGSQL."+strconv.Itoa(int(port))))
		}
		return net.Dial("tcp", net.JoinHostPort(host, strconv.Itoa(int(port))))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	u := &neturl.URL{Scheme: "postgres", User: neturl.User(cfg.User), Host: ln.Addr().String(), Path: "/" + cfg.Database,
		RawQuery: neturl.Values{"sslmode": {"disable"}}.Encode()}
	if cfg.Password != "" {
		u.User = neturl.UserPassword(cfg.User, cfg.Password)
	}
	p.url = u.String()
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		p.setDown(true)
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { p.serve(c) })
		}
	})
	return p
}

func (p *proxy) serve(c net.Conn) {
	if !p.track(c) {
		_ = c.Close()
		return
	}
	s, err := p.target()
	if err != nil || !p.track(s) {
		p.untrack(c)
		if s != nil {
			_ = s.Close()
		}
		return
	}
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go cp(s, c)
	go cp(c, s)
	<-done
	p.untrack(c)
	p.untrack(s)
	<-done
}

func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
	_ = c.Close()
}

func (p *proxy) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for c := range p.conns {
			_ = c.Close()
			delete(p.conns, c)
		}
	}
}
