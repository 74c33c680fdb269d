package server

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"svc/server/apierr"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	apiv1 "svc/gen/svc/v1"
	"svc/server/auth"
	"svc/server/vfs"
	"svc/store"
	"svc/store/sqlite"
)

// TestReadReportsDamage: file content that is not what its entry records
// is never served as if sound. Missing or resized content is 500
// data_loss before any byte (before: a missing blob read as 404 while
// stat said the file exists); changed bytes fail the read that reaches
// the end (before: served with 200). Each is logged at error level with
// the path and sha, and counted by kind.
func TestReadReportsDamage(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 10000)
	tests := []struct {
		name    string
		damage  func(t *testing.T, blob string)
		kind    string
		atStart bool // refused before any byte
	}{
		{"ten bytes flipped", func(t *testing.T, blob string) {
			b, err := os.ReadFile(blob)
			require.NoError(t, err)
			for i := 5000; i < 5010; i++ {
				b[i] ^= 0xff
			}
			require.NoError(t, os.WriteFile(blob, b, 0o600))
		}, vfs.DamageHash, false},
		{"missing", func(t *testing.T, blob string) { require.NoError(t, os.Remove(blob)) }, vfs.DamageMissing, true},
		{"cut short", func(t *testing.T, blob string) { require.NoError(t, os.Truncate(blob, 10)) }, vfs.DamageSize, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			logs := &syncBuffer{}
			e := newFsEnvWith(t, slog.New(slog.NewTextHandler(logs, nil)))
			entry := e.write(t, "alice", "/alice/report.bin", data)
			tc.damage(t, filepath.Join(e.root, "blobs", entry.Blob[:2], entry.Blob))

			_, f, err := e.fs.Read(context.Background(), e.principal("alice"), "/alice/report.bin")
			if tc.atStart {
				r := apierr.Render(err)
				require.Equal(t, 500, r.HTTPStatus)
				require.Equal(t, apierr.CodeDataLoss, r.Body.Error)
				require.Contains(t, r.Body.Message, "/alice/report.bin")
				require.NotContains(t, r.Body.Message, entry.Blob, "the client learns the path, not the disk layout")
				// stat still says the file exists: the damage is the broker's.
				_, err := e.fs.StatFile(e.ctx("alice"), &apiv1.StatFileRequest{Path: "/alice/report.bin"})
				require.NoError(t, err)
			} else {
				require.NoError(t, err)
				got, err := io.ReadAll(f)
				require.NoError(t, f.Close())
				require.ErrorIs(t, err, store.ErrDamaged)
				require.Less(t, len(got), len(data))
			}
			require.EqualValues(t, 1, testutil.ToFloat64(e.fs.metrics.storage.damage[tc.kind]), "counted once")
			line := logLine(t, logs.String(), "stored file content damaged")
			require.Contains(t, line, "level=ERROR")
			require.Contains(t, line, "path=/alice/report.bin")
			require.Contains(t, line, "sha="+entry.Blob)
			require.Contains(t, line, "kind="+tc.kind)
		})
	}
}

// newFsEnvWith is newFsEnv on a file store with the server's log on log.
func newFsEnvWith(t *testing.T, log *slog.Logger) *fsEnv {
	t.Helper()
	perms := map[string][]string{"admin": {auth.MembersManage}, "alice": {}}
	st, err := sqlite.Open(context.Background(), "")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	root := filepath.Join(t.TempDir(), "files")
	blobs, err := vfs.Open(root)
	require.NoError(t, err)
	srv := startTestServer(t, st, perms, Deps{}, WithFiles(blobs, 1<<20, 0), WithLogger(log))
	return &fsEnv{fs: srv.Fs(), st: st, root: root, perms: perms}
}

// logLine returns the one line of logs holding msg.
func logLine(t *testing.T, logs, msg string) string {
	t.Helper()
	var found []string
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, msg) {
			found = append(found, l)
		}
	}
	require.Len(t, found, 1, "one %q line in:\n%s", msg, logs)
	return found[0]
}

// syncBuffer is a log's output, safe to read while the server writes it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
