package sqlite

import (
	"database/sql"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fileSize is the size of the file at path.
func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi.Size()
}

// fillWAL commits n rows of 4 KiB, each its own transaction, through the
// writer.
func fillWAL(t *testing.T, db *DB, n int) {
	t.Helper()
	ctx := t.Context()
	_, err := db.c.writer.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS ckpt_test (b BLOB)`)
	require.NoError(t, err)
	blob := []byte(strings.Repeat("x", 4096))
	for range n {
		_, err := db.c.writer.ExecContext(ctx, `INSERT INTO ckpt_test (b) VALUES (?)`, blob)
		require.NoError(t, err)
	}
}

// TestCommitsNeverCheckpoint: past SQLite's automatic threshold (1000
// pages) a commit still only appends to the WAL; the database file grows
// when the checkpointer copies it, not before.
func TestCommitsNeverCheckpoint(t *testing.T) {
	path := tempPath(t, "svc.db")
	db, err := Open(t.Context(), path, withCheckpointEvery(0))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	before := fileSize(t, path)

	fillWAL(t, db, 1500) // ~3000 pages: an automatic checkpoint would have run
	require.Equal(t, before, fileSize(t, path), "no commit copied the WAL into the database file")
	require.Greater(t, fileSize(t, path+"-wal"), int64(1500*4096), "the commits are in the WAL")

	ck := mustCheckpointer(t, path)
	did, err := ck.pass(t.Context())
	require.NoError(t, err)
	require.Equal(t, passCopied, did, "something was committed since the last pass")
	require.Greater(t, fileSize(t, path), before+1500*4096, "the checkpointer copied the WAL")

	// The WAL starts over instead of growing: more commits reuse it.
	wal := fileSize(t, path+"-wal")
	fillWAL(t, db, 500)
	require.LessOrEqual(t, fileSize(t, path+"-wal"), wal, "the WAL was reused from the top")
}

// mustCheckpointer starts a checkpointer on the file at path that only
// runs when the test calls pass.
func mustCheckpointer(t *testing.T, path string) *checkpointer {
	t.Helper()
	ck, err := startCheckpointer(t.Context(), newCheckpointDB(path, nil, nil), time.Hour, newHealth(path, newOptions(nil)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = ck.stop() })
	return ck
}

// TestIdleCheckpointTruncatesWAL: after a burst, the first pass that
// finds nothing new empties the WAL file, once; an idle broker then does
// nothing. Before, the WAL kept its burst size for good.
func TestIdleCheckpointTruncatesWAL(t *testing.T) {
	path := tempPath(t, "svc.db")
	db, err := Open(t.Context(), path, withCheckpointEvery(0))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	ck := mustCheckpointer(t, path)

	fillWAL(t, db, 1000)
	require.Greater(t, fileSize(t, path+"-wal"), int64(1000*4096))
	steps := []struct {
		want    string
		walZero bool
	}{
		{passCopied, false},   // the burst is copied; the WAL file keeps its size
		{passTruncated, true}, // idle: emptied
		{passIdle, true},      // still idle: no checkpoint, no fsync
	}
	for i, s := range steps {
		did, err := ck.pass(t.Context())
		require.NoError(t, err)
		require.Equal(t, s.want, did, "pass %d", i+1)
		require.Equal(t, s.walZero, fileSize(t, path+"-wal") == 0, "pass %d: WAL is %d bytes", i+1, fileSize(t, path+"-wal"))
	}

	// The next commit starts a new run: copy, then truncate again.
	fillWAL(t, db, 10)
	for _, want := range []string{passCopied, passTruncated} {
		did, err := ck.pass(t.Context())
		require.NoError(t, err)
		require.Equal(t, want, did)
	}
	require.Zero(t, fileSize(t, path+"-wal"))
	var n int
	require.NoError(t, db.c.reader.QueryRowContext(t.Context(), `SELECT count(*) FROM ckpt_test`).Scan(&n))
	require.Equal(t, 1010, n, "every commit is in the database file")
}

// TestIdleTruncateYieldsToReaders: a TRUNCATE that meets an open read
// transaction gives up at once (it never holds the write lock while it
// waits) and succeeds on a later idle pass.
func TestIdleTruncateYieldsToReaders(t *testing.T) {
	path := tempPath(t, "svc.db")
	db, err := Open(t.Context(), path, withCheckpointEvery(0))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	ck := mustCheckpointer(t, path)
	fillWAL(t, db, 100)
	// A read transaction whose snapshot ends in the WAL.
	tx, err := db.c.reader.BeginTx(t.Context(), &sql.TxOptions{ReadOnly: true})
	require.NoError(t, err)
	var n int
	require.NoError(t, tx.QueryRowContext(t.Context(), `SELECT count(*) FROM ckpt_test`).Scan(&n))
	did, err := ck.pass(t.Context())
	require.NoError(t, err)
	require.Equal(t, passCopied, did)

	// The writer must not wait on the checkpointer meanwhile.
	start := time.Now()
	did, err = ck.pass(t.Context())
	require.NoError(t, err)
	require.Equal(t, passBusy, did)
	fillWAL(t, db, 1)
	require.NoError(t, tx.Rollback())
	require.Less(t, time.Since(start), busyTimeoutMS*time.Millisecond, "neither waited for a lock")

	for _, want := range []string{passCopied, passTruncated} {
		did, err := ck.pass(t.Context())
		require.NoError(t, err)
		require.Equal(t, want, did)
	}
	require.Zero(t, fileSize(t, path+"-wal"))
}

// TestJournalSizeLimitBoundsTheWAL: a WAL a burst grew past
// journalSizeLimit is cut back to it when the writer starts it over, idle
// or not.
func TestJournalSizeLimitBoundsTheWAL(t *testing.T) {
	path := tempPath(t, "svc.db")
	db, err := Open(t.Context(), path, withCheckpointEvery(0))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	var limit int64
	require.NoError(t, db.c.writer.QueryRowContext(t.Context(), `PRAGMA journal_size_limit`).Scan(&limit))
	require.Equal(t, int64(journalSizeLimit), limit)

	fillWAL(t, db, 2*journalSizeLimit/4096)
	require.Greater(t, fileSize(t, path+"-wal"), int64(2*journalSizeLimit))
	ck := mustCheckpointer(t, path)
	did, err := ck.checkpoint(t.Context(), "PASSIVE")
	require.NoError(t, err)
	require.False(t, did, "copied in full")
	fillWAL(t, db, 1) // starts the WAL over
	require.LessOrEqual(t, fileSize(t, path+"-wal"), int64(journalSizeLimit))
}

// TestCheckpointerRuns: the broker's own checkpointer copies the WAL on
// its tick and stops with the database.
func TestCheckpointerRuns(t *testing.T) {
	path := tempPath(t, "svc.db")
	db, err := Open(t.Context(), path, withCheckpointEvery(10*time.Millisecond))
	require.NoError(t, err)
	before := fileSize(t, path)
	fillWAL(t, db, 300)
	require.Eventually(t, func() bool { return fileSize(t, path) > before+300*4096 }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, db.Close())
	require.NoError(t, db.Close(), "closing again is harmless")
}
