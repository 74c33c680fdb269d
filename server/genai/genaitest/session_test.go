package genaitest

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// The session is the size measured of the real one: a first request of
// about 88 KB, 69 KB of it tool definitions and 8 KB the system, and every
// call repeats the previous one's messages.
func TestClaudeSessionShape(t *testing.T) {
	uploads := ClaudeSession(25)
	require.Len(t, uploads, 25)
	var prev []json.RawMessage
	for i, u := range uploads {
		var up struct {
			Request struct {
				Messages []json.RawMessage `json:"messages"`
				System   json.RawMessage   `json:"system"`
				Tools    json.RawMessage   `json:"tools"`
			} `json:"request"`
			Response json.RawMessage `json:"response"`
		}
		require.NoError(t, json.Unmarshal(u, &up))
		req := up.Request
		if i == 0 {
			t.Logf("first upload %d bytes: tools %d, system %d, messages %d", len(u), len(req.Tools), len(req.System), len(u)-len(req.Tools)-len(req.System))
			require.InDelta(t, 88_000, len(u), 3_000)
			require.InDelta(t, 69_000, len(req.Tools), 1_500)
			require.InDelta(t, 8_000, len(req.System), 500)
		}
		require.Greater(t, len(req.Messages), len(prev))
		for j := range len(prev) - 1 { // the last one moved its cache breakpoint
			require.JSONEq(t, string(prev[j]), string(req.Messages[j]), "call %d repeats message %d", i, j)
		}
		prev = req.Messages
	}
	require.Equal(t, ClaudeSession(4)[:3], uploads[:3], "the same calls every time")
}
