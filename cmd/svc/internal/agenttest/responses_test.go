package agenttest

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// sseEvents posts body to the stub and returns the SSE events' data.
func sseEvents(t *testing.T, url, body string) (int, []map[string]any) {
	t.Helper()
	res, err := http.Post(url, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer res.Body.Close()
	var out []map[string]any
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(d), &m))
			out = append(out, m)
		}
	}
	return res.StatusCode, out
}

func userBody(text string, tools bool) string {
	b := map[string]any{"model": "gpt-stub", "stream": true,
		"input": []any{map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": text}}}}}
	if tools {
		b["tools"] = []any{map[string]any{"type": "function", "name": "exec_command"},
			map[string]any{"type": "namespace", "name": "mcp__svc", "tools": []any{map[string]any{"type": "function", "name": "send"}}}}
	}
	raw, _ := json.Marshal(b)
	return string(raw)
}

func TestResponsesStub(t *testing.T) {
	cases := []struct {
		name     string
		script   []RTurn
		body     string
		scripted bool
		text     string
		call     string
		ns       string
	}{
		{"default reply", nil, userBody("hi", true), false, DefaultReply, "", ""},
		{"scripted text", []RTurn{{Text: "hello"}}, userBody("hi", true), true, "hello", "", ""},
		{"function call", []RTurn{{Call: "send", Namespace: "mcp__svc", Arguments: json.RawMessage(`{"to":"a"}`)}}, userBody("hi", true), true, "", "send", "mcp__svc"},
		{"marker waits", []RTurn{{Marker: "M-1", Text: "x"}}, userBody("no marker", true), false, DefaultReply, "", ""},
		{"marker matches", []RTurn{{Marker: "M-1", Text: "x"}}, userBody("has M-1", true), true, "x", "", ""},
		{"no tools: not an agent turn", []RTurn{{Text: "x"}}, userBody("hi", false), false, DefaultReply, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := NewResponses(t).Script(tc.script...)
			code, evs := sseEvents(t, m.URL()+"/responses", tc.body)
			require.Equal(t, http.StatusOK, code)
			require.NotEmpty(t, evs)
			require.Equal(t, "response.created", evs[0]["type"])
			last := evs[len(evs)-1]
			require.Equal(t, "response.completed", last["type"])
			resp := last["response"].(map[string]any)
			usage := resp["usage"].(map[string]any)
			require.Greater(t, usage["input_tokens"], float64(0))
			require.Greater(t, usage["output_tokens"], float64(0))
			var text, call, ns string
			for _, o := range resp["output"].([]any) {
				item := o.(map[string]any)
				switch item["type"] {
				case "message":
					text = item["content"].([]any)[0].(map[string]any)["text"].(string)
				case "function_call":
					call, _ = item["name"].(string)
					ns, _ = item["namespace"].(string)
					require.True(t, json.Valid([]byte(item["arguments"].(string))))
				}
			}
			require.Equal(t, tc.text, text)
			require.Equal(t, tc.call, call)
			require.Equal(t, tc.ns, ns)
			reqs := m.Requests()
			require.Len(t, reqs, 1)
			require.Equal(t, tc.scripted, reqs[0].Scripted)
			require.Equal(t, resp["id"], reqs[0].ResponseID)
			if tc.scripted {
				require.Zero(t, m.Pending())
			}
		})
	}
}

func TestResponsesStubRecordsAndIDs(t *testing.T) {
	m := NewResponses(t)
	ids := map[string]bool{}
	for i := 0; i < 3; i++ {
		_, evs := sseEvents(t, m.URL()+"/responses", userBody("turn", true))
		ids[evs[len(evs)-1]["response"].(map[string]any)["id"].(string)] = true
	}
	require.Len(t, ids, 3, "response ids are unique")
	reqs := m.Requests()
	require.Len(t, reqs, 3)
	require.Equal(t, []string{"exec_command", "mcp__svc/send"}, reqs[0].ToolNames())
	require.Equal(t, "turn", reqs[2].LastUserText())
	require.True(t, reqs[2].IsAgentTurn())

	res, err := http.Post(m.URL()+"/chat/completions", "application/json", strings.NewReader("{}"))
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusNotFound, res.StatusCode)
	require.Len(t, m.Requests(), 4, "a 404 is recorded too")
}

func TestCodexInstall(t *testing.T) {
	bin := Codex(t)
	require.NoError(t, checkCodexVersion(bin))
	require.Equal(t, bin, Codex(t), "the second call reuses the verified install")
}
