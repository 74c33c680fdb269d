package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"svc/cmd/internal/relay"
)

// A hook payload too big for the relay (a huge tool result) still reaches
// the runner as its event, without the bulk: a lost PostToolUse would leave
// a tool in flight, the member working and every later delivery waiting.
func TestHookRelaysOversizedPayloadsWithoutTheirBulk(t *testing.T) {
	var mu sync.Mutex
	var got []json.RawMessage
	srv, err := relay.Listen("", func(p json.RawMessage) {
		mu.Lock()
		got = append(got, append(json.RawMessage(nil), p...))
		mu.Unlock()
	})
	require.NoError(t, err)
	defer srv.Close()
	getenv := func(k string) string {
		if k == relay.Env {
			return srv.Path()
		}
		return ""
	}

	tests := []struct {
		name    string
		payload string
		want    []Event
	}{
		{"small: as is", `{"hook_event_name":"PostToolUse","tool_name":"Read","tool_response":"ok"}`,
			[]Event{{Kind: ToolEnd, Tool: "Read", ToolResult: json.RawMessage(`"ok"`)}}},
		{"oversized: the event without input and result",
			`{"hook_event_name":"PostToolUse","tool_name":"Read","tool_use_id":"t1","tool_input":{},"tool_response":"` + strings.Repeat("x", relay.MaxLine) + `"}`,
			[]Event{{Kind: ToolEnd, Tool: "Read", ToolUseID: "t1"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			got = nil
			mu.Unlock()
			var stderr bytes.Buffer
			Hook(context.Background(), strings.NewReader(tc.payload), &stderr, getenv)
			mu.Lock()
			defer mu.Unlock()
			require.Len(t, got, 1, stderr.String())
			require.Equal(t, tc.want, ParseHook(got[0]))
		})
	}

	var stderr bytes.Buffer
	Hook(context.Background(), strings.NewReader(`"`+strings.Repeat("x", relay.MaxLine)+`"`), &stderr, getenv)
	require.Contains(t, stderr.String(), "not a whole hook object")
}
