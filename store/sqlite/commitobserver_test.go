package sqlite

import (
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/store"
)

// The commit observer hears of every COMMIT of a file store, and of no
// transaction that rolled back.
func TestCommitObserver(t *testing.T) {
	var n atomic.Int64
	db, err := Open(t.Context(), filepath.Join(t.TempDir(), "svc.db"), withCheckpointEvery(0),
		WithCommitObserver(func(took time.Duration) {
			require.GreaterOrEqual(t, took, time.Duration(0))
			n.Add(1)
		}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	start := n.Load() // what opening committed
	require.NoError(t, db.WithTx(t.Context(), func(store.Tx) error { return nil }))
	require.NoError(t, db.WithTx(t.Context(), func(store.Tx) error { return nil }))
	require.Error(t, db.WithTx(t.Context(), func(store.Tx) error { return errors.New("roll back") }))
	require.EqualValues(t, 2, n.Load()-start)
}
