package genai_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"svc/server/genai"
)

func TestParseToolDefinitions(t *testing.T) {
	const (
		anthResp  = `{"type":"message","id":"msg_1","model":"claude-x","content":[],"usage":{"input_tokens":1,"output_tokens":1}}`
		chatResp  = `{"object":"chat.completion","id":"c1","model":"gpt-x","choices":[]}`
		respsResp = `{"object":"response","id":"r1","model":"gpt-x","status":"completed","output":[]}`
	)
	for _, tc := range []struct {
		name, req, resp string
		want            []string
		err             string
	}{
		{name: "anthropic tools and a server tool, as sent",
			req:  `{"model":"claude-x","messages":[],"tools":[{"name":"Bash","description":"Run","input_schema":{"type":"object"}}, {"type":"web_search_20250305","name":"web_search"}]}`,
			resp: anthResp, want: []string{`{"name":"Bash","description":"Run","input_schema":{"type":"object"}}`, `{"type":"web_search_20250305","name":"web_search"}`}},
		{name: "chat functions",
			req:  `{"model":"gpt-x","messages":[],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{}}}]}`,
			resp: chatResp, want: []string{`{"type":"function","function":{"name":"get_weather","parameters":{}}}`}},
		{name: "responses: a function and a namespace of MCP tools (Codex)",
			req:  `{"model":"gpt-x","input":[],"tools":[{"type":"function","name":"exec_command","parameters":{}},{"type":"namespace","name":"mcp__svc","tools":[{"type":"function","name":"send"}]}]}`,
			resp: respsResp, want: []string{`{"type":"function","name":"exec_command","parameters":{}}`, `{"type":"namespace","name":"mcp__svc","tools":[{"type":"function","name":"send"}]}`}},
		{name: "no tools", req: `{"model":"claude-x","messages":[]}`, resp: anthResp, want: []string{}},
		{name: "null tools", req: `{"model":"claude-x","messages":[],"tools":null}`, resp: anthResp, want: []string{}},
		{name: "empty tools", req: `{"model":"claude-x","messages":[],"tools":[]}`, resp: anthResp, want: []string{}},
		{name: "tools not an array", req: `{"model":"claude-x","messages":[],"tools":{"name":"Bash"}}`, resp: anthResp, err: "request.tools: not an array"},
		{name: "a tool not an object", req: `{"model":"claude-x","messages":[],"tools":[{"name":"a"},"Bash"]}`, resp: anthResp, err: "request.tools[1]: not an object"},
		{name: "too many tools", req: `{"model":"claude-x","messages":[],"tools":[` + strings.TrimSuffix(strings.Repeat(`{},`, genai.MaxTools+1), ",") + `]}`, resp: anthResp,
			err: fmt.Sprintf("more than %d tools", genai.MaxTools)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parse(t, tc.req, tc.resp)
			if tc.err != "" {
				require.ErrorIs(t, err, genai.ErrInvalid)
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.NotNil(t, got.ToolDefinitions)
			var raw []string
			for _, d := range got.ToolDefinitions {
				raw = append(raw, string(d))
			}
			if raw == nil {
				raw = []string{}
			}
			require.Equal(t, tc.want, raw)
			b, err := json.Marshal(got)
			require.NoError(t, err)
			require.Contains(t, string(b), `"toolDefinitions":[`)
		})
	}
}
