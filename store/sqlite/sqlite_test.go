package sqlite

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"svc/store"
	"svc/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// MustOpen opens the main store at path and closes it when tb ends.
func MustOpen(tb testing.TB, path string, opts ...Option) *DB {
	tb.Helper()
	db, err := Open(context.Background(), path, opts...)
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, db.Close()) })
	return db
}

// MustOpenActivity opens the activity store at path and closes it when tb
// ends.
func MustOpenActivity(tb testing.TB, path string, opts ...Option) *ActivityDB {
	tb.Helper()
	db, err := OpenActivity(context.Background(), path, opts...)
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, db.Close()) })
	return db
}

func tempPath(tb testing.TB, name string) string {
	tb.Helper()
	return filepath.Join(tb.TempDir(), name)
}

var modes = []struct {
	name string
	path func(t *testing.T) string
}{
	{"file", func(t *testing.T) string { return tempPath(t, "svc.db") }},
	{"memory", func(*testing.T) string { return ":memory:" }},
	{"empty path", func(*testing.T) string { return "" }},
}

func TestStore(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			storetest.RunAll(t, func(t *testing.T) store.Store {
				return MustOpen(t, mode.path(t))
			})
		})
	}
}

func TestActivity(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			storetest.RunActivity(t, func(t *testing.T) store.ActivityStore {
				return MustOpenActivity(t, mode.path(t))
			})
		})
	}
}

func TestFileModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new", "nested")
	path := filepath.Join(dir, "svc.db")
	db := MustOpen(t, path)
	// A write makes SQLite create the -wal and -shm files.
	require.NoError(t, db.PutMember(t.Context(), store.Member{Name: "alice"}))

	for _, d := range []string{dir, filepath.Dir(dir)} {
		fi, err := os.Stat(d)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), d)
	}
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(f)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), f)
	}
}

func TestExistingDirectoryKeepsItsMode(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o750))
	MustOpen(t, filepath.Join(dir, "svc.db"))
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o750), fi.Mode().Perm())
}

func TestPathNeedsEscaping(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a dir?x=1#frag", "svc 100%.db")
	db := MustOpen(t, path)
	require.NoError(t, db.PutMember(t.Context(), store.Member{Name: "alice"}))
	_, err := os.Stat(path)
	require.NoError(t, err)
}

func TestRefuseNewerSchema(t *testing.T) {
	tests := []struct {
		name string
		open func(ctx context.Context, path string) (func() error, error)
	}{
		{"main", func(ctx context.Context, path string) (func() error, error) {
			db, err := Open(ctx, path)
			if err != nil {
				return nil, err
			}
			return db.Close, nil
		}},
		{"activity", func(ctx context.Context, path string) (func() error, error) {
			db, err := OpenActivity(ctx, path)
			if err != nil {
				return nil, err
			}
			return db.Close, nil
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			path := tempPath(t, "svc.db")
			closeDB, err := tc.open(ctx, path)
			require.NoError(t, err)
			require.NoError(t, closeDB())

			raw, err := sql.Open("sqlite3", path)
			require.NoError(t, err)
			_, err = raw.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (9999, 0)`)
			require.NoError(t, err)
			require.NoError(t, raw.Close())

			_, err = tc.open(ctx, path)
			require.ErrorContains(t, err, "schema version 9999 is newer")
		})
	}
}

func TestMigrationsRecorded(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_123)
	path := tempPath(t, "svc.db")
	for range 2 { // the second open applies nothing
		db, err := Open(t.Context(), path, WithNow(func() time.Time { return now }))
		require.NoError(t, err)
		require.NoError(t, db.Close())
	}
	db := MustOpen(t, path)
	rows, err := db.c.reader.QueryContext(t.Context(), `SELECT version, applied_at FROM schema_migrations ORDER BY version`)
	require.NoError(t, err)
	defer rows.Close()
	var got [][2]int64
	for rows.Next() {
		var v, at int64
		require.NoError(t, rows.Scan(&v, &at))
		got = append(got, [2]int64{v, at})
	}
	require.NoError(t, rows.Err())
	migs, err := loadMigrations(subFS(mainMigrations))
	require.NoError(t, err)
	var want [][2]int64
	for _, m := range migs {
		want = append(want, [2]int64{int64(m.version), now.UnixMilli()})
	}
	require.GreaterOrEqual(t, len(want), 4, "0001 to 0004 at least")
	require.Equal(t, want, got, "each migration once, at the first open")
}

func TestSurvivesReopen(t *testing.T) {
	ctx := t.Context()
	path := tempPath(t, "svc.db")
	db, err := Open(ctx, path)
	require.NoError(t, err)
	require.NoError(t, db.PutMember(ctx, store.Member{Name: "alice", Role: &store.Role{Title: "t"}}))
	tok := store.Token{ID: "t1", Member: "alice", Hash: store.TokenHash{1}, CreatedAt: time.UnixMilli(1234)}
	require.NoError(t, db.CreateToken(ctx, tok))
	require.NoError(t, db.Close())
	require.NoError(t, db.Close(), "close is idempotent")

	db = MustOpen(t, path)
	m, err := db.GetMember(ctx, "alice")
	require.NoError(t, err)
	require.Equal(t, &store.Role{Title: "t"}, m.Role)
	got, err := db.GetTokenByHash(ctx, tok.Hash)
	require.NoError(t, err)
	require.Equal(t, "t1", got.ID)
	require.Equal(t, int64(1234), got.CreatedAt.UnixMilli())

	apath := tempPath(t, "activity.db")
	adb, err := OpenActivity(ctx, apath)
	require.NoError(t, err)
	ev, err := adb.AppendActivity(ctx, []store.ActivityEvent{{Member: "alice", Kind: "k", TS: time.UnixMilli(5)}})
	require.NoError(t, err)
	require.NoError(t, adb.Close())

	adb = MustOpenActivity(t, apath)
	list, err := adb.ListActivity(ctx, store.ActivityFilter{Member: "alice"})
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, ev[0].ID, list[0].ID)
}

// pragmas reads the settings that matter from one connection of db.
func pragmas(t *testing.T, db *sql.DB) map[string]string {
	t.Helper()
	conn, err := db.Conn(t.Context())
	require.NoError(t, err)
	defer conn.Close()
	out := map[string]string{}
	for _, name := range []string{"journal_mode", "foreign_keys", "busy_timeout", "synchronous", "query_only", "wal_autocheckpoint"} {
		var v string
		require.NoError(t, conn.QueryRowContext(t.Context(), "PRAGMA "+name).Scan(&v), name)
		out[name] = v
	}
	return out
}

func TestPragmas(t *testing.T) {
	path := tempPath(t, "svc.db")
	db := MustOpen(t, path)
	adb := MustOpenActivity(t, tempPath(t, "activity.db"))
	mem := MustOpen(t, ":memory:")

	file := map[string]string{
		"journal_mode": "wal",
		"foreign_keys": "1",
		"busy_timeout": strconv.Itoa(busyTimeoutMS),
		"synchronous":  "2", // FULL
	}
	// The writer never checkpoints inside a commit (checkpoint.go); the
	// readers write nothing, so theirs never runs.
	reader := map[string]string{"query_only": "1", "wal_autocheckpoint": "1000"}
	writer := map[string]string{"query_only": "0", "wal_autocheckpoint": "0"}
	for k, v := range file {
		reader[k], writer[k] = v, v
	}
	tests := []struct {
		name string
		db   *sql.DB
		want map[string]string
	}{
		{"main writer", db.c.writer, writer},
		{"main reader", db.c.reader, reader},
		{"activity writer", adb.c.writer, writer},
		{"activity reader", adb.c.reader, reader},
		{"memory", mem.c.writer, map[string]string{
			"journal_mode":       "memory",
			"foreign_keys":       "1",
			"busy_timeout":       strconv.Itoa(busyTimeoutMS),
			"synchronous":        "1", // the driver's NORMAL; nothing reaches a disk
			"query_only":         "0",
			"wal_autocheckpoint": "1000",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, pragmas(t, tc.db))
		})
	}

	t.Run("every reader connection", func(t *testing.T) {
		ctx := t.Context()
		conns := make([]*sql.Conn, 0, readerConns)
		for range readerConns {
			c, err := db.c.reader.Conn(ctx)
			require.NoError(t, err)
			conns = append(conns, c)
		}
		for _, c := range conns {
			var fk, sync int
			require.NoError(t, c.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk))
			require.NoError(t, c.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync))
			require.Equal(t, 1, fk)
			require.Equal(t, 2, sync)
			require.NoError(t, c.Close())
		}
	})

	t.Run("reader refuses writes", func(t *testing.T) {
		_, err := db.c.reader.ExecContext(t.Context(), `DELETE FROM members`)
		require.ErrorContains(t, err, "readonly")
	})
}

func TestPragmaCheckFailsConnection(t *testing.T) {
	// WAL is impossible for an in-memory database, so the check must reject
	// the connection rather than let it run in another journal mode.
	db := newDB(":memory:", []pragma{{"journal_mode", "wal"}})
	defer db.Close()
	err := db.PingContext(t.Context())
	require.ErrorContains(t, err, `pragma journal_mode is "memory", want "wal"`)
}

func TestClockFillsZeroTimes(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000).UTC()
	db := MustOpen(t, ":memory:", WithNow(func() time.Time { return now }))
	adb := MustOpenActivity(t, ":memory:", WithNow(func() time.Time { return now }))
	ctx := t.Context()

	require.NoError(t, db.PutMember(ctx, store.Member{Name: "alice"}))
	m, err := db.GetMember(ctx, "alice")
	require.NoError(t, err)
	require.Equal(t, now, m.CreatedAt)
	require.Equal(t, now, m.UpdatedAt)

	require.NoError(t, db.CreateToken(ctx, store.Token{ID: "t1", Member: "alice", Hash: store.TokenHash{1}}))
	require.NoError(t, db.TouchToken(ctx, "t1", time.Time{}))
	tok, err := db.RevokeToken(ctx, "alice", "t1", time.Time{})
	require.NoError(t, err)
	require.Equal(t, now, tok.CreatedAt)
	require.Equal(t, now, tok.LastUsedAt)
	require.Equal(t, now, tok.RevokedAt)
	require.True(t, tok.ExpiresAt.IsZero())

	require.NoError(t, db.CreateSession(ctx, store.Session{ID: "s1", Hash: store.SessionHash{1}, Member: "alice"}))
	s, err := db.GetSession(ctx, store.SessionHash{1})
	require.NoError(t, err)
	require.Equal(t, now, s.CreatedAt)
	require.Equal(t, now, s.LastSeenAt)
	require.True(t, s.ExpiresAt.IsZero(), "no expiry")
	n, err := db.DeleteExpiredSessions(ctx, now.Add(time.Hour))
	require.NoError(t, err)
	require.Zero(t, n, "a session without expiry never expires")

	ev, err := adb.AppendActivity(ctx, []store.ActivityEvent{{Member: "alice", Kind: "k"}})
	require.NoError(t, err)
	require.Equal(t, now, ev[0].TS)
	require.JSONEq(t, `{}`, string(ev[0].Data))
}

func TestMemberTimes(t *testing.T) {
	clock := time.UnixMilli(1_000).UTC()
	db := MustOpen(t, ":memory:", WithNow(func() time.Time { return clock }))
	ctx := t.Context()
	get := func() store.Member {
		m, err := db.GetMember(ctx, "alice")
		require.NoError(t, err)
		return m
	}

	require.NoError(t, db.PutMember(ctx, store.Member{Name: "alice", Instructions: "v1"}))
	clock = clock.Add(time.Second)
	require.NoError(t, db.ReplaceMembers(ctx, []store.Member{{Name: "alice", Instructions: "v1"}}))
	m := get()
	require.Equal(t, int64(1_000), m.CreatedAt.UnixMilli())
	require.Equal(t, int64(1_000), m.UpdatedAt.UnixMilli(), "unchanged content keeps UpdatedAt")

	clock = clock.Add(time.Second)
	require.NoError(t, db.PutMember(ctx, store.Member{Name: "alice", Instructions: "v2"}))
	m = get()
	require.Equal(t, int64(1_000), m.CreatedAt.UnixMilli(), "an update keeps CreatedAt")
	require.Equal(t, int64(3_000), m.UpdatedAt.UnixMilli())
}

func TestTouchUnknownToken(t *testing.T) {
	db := MustOpen(t, ":memory:")
	require.ErrorIs(t, db.TouchToken(t.Context(), "nope", time.Now()), store.ErrNotFound)
}

func TestDuplicateSession(t *testing.T) {
	db := MustOpen(t, ":memory:")
	ctx := t.Context()
	require.NoError(t, db.PutMember(ctx, store.Member{Name: "alice"}))
	s := store.Session{ID: "s7", Hash: store.SessionHash{7}, Member: "alice", ExpiresAt: time.Now().Add(time.Hour)}
	require.NoError(t, db.CreateSession(ctx, s))
	require.ErrorIs(t, db.CreateSession(ctx, s), store.ErrConflict)
}

func TestTranslate(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"no rows", sql.ErrNoRows, store.ErrNotFound},
		{"unique", sqliteErr(t, `INSERT INTO u VALUES (1, 1), (2, 1)`), store.ErrConflict},
		{"primary key", sqliteErr(t, `INSERT INTO u VALUES (1, 1), (1, 2)`), store.ErrConflict},
		{"foreign key", sqliteErr(t, `INSERT INTO c VALUES (42)`), store.ErrPrecondition},
		{"context", context.Canceled, context.Canceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := translate("op", tc.err)
			require.ErrorIs(t, got, tc.want)
			require.ErrorContains(t, got, "op: ")
		})
	}
	require.NoError(t, translate("op", nil))
}

// sqliteErr returns the driver error stmt raises on a small schema.
func sqliteErr(t *testing.T, stmt string) error {
	t.Helper()
	db := MustOpen(t, ":memory:")
	_, err := db.c.writer.ExecContext(t.Context(), `
CREATE TABLE u (id INTEGER PRIMARY KEY, v INTEGER UNIQUE);
CREATE TABLE c (u INTEGER REFERENCES u (id));`)
	require.NoError(t, err)
	_, err = db.c.writer.ExecContext(t.Context(), stmt)
	require.Error(t, err)
	return err
}

func TestConcurrentReadsAndWrites(t *testing.T) {
	db := MustOpen(t, tempPath(t, "svc.db"))
	ctx := t.Context()
	require.NoError(t, db.PutMember(ctx, store.Member{Name: "alice"}))
	const workers, each = 4, 20
	errs := make(chan error, workers*2)
	for w := range workers {
		go func() {
			for i := range each {
				id := strconv.Itoa(w*each + i)
				if err := db.CreateToken(ctx, store.Token{ID: id, Member: "alice", Hash: store.TokenHash{byte(w), byte(i)}}); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
		go func() {
			for range each {
				if _, err := db.ListTokens(ctx, "alice"); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range workers * 2 {
		require.NoError(t, <-errs)
	}
	toks, err := db.ListTokens(ctx, "alice")
	require.NoError(t, err)
	require.Len(t, toks, workers*each)
}

// TestObjectiveEventsAppendOnly: the store has no method that edits the
// audit log, so this checks that the database itself refuses an UPDATE,
// through the store's own writer connection, inside a transaction or not.
func TestObjectiveEventsAppendOnly(t *testing.T) {
	ctx := t.Context()
	db := MustOpen(t, tempPath(t, "svc.db"))
	o := store.Objective{
		ID: "o1", Title: "t", Outcome: "o", Status: store.StatusActive,
		Assignee: "alice", Originator: "alice", CreatedAt: time.UnixMilli(1), UpdatedAt: time.UnixMilli(1),
	}
	require.NoError(t, db.CreateObjective(ctx, o))
	require.NoError(t, db.CreateObjective(ctx, store.Objective{
		ID: "o2", Title: "t", Outcome: "o", Status: store.StatusActive,
		Assignee: "bob", Originator: "bob", CreatedAt: time.UnixMilli(1), UpdatedAt: time.UnixMilli(1),
	}))
	want, err := db.AppendObjectiveEvents(ctx, []store.ObjectiveEvent{
		{ObjectiveID: "o1", Kind: "assigned", Actor: "alice", CreatedAt: time.UnixMilli(2), Payload: []byte(`{"a":1}`)},
		{ObjectiveID: "o1", Kind: "note", Actor: "bob", CreatedAt: time.UnixMilli(3)},
	})
	require.NoError(t, err)

	tests := []struct {
		name string
		stmt string
	}{
		{"kind", `UPDATE objective_events SET kind = 'forged'`},
		{"actor of one row", `UPDATE objective_events SET actor = 'mallory' WHERE id = 1`},
		{"payload", `UPDATE objective_events SET payload = NULL WHERE payload IS NOT NULL`},
		{"objective", `UPDATE objective_events SET objective_id = 'o2'`},
		{"id", `UPDATE objective_events SET id = id + 100`},
		{"delete one", `DELETE FROM objective_events WHERE id = 1`},
		{"delete all", `DELETE FROM objective_events`},
		{"upsert", `INSERT INTO objective_events (id, objective_id, kind, actor, created_at) VALUES (1, 'o1', 'k', 'a', 0)
ON CONFLICT (id) DO UPDATE SET kind = 'forged'`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := db.c.writer.ExecContext(t.Context(), tc.stmt)
			require.ErrorContains(t, err, "objective events are append-only")

			err = db.c.withTx(t.Context(), func(tx *sql.Tx) error {
				_, err := tx.ExecContext(t.Context(), tc.stmt)
				return err
			})
			require.ErrorContains(t, err, "objective events are append-only")

			got, err := db.ListObjectiveEvents(t.Context(), "o1")
			require.NoError(t, err)
			require.Equal(t, want, got)
		})
	}
}
