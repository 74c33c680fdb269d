package postgres

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// TestLongValueQueriesUseIndexes: the queries on paths and response ids
// still find their rows through an index once those indexes are hash
// indexes and a btree on fs_key (migrations 0005 and activity 0002), so
// long values cost no scan of the table. Sequential scans are turned off,
// so a plan without a usable index shows one anyway.
func TestLongValueQueriesUseIndexes(t *testing.T) {
	ctx := t.Context()
	db := MustOpen(t)
	act := MustOpenActivity(t)
	for _, tc := range []struct {
		name  string
		pool  func() string
		query string
		args  []any
		index string
		setup string // run first, in the transaction the plan is made in
	}{
		{"get entry", db.c.pool.Config().ConnString, `SELECT ` + fsColumns + ` FROM fs_entries WHERE path = $1`, []any{"/a/b"}, "fs_entries_path_key", ""},
		{"list dir", db.c.pool.Config().ConnString, `SELECT ` + fsColumns + ` FROM fs_entries WHERE parent = $1 AND path > $2 ORDER BY path LIMIT $3`, []any{"/a", "", 10}, "fs_entries_parent", ""},
		{"list tree", db.c.pool.Config().ConnString, rebind(`SELECT ` + fsColumns + ` FROM fs_entries WHERE ` + fsBelow("path") + ` ORDER BY fs_key(path), path`), []any{"/a/", "/a0"}, "fs_entries_path_order", ""},
		{"delete tree", db.c.pool.Config().ConnString, rebind(`DELETE FROM fs_entries WHERE path = ?3 OR (` + fsBelow("path") + `)`), []any{"/a/", "/a0", "/a"}, "fs_entries_path_order", ""},
		{"genai by response", act.c.pool.Config().ConnString, rebind(`SELECT id FROM genai
WHERE member = ?1 AND (?2 = '' OR member_uid = ?2) AND response_id != '' AND response_id IN (SELECT value FROM jsonb_array_elements_text(?3::jsonb))`), []any{"alice", "", `["r1"]`}, "genai_response",
			// On an empty table the member's index looks as good.
			`DROP INDEX genai_member_ts`},
		{"exchange by response", act.c.pool.Config().ConnString, `SELECT id FROM activity WHERE member = $1 AND response_id = $2 AND kind = 'llm_exchange'`, []any{"alice", "r1"}, "activity_response", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := pgx.Connect(ctx, tc.pool())
			require.NoError(t, err)
			t.Cleanup(func() { _ = conn.Close(ctx) })
			_, err = conn.Exec(ctx, `SET enable_seqscan = off`)
			require.NoError(t, err)
			tx, err := conn.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(ctx) }()
			if tc.setup != "" {
				_, err = tx.Exec(ctx, tc.setup)
				require.NoError(t, err)
			}
			rows, err := tx.Query(ctx, `EXPLAIN `+tc.query, tc.args...)
			require.NoError(t, err)
			lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
			require.NoError(t, err)
			plan := strings.Join(lines, "\n")
			require.Contains(t, plan, tc.index, plan)
			require.NotContains(t, plan, "Seq Scan", plan)
		})
	}
}
