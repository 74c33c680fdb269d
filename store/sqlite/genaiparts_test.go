package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/store"
)

// FuzzGenAIParts: any bytes stored as a record's raw upload and message
// array are read back exactly, whatever their JSON looks like, and a
// value's split covers it exactly: each child at least minPart bytes, in
// order, inside it.
func FuzzGenAIParts(f *testing.F) {
	big := strings.Repeat("y", minPart)
	for _, s := range []string{"", "{}", "[]", `{"a":"` + big + `"}`, `[ "` + big + `" , {"b":["` + big + `"]} ]`,
		`{"a\"":"` + big + `\\"}`, `{"a":[1,2`, "\x00\xff", `["` + big + `"] x`, `{"a" "` + big + `"}`} {
		f.Add([]byte(s))
	}
	db, err := OpenActivity(context.Background(), "")
	require.NoError(f, err)
	f.Cleanup(func() { _ = db.Close() })
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, v []byte) {
		at := 0
		for _, sp := range childSpans(v) {
			if sp[0] < at || sp[1] > len(v) || sp[1]-sp[0] < minPart {
				t.Fatalf("bad span %v after %d in %d bytes", sp, at, len(v))
			}
			at = sp[1]
		}
		id := fmt.Sprintf("f%d", n.Add(1))
		r := store.GenAIRecord{ID: id, Member: "m", TS: time.UnixMilli(1), Raw: v, InputMessages: v}
		_, err := db.CommitActivity(context.Background(), store.ActivityBatch{GenAI: []store.GenAIRecord{r}})
		require.NoError(t, err)
		raw, err := db.GenAIRaw(context.Background(), "m", id)
		require.NoError(t, err)
		require.Equal(t, string(v), string(raw))
		got, err := db.GetGenAI(context.Background(), "m", id)
		require.NoError(t, err)
		require.Equal(t, jsonArray(v), string(got.InputMessages))
	})
}

// sessionRecord is call n of a session: 60 KB of tool definitions and a
// system prompt the same on every call, and the messages so far, two more
// each call, in the raw upload and in the record's input messages.
func sessionRecord(n int) store.GenAIRecord {
	var tools []any
	for i := range 40 {
		tools = append(tools, map[string]any{"name": fmt.Sprintf("tool_%d", i), "description": fmt.Sprintf("Tool %d. ", i) + strings.Repeat("Does one thing well. ", 70)})
	}
	var msgs, parsed []any
	for i := range 2 * n {
		text := fmt.Sprintf("message %d %s", i, strings.Repeat("lorem ipsum ", 50))
		msgs = append(msgs, map[string]any{"role": "user", "content": text})
		parsed = append(parsed, map[string]any{"role": "user", "parts": []any{map[string]any{"type": "text", "content": text}}})
	}
	raw, _ := json.Marshal(map[string]any{"request": map[string]any{"system": strings.Repeat("You are an agent. ", 100), "tools": tools, "messages": msgs}})
	in, _ := json.Marshal(parsed)
	return store.GenAIRecord{ID: fmt.Sprintf("c%d", n), Member: "m", TS: time.UnixMilli(int64(n)), Raw: raw, InputMessages: in,
		SystemInstructions: []byte(`[{"type":"text","content":"` + strings.Repeat("You are an agent. ", 100) + `"}]`)}
}

// TestGenAIPartsStoreRepeatsOnce: a session's calls cost what changes
// between them. Twenty calls that each repeat 60 KB of tools take less
// room than three times the last call alone; stored whole they took
// twenty times the tools.
func TestGenAIPartsStoreRepeatsOnce(t *testing.T) {
	ctx := context.Background()
	db, err := OpenActivity(ctx, filepath.Join(t.TempDir(), "act.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	size := func() int64 {
		var pages, pageSize int64
		require.NoError(t, db.c.reader.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages))
		require.NoError(t, db.c.reader.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&pageSize))
		return pages * pageSize
	}
	empty := size()
	var last store.GenAIRecord
	for n := 1; n <= 20; n++ {
		last = sessionRecord(n)
		_, err := db.CommitActivity(ctx, store.ActivityBatch{GenAI: []store.GenAIRecord{last}})
		require.NoError(t, err)
	}
	whole := int64(len(last.Raw) + len(last.InputMessages) + len(last.SystemInstructions))
	grown := size() - empty
	t.Logf("20 calls stored in %d bytes; the last call alone is %d bytes", grown, whole)
	require.Less(t, grown, 3*whole)
	for n := 1; n <= 20; n += 19 {
		r := sessionRecord(n)
		got, err := db.GenAIRaw(ctx, "m", r.ID)
		require.NoError(t, err)
		require.Equal(t, string(r.Raw), string(got))
	}
}
