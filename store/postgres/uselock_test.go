package postgres

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestUseLock: brokers share the use lock, a maintenance command holds it
// alone, and closing a store gives it back.
func TestUseLock(t *testing.T) {
	ctx := context.Background()
	url := cluster.NewDatabase(t)
	open := func() *DB {
		db, err := Open(ctx, url)
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		return db
	}
	a, b, cmd := open(), open(), open()

	require.NoError(t, a.Use(ctx, false), "a first broker")
	require.NoError(t, b.Use(ctx, false), "a second broker beside it")
	require.ErrorIs(t, cmd.Use(ctx, true), ErrInUse, "a command while brokers run")

	require.NoError(t, a.Close())
	require.ErrorIs(t, cmd.Use(ctx, true), ErrInUse, "a command while one broker still runs")
	require.NoError(t, b.Close())
	require.NoError(t, cmd.Use(ctx, true), "a command once every broker stopped")

	late := open()
	require.ErrorIs(t, late.Use(ctx, false), ErrInUse, "a broker while a command runs")
	require.NoError(t, cmd.Close())
	require.NoError(t, late.Use(ctx, false), "a broker once the command is done")
}
