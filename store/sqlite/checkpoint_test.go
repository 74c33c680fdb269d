package sqlite

import (
	"log/slog"
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

	ck, err := startCheckpointer(t.Context(), newDB(fileDSN(path, nil), nil), time.Hour, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(func() { _ = ck.stop() })
	did, err := ck.pass(t.Context())
	require.NoError(t, err)
	require.True(t, did, "something was committed since the last pass")
	require.Greater(t, fileSize(t, path), before+1500*4096, "the checkpointer copied the WAL")
	did, err = ck.pass(t.Context())
	require.NoError(t, err)
	require.False(t, did, "nothing new: no checkpoint, no fsync")

	// The WAL starts over instead of growing: more commits reuse it.
	wal := fileSize(t, path+"-wal")
	fillWAL(t, db, 500)
	require.LessOrEqual(t, fileSize(t, path+"-wal"), wal, "the WAL was reused from the top")
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
