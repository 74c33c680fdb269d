package sqlite

import (
	"context"
	"database/sql"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"

	"svc/store"
)

// upTo is the main migrations up to and including version, as an older
// build would have applied them.
func upTo(t *testing.T, version string) fs.FS { return upToIn(t, mainMigrations, version) }

// oldDB creates a database migrated to version of dir's migrations, runs
// stmts on it, and returns its path.
func oldDB(t *testing.T, dir, version string, stmts ...string) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	raw, err := sql.Open("sqlite3", "file:"+path)
	require.NoError(t, err)
	defer raw.Close()
	require.NoError(t, migrate(ctx, raw, upToIn(t, dir, version), newOptions(nil)))
	for _, q := range stmts {
		_, err := raw.ExecContext(ctx, q)
		require.NoError(t, err, q)
	}
	return path
}

// upToIn is upTo for the migrations of dir.
func upToIn(t *testing.T, dir, version string) fs.FS {
	t.Helper()
	out := fstest.MapFS{}
	all := subFS(dir)
	names, err := fs.Glob(all, "*.sql")
	require.NoError(t, err)
	for _, n := range names {
		if n <= version+"_~" {
			b, err := fs.ReadFile(all, n)
			require.NoError(t, err)
			out[n] = &fstest.MapFile{Data: b}
		}
	}
	return out
}

// Data written by an older schema comes through the later migrations:
// sessions get ids, members get the message id they start after, homes
// get their usage.
func TestMigrationsKeepOlderData(t *testing.T) {
	ctx := context.Background()
	path := oldDB(t, mainMigrations, "0004",
		`INSERT INTO members (name, created_at, updated_at) VALUES ('early', 1000, 1000)`,
		`INSERT INTO messages (sender, thread, body, level, created_at, all_members) VALUES ('early', 'chan:general', 'one', 'info', 2000, 1)`,
		`INSERT INTO messages (sender, thread, body, level, created_at, all_members) VALUES ('early', 'chan:general', 'two', 'info', 3000, 1)`,
		`INSERT INTO members (name, created_at, updated_at) VALUES ('late', 2500, 2500)`,
		`INSERT INTO sessions (hash, member, created_at, last_seen_at, expires_at) VALUES (randomblob(32), 'early', 1, 1, NULL)`,
		`INSERT INTO sessions (hash, member, created_at, last_seen_at, expires_at) VALUES (randomblob(32), 'late', 1, 1, NULL)`,
		`INSERT INTO fs_entries (path, parent, owner, kind, size, mime_type, blob, created_at, updated_at)
			VALUES ('/early/a', '/early', 'early', 'file', 5, 'text/plain', '`+strings.Repeat("a", 64)+`', 1, 1)`,
		`INSERT INTO fs_entries (path, parent, owner, kind, created_at, updated_at) VALUES ('/early/d', '/early', 'early', 'dir', 1, 1)`,
		`INSERT INTO fs_entries (path, parent, owner, kind, size, mime_type, blob, created_at, updated_at)
			VALUES ('/early/d/b', '/early/d', 'early', 'file', 7, 'text/plain', '`+strings.Repeat("b", 64)+`', 1, 1)`,
	)

	db, err := Open(ctx, path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	for name, want := range map[string]int64{"early": 0, "late": 1} {
		m, err := db.GetMember(ctx, name)
		require.NoError(t, err)
		require.Equal(t, want, m.SinceSeq, "%s starts after the messages created before it", name)
	}
	used, err := db.Usage(ctx, "early")
	require.NoError(t, err)
	require.Equal(t, int64(12), used, "the usage of files written before migration 0007")
	for _, member := range []string{"early", "late"} {
		ss, err := db.ListSessions(ctx, member)
		require.NoError(t, err)
		require.Len(t, ss, 1)
		require.Len(t, ss[0].ID, 32)
		require.Empty(t, strings.Trim(ss[0].ID, "0123456789abcdef"))
	}
}

// Exchanges stored before migration 0004 get their response id column, so
// usage still counts their inference records once.
func TestActivityMigrationsKeepOlderData(t *testing.T) {
	ctx := context.Background()
	path := oldDB(t, activityMigrations, "0003",
		`INSERT INTO activity (member, kind, ts, data) VALUES ('ann', 'llm_exchange', 1000, '{"responseId":"resp_1","usage":{"inputTokens":10}}')`,
		`INSERT INTO activity (member, kind, ts, data) VALUES ('ann', 'llm_exchange', 1000, '{"responseId":7,"usage":{"inputTokens":20}}')`,
		`INSERT INTO activity (member, kind, ts, data) VALUES ('ann', 'tool_action', 1000, '{"responseId":"resp_2"}')`,
		`INSERT INTO genai_raw (sha, bytes) VALUES ('s', x'00')`,
		`INSERT INTO genai (id, member, ts, provider, api, model, response_id, input_tokens, raw_sha) VALUES ('g1', 'ann', 900000, 'anthropic', 'messages', 'm', 'resp_1', 100, 's')`,
		`INSERT INTO genai (id, member, ts, provider, api, model, response_id, input_tokens, raw_sha) VALUES ('g2', 'ann', 900000, 'anthropic', 'messages', 'm', 'resp_2', 1000, 's')`,
	)

	db, err := OpenActivity(ctx, path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	inputTokens := func() int64 {
		gs, err := db.ActivityUsage(ctx, store.UsageFilter{Member: "ann"})
		require.NoError(t, err)
		var n int64
		for _, g := range gs {
			n += g.InputTokens
		}
		return n
	}
	require.Equal(t, int64(10+20+1000), inputTokens(), "g1 is carried by its exchange; g2's id is only on a tool_action")
	// Rows from before member ids (0005) have none until a start adopts
	// them; then they are the member's, and count the same.
	rows, err := db.ListActivity(ctx, store.ActivityFilter{Member: "ann"})
	require.NoError(t, err)
	require.Empty(t, rows[0].MemberUID)
	n, err := db.AdoptMemberRows(ctx, map[string]string{"ann": "ann-1"}, "former")
	require.NoError(t, err)
	require.Equal(t, int64(5), n)
	rows, err = db.ListActivity(ctx, store.ActivityFilter{Member: "ann", MemberUID: "ann-1"})
	require.NoError(t, err)
	require.Len(t, rows, 3)
	require.Equal(t, int64(10+20+1000), inputTokens())
}

// A database that a build without 0017 migrated past it (main had 0018
// first) still gets 0017 at the next open: a migration is applied when its
// own version is not recorded, not when it is above the newest one, so a
// number filling a gap is never skipped.
func TestGapFilledMigrationApplied(t *testing.T) {
	ctx := context.Background()
	without := fstest.MapFS{}
	all := subFS(mainMigrations)
	names, err := fs.Glob(all, "*.sql")
	require.NoError(t, err)
	for _, n := range names {
		if !strings.HasPrefix(n, "0017_") {
			b, err := fs.ReadFile(all, n)
			require.NoError(t, err)
			without[n] = &fstest.MapFile{Data: b}
		}
	}
	require.Len(t, without, len(names)-1, "0017 is a migration of this build")
	path := filepath.Join(t.TempDir(), "gap.db")
	raw, err := sql.Open("sqlite3", "file:"+path)
	require.NoError(t, err)
	require.NoError(t, migrate(ctx, raw, without, newOptions(nil)))
	_, err = raw.ExecContext(ctx, `INSERT INTO objectives (id, title, outcome, status, assignee, originator, created_at, updated_at)
		VALUES ('o1', 't', 'o', 'active', 'bob', 'ann', 1, 1)`)
	require.NoError(t, err)
	require.NoError(t, raw.Close())

	db, err := Open(ctx, path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	var applied bool
	require.NoError(t, db.c.reader.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = 17)`).Scan(&applied))
	require.True(t, applied)
	o, err := db.GetObjective(ctx, "o1")
	require.NoError(t, err)
	require.Equal(t, "bob", o.Assignee)
	require.Empty(t, o.AssigneeID, "from before ids, until a start adopts it")
	require.NoError(t, db.PutFormerMember(ctx, store.FormerMember{ID: "b1", Name: "bob", DeletedAt: time.UnixMilli(5), DeletedBy: "ann"}))
	fs, err := db.ListFormerMembers(ctx)
	require.NoError(t, err)
	require.Len(t, fs, 1)
}

// Records stored before GenAI parts (migration 0006) read back from their
// columns, beside records stored by parts, with the same raw upload
// shared; a column another migration added to genai stays.
func TestActivityMigrationsKeepGenAIRecords(t *testing.T) {
	ctx := context.Background()
	const legacyRaw = `{"request":{"model":"m"},"response":{"type":"message"}}`
	path := oldDB(t, activityMigrations, "0004",
		`ALTER TABLE genai ADD COLUMN other TEXT`,
		`INSERT INTO genai_raw (sha, bytes) VALUES ('s1', CAST('`+legacyRaw+`' AS BLOB))`,
		`INSERT INTO genai (id, member, ts, provider, api, model, response_id, raw_sha, system_instructions, input_messages, output_messages, other)
			VALUES ('old', 'ann', 1000, 'anthropic', 'messages', 'm', 'resp_old', 's1',
			'[{"type":"text","content":"be brief"}]', '[{"role":"user","parts":[]}]', '[]', 'kept')`,
	)
	db, err := OpenActivity(ctx, path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	var other string
	require.NoError(t, db.c.reader.QueryRowContext(ctx, `SELECT other FROM genai WHERE id = 'old'`).Scan(&other))
	require.Equal(t, "kept", other, "the table was not rebuilt")

	big := strings.Repeat("x", 2*minPart)
	now := store.GenAIRecord{ID: "new", Member: "ann", TS: time.UnixMilli(2000), Provider: "anthropic", API: "messages", Model: "m",
		Raw: []byte(`{"request":"` + big + `"}`), InputMessages: []byte(`["` + big + `"]`)}
	_, err = db.CommitActivity(ctx, store.ActivityBatch{GenAI: []store.GenAIRecord{now}})
	require.NoError(t, err)

	recs, err := db.ListGenAI(ctx, store.GenAIFilter{Member: "ann"})
	require.NoError(t, err)
	require.Len(t, recs, 2)
	require.Equal(t, `[{"type":"text","content":"be brief"}]`, string(recs[0].SystemInstructions))
	require.Equal(t, `[{"role":"user","parts":[]}]`, string(recs[0].InputMessages))
	require.Equal(t, "[]", string(recs[1].SystemInstructions))
	require.Equal(t, string(now.InputMessages), string(recs[1].InputMessages))
	for id, want := range map[string]string{"old": legacyRaw, "new": string(now.Raw)} {
		raw, err := db.GenAIRaw(ctx, "ann", id)
		require.NoError(t, err)
		require.Equal(t, want, string(raw))
	}
}
