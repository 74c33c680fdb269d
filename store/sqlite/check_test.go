package sqlite

import (
	"crypto/rand"
	"crypto/sha256"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/store"
)

// pageSize is SQLite's default page size, which the stores keep.
const pageSize = 4096

// prepareDamaged writes a database at path with a table of a few hundred
// rows, closes it (its WAL copied into the file), then lets damage change
// the file's bytes.
func prepareDamaged(t *testing.T, path string, activity bool, damage func(t *testing.T, path string, rootPage int64)) {
	t.Helper()
	var (
		c     *conns
		close func() error
	)
	if activity {
		db, err := OpenActivity(t.Context(), path, withCheckpointEvery(0))
		require.NoError(t, err)
		c, close = db.c, db.Close
	} else {
		db, err := Open(t.Context(), path, withCheckpointEvery(0))
		require.NoError(t, err)
		c, close = db.c, db.Close
	}
	_, err := c.writer.ExecContext(t.Context(), `CREATE TABLE damage_test (id INTEGER PRIMARY KEY, b BLOB);
CREATE INDEX damage_test_b ON damage_test (b);
WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 300)
INSERT INTO damage_test SELECT x, randomblob(500) FROM n;`)
	require.NoError(t, err)
	var root int64
	require.NoError(t, c.writer.QueryRowContext(t.Context(), `SELECT rootpage FROM sqlite_master WHERE name = 'damage_test'`).Scan(&root))
	require.NoError(t, close())
	_, err = os.Stat(path + "-wal")
	require.ErrorIs(t, err, os.ErrNotExist, "the last close copied the WAL into the file")
	damage(t, path, root)
}

// overwrite writes b at off in the file at path.
func overwrite(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return sha256.Sum256(b)
}

// TestOpenRefusesDamagedDatabase: a damaged file, or one that is not a
// database, is refused at open with DamagedError naming what the check
// found, and is left as it was: no migration, no write lands in it.
// Before, it opened and the broker served (reads 500, writes into the
// malformed file).
func TestOpenRefusesDamagedDatabase(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, path string, rootPage int64)
		notDB  bool
		want   string
	}{
		{"a table's page overwritten", func(t *testing.T, path string, root int64) {
			overwrite(t, path, (root-1)*pageSize, []byte(strings.Repeat("\x00\x11\x22\x33", 16)))
		}, false, "Page"},
		{"the header overwritten", func(t *testing.T, path string, _ int64) {
			overwrite(t, path, 0, []byte("this is not the header of an SQLite database"))
		}, true, "not a database"},
		{"another file entirely", func(t *testing.T, path string, _ int64) {
			b := make([]byte, 8*pageSize)
			_, _ = rand.Read(b)
			require.NoError(t, os.WriteFile(path, b, 0o600))
		}, true, "not a database"},
	}
	for _, tc := range tests {
		for _, activity := range []bool{false, true} {
			name := tc.name + "/main"
			if activity {
				name = tc.name + "/activity"
			}
			t.Run(name, func(t *testing.T) {
				path := tempPath(t, "svc.db")
				prepareDamaged(t, path, activity, tc.damage)
				before := fileSum(t, path)

				var err error
				if activity {
					var db *ActivityDB
					db, err = OpenActivity(t.Context(), path)
					if err == nil {
						_ = db.Close()
					}
				} else {
					var db *DB
					db, err = Open(t.Context(), path)
					if err == nil {
						_ = db.Close()
					}
				}
				require.ErrorIs(t, err, store.ErrDamaged)
				var de *DamagedError
				require.ErrorAs(t, err, &de)
				require.Equal(t, path, de.Path)
				require.Equal(t, tc.notDB, de.NotADatabase)
				require.NotEmpty(t, de.Findings)
				require.LessOrEqual(t, len(de.Findings), maxFindings)
				require.ErrorContains(t, err, tc.want)
				require.Equal(t, before, fileSum(t, path), "the refused file is left as it was")
			})
		}
	}
}

// TestStartupCheckIsBounded: a check that runs out of its budget opens
// the file anyway, with a warning naming svc check. A sound file passes
// within the budget silently.
func TestStartupCheckIsBounded(t *testing.T) {
	path := tempPath(t, "svc.db")
	db, err := Open(t.Context(), path, withCheckpointEvery(0))
	require.NoError(t, err)
	// About 30 MB: far more than any disk checks in a millisecond.
	_, err = db.c.writer.ExecContext(t.Context(), `CREATE TABLE bulk (b BLOB);
WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 7500)
INSERT INTO bulk SELECT randomblob(4000) FROM n;`)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	log, logs := newTestLogger()
	db, err = Open(t.Context(), path, WithLogger(log), WithStartupCheck(time.Millisecond), withCheckpointEvery(0))
	require.NoError(t, err)
	require.NoError(t, db.Close())
	require.Contains(t, logs.String(), "startup integrity check did not finish in time")
	require.Contains(t, logs.String(), "svc check")

	log, logs = newTestLogger()
	db, err = Open(t.Context(), path, WithLogger(log), withCheckpointEvery(0))
	require.NoError(t, err)
	require.NoError(t, db.Close())
	require.Contains(t, logs.String(), "startup integrity check passed")
	require.NotContains(t, logs.String(), "level=WARN")
}

// TestInspector: svc check's full integrity_check finds what quick_check
// finds and reads a file a broker holds open (read-only, no lock); the
// blobs of file entries are listed with an entry each.
func TestInspector(t *testing.T) {
	ctx := t.Context()
	path := tempPath(t, "svc.db")
	db := MustOpen(t, path)
	sha := strings.Repeat("ab", 32)
	require.NoError(t, db.ReplaceMembers(ctx, []store.Member{{Name: "alice"}}))
	err := db.WithTx(ctx, func(tx store.Tx) error {
		_, err := tx.CreateEntry(ctx, store.FsEntry{Path: "/alice/a.txt", Owner: "alice", Kind: store.FsFile, Size: 5, MimeType: "text/plain", Blob: sha})
		return err
	})
	require.NoError(t, err)

	in, err := Inspect(ctx, path) // beside the open store, which holds the lock
	require.NoError(t, err)
	findings, err := in.IntegrityCheck(ctx)
	require.NoError(t, err)
	require.Empty(t, findings)
	blobs, err := in.FileBlobs(ctx)
	require.NoError(t, err)
	require.Equal(t, []FileBlob{{SHA: sha, Size: 5, Path: "/alice/a.txt"}}, blobs)
	ref, err := in.BlobReferenced(ctx, sha)
	require.NoError(t, err)
	require.True(t, ref)
	require.NoError(t, in.Close())

	_, err = Inspect(ctx, tempPath(t, "missing.db"))
	require.ErrorIs(t, err, os.ErrNotExist)

	t.Run("damaged page", func(t *testing.T) {
		bad := tempPath(t, "bad.db")
		prepareDamaged(t, bad, false, func(t *testing.T, path string, root int64) {
			overwrite(t, path, (root-1)*pageSize, []byte(strings.Repeat("\x00\x11\x22\x33", 16)))
		})
		in, err := Inspect(ctx, bad)
		require.NoError(t, err)
		defer in.Close()
		findings, err := in.IntegrityCheck(ctx)
		require.NoError(t, err)
		require.NotEmpty(t, findings)
	})
	t.Run("not a database", func(t *testing.T) {
		bad := tempPath(t, "bad.db")
		prepareDamaged(t, bad, false, func(t *testing.T, path string, _ int64) {
			overwrite(t, path, 0, []byte("this is not the header of an SQLite database"))
		})
		_, err := Inspect(ctx, bad)
		var de *DamagedError
		require.ErrorAs(t, err, &de)
		require.True(t, de.NotADatabase)
	})
}
