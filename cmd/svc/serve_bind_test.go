package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestServeBindsBeforeFirstBoot: a first run whose address is taken fails
// before it creates the team: no admin token is printed, no config or KEK
// is written, so the next run on a free port is a first run again.
func TestServeBindsBeforeFirstBoot(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	err = run(context.Background(), []string{"serve", "--config-path", filepath.Join(dir, "svc.json"), "--db-path", filepath.Join(dir, "svc.db"), "--addr", taken.Addr().String()}, nil, &stdout, &stderr)
	require.ErrorContains(t, err, "listen "+taken.Addr().String())
	require.NotContains(t, stdout.String(), "admin token")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "a failed first run leaves nothing behind")
}
