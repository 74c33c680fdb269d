package activity

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	apiv1 "svc/gen/svc/v1"
	"svc/server/genai/genaitest"
	"svc/store/sqlite"
)

// sessionExchanges is how many calls of a Claude Code session the storage
// measurements upload.
const sessionExchanges = 25

// storedSession uploads the calls through UploadGenAi as member claude1's
// GenAI records into a fresh activity database file, and returns the
// file's size once closed (checkpointed: the schema and the records are
// in it, not in the WAL), and the bytes uploaded.
func storedSession(tb testing.TB, uploads [][]byte) (stored, uploaded int64) {
	tb.Helper()
	ctx := context.Background()
	path := filepath.Join(tb.TempDir(), "activity.db")
	act, err := sqlite.OpenActivity(ctx, path)
	require.NoError(tb, err)
	a, _ := startService(tb, act)
	for _, u := range uploads {
		_, err := a.UploadGenAi(bearerCtx("claude1"), &apiv1.UploadGenAiRequest{Name: "claude1", Body: u})
		require.NoError(tb, err)
		uploaded += int64(len(u))
	}
	require.NoError(tb, act.Close())
	fi, err := os.Stat(path)
	require.NoError(tb, err)
	return fi.Size(), uploaded
}

// BenchmarkGenAIStorage reports what a Claude Code session costs the
// activity store per exchange: 25 calls of 88 KB to 119 KB (69 KB of tool
// definitions each) uploaded; the database file's growth divided by 25
// (stored-B/exchange), that of the first call alone (first-B), and of
// each later call ((25 calls - 1 call) / 24: later-B/exchange), beside the
// bytes uploaded (uploaded-B/exchange).
//
//	go test -tags sqlite_omit_load_extension ./server/activity -run '^$' -bench BenchmarkGenAIStorage -benchtime 1x
func BenchmarkGenAIStorage(b *testing.B) {
	uploads := genaitest.ClaudeSession(sessionExchanges)
	for b.Loop() {
		empty, _ := storedSession(b, nil)
		one, _ := storedSession(b, uploads[:1])
		all, uploaded := storedSession(b, uploads)
		b.ReportMetric(float64(all-empty)/sessionExchanges, "stored-B/exchange")
		b.ReportMetric(float64(one-empty), "first-B")
		b.ReportMetric(float64(all-one)/(sessionExchanges-1), "later-B/exchange")
		b.ReportMetric(float64(uploaded)/sessionExchanges, "uploaded-B/exchange")
	}
}

// TestGenAIStorageSession holds storage to what changes between a
// session's calls: each repeats the tool definitions, the system prompt
// and every message so far, so the 25 calls must take less room than
// three of their uploads (stored whole, as before content addressing, they
// took about 28 times as much as one).
func TestGenAIStorageSession(t *testing.T) {
	uploads := genaitest.ClaudeSession(sessionExchanges)
	empty, _ := storedSession(t, nil)
	stored, uploaded := storedSession(t, uploads)
	last := int64(len(uploads[len(uploads)-1]))
	t.Logf("%d exchanges, %d bytes uploaded (%d per exchange, the last %d); the database grew by %d bytes: %d per exchange",
		sessionExchanges, uploaded, uploaded/sessionExchanges, last, stored-empty, (stored-empty)/sessionExchanges)
	require.Less(t, stored-empty, 3*last)
}
