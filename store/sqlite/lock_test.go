package sqlite

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOneProcessPerFile: a database file in use is refused, and free again
// once closed; the lock file is private.
func TestOneProcessPerFile(t *testing.T) {
	path := tempPath(t, "svc.db")
	db, err := Open(t.Context(), path)
	require.NoError(t, err)
	_, err = Open(t.Context(), path)
	require.ErrorContains(t, err, "in use by another process")
	require.NoError(t, db.Close())
	db = MustOpen(t, path)
	fi, err := os.Stat(path + ".lock")
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	_ = db
}

// TestActivityStoreIsShared: the activity store takes no lock, so svc
// activity prune can open it beside a running broker.
func TestActivityStoreIsShared(t *testing.T) {
	path := tempPath(t, "activity.db")
	MustOpenActivity(t, path)
	MustOpenActivity(t, path)
	_, err := os.Stat(path + ".lock")
	require.ErrorIs(t, err, os.ErrNotExist)
}
