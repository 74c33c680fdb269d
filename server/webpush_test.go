package server

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"svc/server/egress"
	"svc/server/webpush"
	"svc/store"
)

func TestPushPayloadFitsOneRecord(t *testing.T) {
	tests := []struct {
		name, title, body string
	}{
		{"short", "hi", "hello"},
		{"long ascii body", "t", strings.Repeat("x", 10000)},
		{"long multibyte body", "t", strings.Repeat("é€😀", 3000)},
		{"long title, empty body", strings.Repeat("t", 5000), "b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := pushPayload(store.Message{Seq: 9, From: "alice", Title: tc.title, Body: tc.body, Thread: "dm:alice:bob"})
			require.LessOrEqual(t, len(b), webpush.MaxPayload)
			var p map[string]string
			require.NoError(t, json.Unmarshal(b, &p))
			require.Equal(t, "0000000000000009", p["id"])
			require.True(t, utf8.ValidString(p["body"]))
			require.True(t, strings.HasPrefix(tc.body, p["body"]))
			if len(tc.body) < 100 {
				require.Equal(t, tc.body, p["body"], "short bodies are whole")
			}
		})
	}
}

func TestPushSubjectDefaults(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "mailto:svc@localhost"},
		{"ops@example.com", "mailto:ops@example.com"},
		{"mailto:ops@example.com", "mailto:ops@example.com"},
		{"https://example.com/contact", "https://example.com/contact"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			require.Equal(t, tc.want, newPushNotifier(nil, nil, nil, tc.in, false, egress.Policy{}, discardLogger()).subject)
		})
	}
}
