package e2e

// The runner's inference capture end to end without Codex (issue 14): the
// capturing proxy in front of a stub model API that streams a Responses
// answer, its sink wired to the runner's GenAI uploader, the real broker
// storing the record. Codex itself under the runner is runner_codex_test.go.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/cmd/internal/capture"
	"svc/cmd/internal/client"
	"svc/cmd/internal/runner"
)

// captureStub is a model API that streams one Responses answer per call,
// as Codex's provider does (event names as in the Codex spike), echoing
// text into the answer so the test can put a secret there.
type captureStub struct {
	mu    sync.Mutex
	calls int
	auth  []string
}

func (s *captureStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.calls++
	n := s.calls
	s.auth = append(s.auth, r.Header.Get("Authorization"))
	s.mu.Unlock()
	if r.Method != http.MethodPost || r.URL.Path != "/v1/responses" {
		http.Error(w, `{"error":{"message":"no such route"}}`, http.StatusNotFound)
		return
	}
	var req struct {
		Metadata map[string]string `json:"metadata"`
	}
	_ = json.Unmarshal(body, &req)
	text := "I read: " + req.Metadata["echo"]
	w.Header().Set("Content-Type", "text/event-stream")
	rid := fmt.Sprintf("resp_capture_%d", n)
	ev := func(typ string, data map[string]any) {
		data["type"] = typ
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
		w.(http.Flusher).Flush()
	}
	item := map[string]any{"type": "message", "role": "assistant", "id": "msg_1", "content": []any{map[string]any{"type": "output_text", "text": text}}}
	ev("response.created", map[string]any{"response": map[string]any{"id": rid}})
	ev("response.output_item.added", map[string]any{"output_index": 0, "item": map[string]any{"type": "message", "role": "assistant", "id": "msg_1", "content": []any{}}})
	ev("response.output_text.delta", map[string]any{"output_index": 0, "delta": text})
	ev("response.output_item.done", map[string]any{"output_index": 0, "item": item})
	ev("response.completed", map[string]any{"response": map[string]any{"id": rid, "usage": map[string]any{
		"input_tokens": 120, "output_tokens": 7, "total_tokens": 127,
		"input_tokens_details": map[string]any{"cached_tokens": 20}, "output_tokens_details": map[string]any{"reasoning_tokens": 2}}}})
}

func TestCaptureUploadsRedactedInference(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	const member = "cody"
	tok := createMember(t, d, admin, member)
	secret := "ghp-" + randomSecret(t) // the member's secret value
	mustCall(t, d, admin, "CreateSecret", obj{"slug": "gh", "envName": "GH_TOKEN"})
	mustCall(t, d, admin, "SetSecretValue", obj{"slug": "gh", "value": secret})
	mustCall(t, d, admin, "AddSecretBinding", obj{"slug": "gh", "member": member})
	o := mustCall(t, d, admin, "CreateObjective", obj{"title": "Captured work", "outcome": "records", "assignee": member})
	objID := o["id"].(string)

	// The runner's side, as Run wires it: its secrets resolved with its
	// token, a redactor of them and the token, the GenAI uploader on its
	// gRPC connection, the proxy's sink feeding the uploader.
	cl, err := client.New(p.base, tok)
	require.NoError(t, err)
	t.Cleanup(func() { cl.Close() })
	env := mustCall(t, d, bearer(tok), "ResolveSecrets", nil)["env"].(obj)
	require.Equal(t, secret, env["GH_TOKEN"])
	var runnerLog syncBuf
	up := runner.NewGenAIUploader(cl.Conn(), member, runner.NewRedactor(secret, tok), &runnerLog)
	ctx, stop := context.WithCancel(context.Background())
	upDone := make(chan struct{})
	go func() { defer close(upDone); up.Run(ctx) }()
	t.Cleanup(func() { stop(); <-upDone })

	stub := &captureStub{}
	upstream := httptest.NewServer(stub)
	t.Cleanup(upstream.Close)
	upURL, err := url.Parse(upstream.URL + "/v1")
	require.NoError(t, err)
	var proxyLog syncBuf
	proxy, err := capture.Start(capture.Options{Upstream: upURL, Sink: runner.CaptureSink(up.Add), Log: &proxyLog})
	require.NoError(t, err)

	// The agent's model call: its context holds the secret (a tool printed
	// the environment) and the token, the stub's answer echoes the secret,
	// the provider key rides in Authorization and in the text.
	const apiKey = "sk-proj-e2e-0123456789abcdef"
	reqBody, err := json.Marshal(map[string]any{
		"model": "gpt-stub", "stream": true, "instructions": "You are cody.",
		"metadata": map[string]string{"echo": "GH_TOKEN=" + secret},
		"input": []any{
			map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "check the env"}}},
			map[string]any{"type": "function_call", "call_id": "call_1", "name": "shell", "arguments": `{"cmd":"env"}`},
			map[string]any{"type": "function_call_output", "call_id": "call_1", "output": "GH_TOKEN=" + secret + "\nSVC_TOKEN=" + tok + "\nOPENAI_API_KEY=" + apiKey},
		},
	})
	require.NoError(t, err)
	before := time.Now().UnixMilli()
	req, err := http.NewRequest(http.MethodPost, proxy.URL()+"/responses", strings.NewReader(string(reqBody)))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	streamed, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(streamed), "event: response.completed", "the agent gets the stream")
	require.Contains(t, string(streamed), secret, "the agent's own answer is not redacted")

	require.NoError(t, proxy.Close())
	fctx, fcancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer fcancel()
	require.True(t, up.Flush(fctx), "the upload queue drained; runner log:\n%s", runnerLog.String())
	require.Empty(t, runnerLog.String())
	require.Empty(t, proxyLog.String())
	stub.mu.Lock()
	require.Equal(t, []string{"Bearer " + apiKey}, stub.auth, "the provider got the agent's own key")
	stub.mu.Unlock()

	// GET /members/cody/genai shows the record, usage and response id
	// from the reassembled stream, every secret redacted.
	list := p.do(t, http.MethodGet, "/members/"+member+"/genai", nil, withBearer(tok))
	require.Equal(t, http.StatusOK, list.status, "%s", list.raw)
	recs := listOf(t, list.body, "inferences")
	require.Len(t, recs, 1, "%s", list.raw)
	rec := recs[0]
	require.Equal(t, "resp_capture_1", rec["responseId"])
	require.Equal(t, "openai", rec["provider"])
	require.Equal(t, "gpt-stub", rec["model"])
	require.Equal(t, member, rec["member"])
	require.Equal(t, obj{"inputTokens": float64(100), "outputTokens": float64(7), "cacheReadTokens": float64(20),
		"cacheCreationTokens": float64(0), "reasoningTokens": float64(2)}, rec["usage"])
	ts := int64(rec["ts"].(float64))
	require.GreaterOrEqual(t, ts, before)
	require.LessOrEqual(t, ts, time.Now().UnixMilli())
	raw := string(list.raw)
	for _, s := range []string{secret, tok, apiKey} {
		require.NotContains(t, raw, s)
	}
	require.Contains(t, raw, "GH_TOKEN=[REDACTED]")
	require.Contains(t, raw, "SVC_TOKEN=[REDACTED]")
	require.Contains(t, raw, "OPENAI_API_KEY=[REDACTED]")
	outText := rec["outputMessages"].([]any)[0].(obj)["parts"].([]any)[0].(obj)["content"]
	require.Equal(t, "I read: GH_TOKEN=[REDACTED]", outText, "the model's answer is redacted too")

	// The objective open during the capture shows the record in its trace
	// (interval containment: no llm_exchange marker names it).
	trace := p.do(t, http.MethodGet, "/objectives/"+objID+"/trace", nil, withAuthorization(admin.authorization))
	require.Equal(t, http.StatusOK, trace.status, "%s", trace.raw)
	var found bool
	for _, row := range listOf(t, trace.body, "rows") {
		if inf, ok := row["inference"].(obj); ok && inf["responseId"] == "resp_capture_1" {
			found = true
			require.Equal(t, member, row["member"])
			require.Equal(t, rec["id"], inf["id"])
		}
	}
	require.True(t, found, "the trace shows the captured record: %s", trace.raw)
	require.NotContains(t, string(trace.raw), secret)
}

// syncBuf is a log written by one goroutine and read by the test.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
