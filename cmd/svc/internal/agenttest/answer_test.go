package agenttest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// AnswerWith answers the agent turns the script leaves, and nothing else:
// scripted turns come first, side requests (no tools) keep the default,
// and a false answer falls back to it.
func TestModelAnswerWith(t *testing.T) {
	m := NewModel(t)
	m.Reply("scripted").AnswerWith(func(q Request) (Turn, bool) {
		switch {
		case len(q.ToolResults()) > 0:
			return Turn{Text: "after the tool"}, true
		case q.HasMarker("ASK"):
			return Turn{ToolName: "mcp__svc__send", ToolInput: json.RawMessage(`{"to":"b"}`)}, true
		}
		return Turn{}, false
	})
	post := func(content any, tools bool) string {
		body := map[string]any{"model": "m", "max_tokens": 10, "messages": []map[string]any{{"role": "user", "content": content}}}
		if tools {
			body["tools"] = []map[string]any{{"name": "mcp__svc__send"}}
		}
		b, err := json.Marshal(body)
		require.NoError(t, err)
		resp, err := http.Post(m.URL()+"/v1/messages", "application/json", bytes.NewReader(b))
		require.NoError(t, err)
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(out)
	}
	require.Contains(t, post("ASK", true), `"scripted"`, "the script comes first")
	out := post("ASK", true)
	require.Contains(t, out, `"name":"mcp__svc__send"`)
	require.Contains(t, out, `"stop_reason":"tool_use"`)
	require.Contains(t, post([]map[string]any{{"type": "tool_result", "tool_use_id": "x", "content": "ok"}}, true), `"after the tool"`)
	require.Contains(t, post("nothing asked", true), `"`+DefaultReply+`"`, "false: the default")
	require.Contains(t, post("ASK", false), `"`+DefaultReply+`"`, "a side request is not an agent turn")
	reqs := m.Requests()
	require.Len(t, reqs, 5)
	require.Equal(t, "mcp__svc__send", reqs[1].Answer.ToolName)
	require.False(t, reqs[1].Scripted)
}

func TestResponsesAnswerWith(t *testing.T) {
	m := NewResponses(t).AnswerWith(func(q RRequest) (RTurn, bool) {
		if strings.Contains(q.LastUserText(), "ASK") {
			return RTurn{Call: "send", Namespace: "mcp__svc", Arguments: json.RawMessage(`{"to":"b"}`)}, true
		}
		return RTurn{}, false
	})
	_, evs := sseEvents(t, m.URL()+"/responses", userBody("ASK", true))
	resp := evs[len(evs)-1]["response"].(map[string]any)
	item := resp["output"].([]any)[0].(map[string]any)
	require.Equal(t, "function_call", item["type"])
	require.Equal(t, "send", item["name"])
	require.Equal(t, "mcp__svc", item["namespace"])
	_, evs = sseEvents(t, m.URL()+"/responses", userBody("hello", true))
	resp = evs[len(evs)-1]["response"].(map[string]any)
	require.Equal(t, DefaultReply, resp["output"].([]any)[0].(map[string]any)["content"].([]any)[0].(map[string]any)["text"])
	_, evs = sseEvents(t, m.URL()+"/responses", userBody("ASK", false))
	resp = evs[len(evs)-1]["response"].(map[string]any)
	require.Equal(t, "message", resp["output"].([]any)[0].(map[string]any)["type"], "no tools: not an agent request")
}
