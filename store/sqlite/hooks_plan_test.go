package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The dedupe lookup runs on every delivery that names a key; over a 24 h
// window it must be an index probe, not a scan of the endpoint's receipts.
func TestHookDedupeUsesItsIndex(t *testing.T) {
	db := MustOpen(t, filepath.Join(t.TempDir(), "plan.db"))
	rows, err := db.c.reader.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+hookDedupeSeenQuery, "ep", "key", 0)
	require.NoError(t, err)
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		require.NoError(t, rows.Scan(&id, &parent, &unused, &detail))
		plan = append(plan, detail)
	}
	require.NoError(t, rows.Err())
	require.Contains(t, strings.Join(plan, "\n"), "hook_deliveries_dedupe", "plan: %v", plan)
}
