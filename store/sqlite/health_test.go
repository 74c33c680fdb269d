package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mattn/go-sqlite3"
	"github.com/stretchr/testify/require"

	"svc/store"
)

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

func newTestLogger() (*slog.Logger, *logBuffer) {
	b := &logBuffer{}
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

func TestFailureOf(t *testing.T) {
	tests := []struct {
		name string
		err  sqlite3.Error
		want failure
	}{
		{"short write", sqlite3.Error{Code: sqlite3.ErrFull}, failFull},
		{"no space on fsync", sqlite3.Error{Code: sqlite3.ErrIoErr, ExtendedCode: sqlite3.ErrIoErrFsync, SystemErrno: syscall.ENOSPC}, failFull},
		{"over a file size limit", sqlite3.Error{Code: sqlite3.ErrIoErr, ExtendedCode: sqlite3.ErrIoErrWrite, SystemErrno: syscall.EFBIG}, failFull},
		{"over a quota", sqlite3.Error{Code: sqlite3.ErrIoErr, ExtendedCode: sqlite3.ErrIoErrWrite, SystemErrno: syscall.EDQUOT}, failFull},
		{"disk error", sqlite3.Error{Code: sqlite3.ErrIoErr, ExtendedCode: sqlite3.ErrIoErrRead, SystemErrno: syscall.EIO}, failIO},
		{"malformed", sqlite3.Error{Code: sqlite3.ErrCorrupt}, failDamaged},
		{"not a database", sqlite3.Error{Code: sqlite3.ErrNotADB}, failDamaged},
		{"constraint", sqlite3.Error{Code: sqlite3.ErrConstraint, ExtendedCode: sqlite3.ErrConstraintUnique}, failNone},
		{"busy", sqlite3.Error{Code: sqlite3.ErrBusy}, failNone},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, failureOf(tc.err))
			require.Equal(t, tc.want, failureOfErr(fmt.Errorf("wrapped: %w", tc.err)))
			got := translate("op", tc.err)
			switch tc.want {
			case failFull:
				require.ErrorIs(t, got, store.ErrStorageFull)
				require.ErrorIs(t, withSentinel(tc.err), store.ErrStorageFull)
			case failDamaged:
				require.ErrorIs(t, got, store.ErrDamaged)
				require.ErrorIs(t, withSentinel(tc.err), store.ErrDamaged)
			}
			if tc.want == failFull || tc.want == failDamaged {
				var se sqlite3.Error
				require.False(t, errors.As(got, &se), "the driver error does not leak: %v", got)
				require.ErrorContains(t, got, "op: ")
			}
		})
	}
	require.Equal(t, failNone, failureOfErr(context.Canceled))
}

// TestStorageFullIsReported: a write the disk has no room for fails with
// store.ErrStorageFull (not a bare driver error the server answers 500),
// Health says the store is failing, and the next write that succeeds
// clears it. The full disk is simulated with PRAGMA max_page_count on the
// writer: SQLite answers SQLITE_FULL exactly as when the file cannot
// grow, and nothing is mounted.
func TestStorageFullIsReported(t *testing.T) {
	big := strings.Repeat("x", 64<<10) // needs new pages wherever it goes
	type target struct {
		writer *sql.DB
		health func() error
		write  func(ctx context.Context) error
	}
	tests := []struct {
		name string
		open func(t *testing.T, opts ...Option) target
	}{
		{"main store transaction", func(t *testing.T, opts ...Option) target {
			db := MustOpen(t, tempPath(t, "svc.db"), opts...)
			_, err := db.c.writer.ExecContext(t.Context(), `CREATE TABLE full_test (b TEXT)`)
			require.NoError(t, err)
			return target{db.c.writer, db.Health, func(ctx context.Context) error {
				return db.c.withTx(ctx, func(tx *sql.Tx) error {
					_, err := tx.ExecContext(ctx, `INSERT INTO full_test VALUES (?)`, big)
					return err // untranslated, as a closure may return it
				})
			}}
		}},
		{"main store statement", func(t *testing.T, opts ...Option) target {
			db := MustOpen(t, tempPath(t, "svc.db"), opts...)
			_, err := db.c.writer.ExecContext(t.Context(), `CREATE TABLE full_test (b TEXT)`)
			require.NoError(t, err)
			return target{db.c.writer, db.Health, func(ctx context.Context) error {
				_, err := db.w.ExecContext(ctx, `INSERT INTO full_test VALUES (?)`, big)
				return translate("insert", err)
			}}
		}},
		{"activity store", func(t *testing.T, opts ...Option) target {
			db := MustOpenActivity(t, tempPath(t, "activity.db"), opts...)
			return target{db.c.writer, db.Health, func(ctx context.Context) error {
				_, err := db.AppendActivity(ctx, []store.ActivityEvent{{
					Member: "alice", Kind: "tool_action", TS: time.UnixMilli(1), Data: []byte(`{"b":"` + big + `"}`),
				}})
				return err
			}}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			log, logs := newTestLogger()
			clock := &testClock{t: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)}
			tg := tc.open(t, WithLogger(log), WithNow(clock.now), withCheckpointEvery(0))
			require.NoError(t, tg.health())

			// No page may be added: the file is as large as it may get.
			_, err := tg.writer.ExecContext(ctx, `PRAGMA max_page_count = 1`)
			require.NoError(t, err)
			for range 2 {
				err = tg.write(ctx)
				require.ErrorIs(t, err, store.ErrStorageFull)
				require.ErrorContains(t, err, "database or disk is full", "the cause stays for the log")
			}
			h := tg.health()
			require.ErrorIs(t, h, store.ErrStorageFull)
			require.ErrorContains(t, h, "writes failing since")
			require.Equal(t, 1, strings.Count(logs.String(), "store write failed"), "one error line per run of failures:\n%s", logs)

			_, err = tg.writer.ExecContext(ctx, `PRAGMA max_page_count = 1073741823`)
			require.NoError(t, err)
			require.NoError(t, tg.write(ctx))
			require.ErrorIs(t, tg.health(), store.ErrStorageFull, "one success right after failures does not clear it")
			clock.add(store.FailureHold)
			require.NoError(t, tg.write(ctx))
			require.NoError(t, tg.health(), "a write that succeeds once the failures stopped clears it")
			require.Contains(t, logs.String(), "store writes succeed again")
		})
	}
}

// TestDamageStaysReported: damage seen once is reported until restart,
// whatever succeeds after it; a full disk clears with a success; errors
// that are not about the storage change nothing.
func TestDamageStaysReported(t *testing.T) {
	log, logs := newTestLogger()
	clock := &testClock{t: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)}
	h := newHealth("/x/svc.db", newOptions([]Option{WithLogger(log), WithNow(clock.now)}))
	h.wrote(fmt.Errorf("insert: %w", store.ErrConflict))
	h.read(sqlite3.Error{Code: sqlite3.ErrFull})
	require.NoError(t, h.err(), "a conflict and a read are not storage failures of a write")

	h.read(translate("select", sqlite3.Error{Code: sqlite3.ErrCorrupt}))
	require.ErrorIs(t, h.err(), store.ErrDamaged)
	clock.add(time.Hour)
	h.wrote(nil)
	require.ErrorIs(t, h.err(), store.ErrDamaged, "damage does not heal")
	require.ErrorContains(t, h.err(), "data failing since")
	require.Contains(t, logs.String(), "svc check")

	h.checkpointed(sqlite3.Error{Code: sqlite3.ErrIoErr, SystemErrno: syscall.ENOSPC})
	require.ErrorContains(t, h.err(), "wal checkpoints failing")
	clock.add(store.FailureHold)
	h.checkpointed(nil)
	require.NotContains(t, h.err().Error(), "wal checkpoints failing")
}

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

func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
