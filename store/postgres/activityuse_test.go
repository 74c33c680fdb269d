package postgres

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestActivityUseLock: the activity store's database has the same use
// lock as the main store's, and it is the same lock when both stores are
// in one database.
func TestActivityUseLock(t *testing.T) {
	ctx := context.Background()
	url := cluster.NewDatabase(t)
	openAct := func() *ActivityDB {
		db, err := OpenActivity(ctx, url)
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		return db
	}
	broker, cmd := openAct(), openAct()
	require.NoError(t, broker.Use(ctx, false), "a broker")
	require.ErrorIs(t, cmd.Use(ctx, true), ErrInUse, "a command while a broker runs")
	require.NoError(t, broker.Close())
	require.NoError(t, cmd.Use(ctx, true), "a command once the broker stopped")

	_, err := Open(ctx, url, WithUseLock(false))
	require.ErrorIs(t, err, ErrInUse, "the main store's lock is the same lock")
}
