package otlp

import (
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestParseRequestBodies(t *testing.T) {
	tests := []struct {
		name         string
		body         string
		truncated    bool
		system, msgs string // compact JSON expected; "" is absent
		tools        []string
	}{
		{"plain", `{"model":"m","system":"be brief","messages":[{"role":"user","content":"hi"}],"tools":[{"name":"Read","input_schema":{}}]}`,
			false, `"be brief"`, `[{"role":"user","content":"hi"}]`, []string{"Read"}},
		{"whitespace kept out of nothing it changes", ` {"messages": [ {"role":"user","content":"hi"} ] } `,
			false, "", `[ {"role":"user","content":"hi"} ]`, nil},
		{"tools not an array is no tools, not a truncated body", `{"messages":[],"tools":{"name":"x"}}`, false, "", `[]`, nil},
		{"tools entries that are not named objects are skipped", `{"tools":[1,"x",{"name":2},{"name":"Bash"},null]}`, false, "", "", []string{"Bash"}},
		{"an empty tools list is an empty list", `{"tools":[]}`, false, "", "", []string{}},
		{"messages not an array are left out", `{"messages":"hi"}`, false, "", "", nil},
		{"null system is absent", `{"system":null}`, false, "", "", nil},
		{"thinking is removed", `{"messages":[{"role":"assistant","content":[{"type":"thinking","thinking":"secret"},{"type":"text","text":"ok"}]}]}`,
			false, "", `[{"content":[{"text":"ok","type":"text"}],"role":"assistant"}]`, nil},
		{"thinking spelled with escapes is removed", `{"messages":[{"role":"assistant","content":[{"type":"\u0074hinking","thinking":"secret"}]}]}`,
			false, "", `[{"content":[],"role":"assistant"}]`, nil},
		{"truncated JSON", `{"messages":[{"role":"user","content":"hi`, true, "", "", nil},
		{"not an object", `["messages"]`, true, "", "", nil},
		{"trailing data", `{"messages":[]} {}`, true, "", "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := parseRequest(tc.body, "b1", time.Unix(1, 0))
			require.Equal(t, tc.truncated, r.Truncated)
			require.Equal(t, "b1", r.BodyID)
			require.Equal(t, tc.system, string(r.System))
			require.Equal(t, tc.msgs, string(r.Messages))
			require.Equal(t, tc.tools, r.Tools)
		})
	}

	t.Run("invalid UTF-8 is replaced, so every row is valid JSON text", func(t *testing.T) {
		r := parseRequest("{\"messages\":[{\"role\":\"user\",\"content\":\"a\xffb\"}]}", "", time.Unix(1, 0))
		require.False(t, r.Truncated)
		require.True(t, utf8.Valid(r.Messages))
		require.Contains(t, string(r.Messages), "a\ufffdb")
	})
}

func TestParseResponseBodies(t *testing.T) {
	r := parseResponse(`{"id":"msg_1","content":[{"type":"redacted_thinking","data":"x"},{"type":"text","text":"hi"}],"stop_reason":"end_turn",
		"usage":{"input_tokens":3,"output_tokens":4.0,"cache_read_input_tokens":"5","cache_creation_input_tokens":6}}`, "b1", "msg_attr")
	require.False(t, r.Truncated)
	require.Equal(t, "msg_1", r.ID)
	require.Equal(t, `[{"text":"hi","type":"text"}]`, string(r.Content))
	require.Equal(t, "end_turn", *r.StopReason)
	require.Equal(t, int64(3), *r.Usage.Input)
	require.Equal(t, int64(4), *r.Usage.Output, "an integral float counts")
	require.Nil(t, r.Usage.CacheRead, "a string is not a count")
	require.Equal(t, int64(6), *r.Usage.CacheCreation)

	r = parseResponse(`{"id":7,"stop_reason":null}`, "", "msg_attr")
	require.Equal(t, "msg_attr", r.ID, "the attribute stands in for an id that is not a string")
	require.Nil(t, r.StopReason)
	require.True(t, parseResponse(`{"id":"x"`, "", "").Truncated)
}
