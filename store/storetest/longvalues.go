package storetest

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"svc/store"
)

// Values as long as the API lets in, made of random characters so no
// compression shortens them: every store holds what one accepts. A
// PostgreSQL btree index refuses an entry over about 2.7 KB, where SQLite
// has no such limit.
const (
	longPathLen = 4096 // server/vfs.MaxPathLen
	longNameLen = 255  // server/vfs.MaxNameLen
)

// randomText is n random lowercase letters and digits, the same for the
// same seed.
func randomText(seed uint64, n int) string {
	r := rand.New(rand.NewPCG(seed, seed))
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}

var longValueTests = []suiteTest{
	{"FsLongPaths", testFsLongPaths},
}

// A tree whose paths reach the longest the API allows: created, read,
// listed, refused twice, moved and deleted as a short one is.
func testFsLongPaths(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice")
	// /alice/<255>/<255>/… up to a path of longPathLen bytes.
	dirs := []string{"/alice"}
	for i := uint64(1); ; i++ {
		next := dirs[len(dirs)-1] + "/" + randomText(i, longNameLen)
		if len(next)+1+longNameLen > longPathLen {
			break
		}
		dirs = append(dirs, next)
	}
	deep := dirs[len(dirs)-1]
	file := deep + "/" + randomText(99, longPathLen-len(deep)-1)
	require.Len(t, file, longPathLen)
	sibling := deep + "/" + randomText(98, longNameLen)
	for _, d := range dirs[1:] {
		mustCreateEntries(t, s, fsDir("alice", d))
	}
	mustCreateEntries(t, s, fsFile("alice", file, "x"), fsFile("alice", sibling, "y"))

	got, err := s.GetEntry(ctx, file)
	require.NoError(t, err)
	require.Equal(t, file, got.Path)

	_, err = s.CreateEntry(ctx, fsFile("alice", file, "again"))
	require.ErrorIs(t, err, store.ErrConflict, "the same long path twice")

	want := []string{file, sibling}
	if sibling < file {
		want = []string{sibling, file}
	}
	list, err := s.ListDir(ctx, deep, store.Page{})
	require.NoError(t, err)
	require.Equal(t, want, fsPaths(list))
	page, err := s.ListDir(ctx, deep, store.Page{Limit: 1, After: want[0][len(deep)+1:]})
	require.NoError(t, err)
	require.Equal(t, want[1:], fsPaths(page))

	tree, err := s.ListTree(ctx, dirs[len(dirs)-2])
	require.NoError(t, err)
	require.Equal(t, append([]string{deep}, want...), fsPaths(tree))

	moved := deep + "/" + randomText(97, longPathLen-len(deep)-1)
	_, err = s.MoveEntry(ctx, store.FsMove{From: file, To: moved})
	require.NoError(t, err)
	_, err = s.GetEntry(ctx, moved)
	require.NoError(t, err)

	n, _, err := s.DeleteTree(ctx, dirs[1])
	require.NoError(t, err)
	require.Equal(t, len(dirs)-1+2, n, "every entry of the long tree")
	left, err := s.ListDir(ctx, "/alice", store.Page{})
	require.NoError(t, err)
	require.Empty(t, left)
}

// testActivityLongResponseID: a response id is whatever the agent's OTLP
// export carries, unbounded by the API; an exchange and a genai record
// with a long one are stored and found by it.
func testActivityLongResponseID(t *testing.T, s store.ActivityStore) {
	ctx := t.Context()
	long := "resp_" + randomText(7, 16<<10)
	ev := store.ActivityEvent{Member: "alice", Kind: "llm_exchange", TS: at(0), ResponseID: long,
		Data: []byte(`{"responseId":"` + long + `"}`)}
	_, err := s.CommitActivity(ctx, store.ActivityBatch{
		Events: []store.ActivityEvent{ev},
		GenAI:  []store.GenAIRecord{genaiRecord("g1", "alice", at(0), long, "raw")},
	})
	require.NoError(t, err)
	got, err := s.GenAIByResponse(ctx, "alice", "", []string{long, strings.Repeat("x", 8<<10)})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, long, got[0].ResponseID)
	list, err := s.ListActivity(ctx, store.ActivityFilter{Member: "alice"})
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, ev.Data, list[0].Data)
}
