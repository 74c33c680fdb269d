package vfs

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// While file writes fail, Health tries the disk itself, at most once per
// store.FailureHold: small files never reach the blob store, so without the
// probe a team that writes only those would see "file writes failing" for
// good once the disk had room again.
func TestHealthProbesTheDiskWhileFailing(t *testing.T) {
	root := t.TempDir()
	b, err := Open(root)
	require.NoError(t, err)
	b.health.failing.Hold = 1 // a success ends the run at once
	full := fmt.Errorf("put blob: %w", syscall.ENOSPC)

	require.NoError(t, b.Health())
	b.health.put(full)
	require.NoError(t, b.Health(), "the disk has room: the probe's write succeeds and ends the run")

	b.health.put(full)
	require.Error(t, b.Health(), "a second probe within the hold does not run: /healthz answers anyone")

	tmp, err := os.ReadDir(filepath.Join(root, tmpDir))
	require.NoError(t, err)
	require.Empty(t, tmp, "the probe leaves nothing behind")
}
