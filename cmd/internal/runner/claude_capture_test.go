package runner

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// anthropicStream is a streamed Messages answer, with a comment line and
// CRLF line ends a reassembler must not change on the way through.
const anthropicStream = "event: message_start\r\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_cap1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-x\",\"content\":[],\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\r\n\r\n" +
	": keep-alive\r\n\r\n" +
	"event: content_block_start\r\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\r\n\r\n" +
	"event: content_block_delta\r\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hel\"}}\r\n\r\n" +
	"event: content_block_delta\r\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"lo\"}}\r\n\r\n" +
	"event: content_block_stop\r\ndata: {\"type\":\"content_block_stop\",\"index\":0}\r\n\r\n" +
	"event: message_delta\r\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\r\n\r\n" +
	"event: message_stop\r\ndata: {\"type\":\"message_stop\"}\r\n\r\n"

func TestClaudeCapturesTheModelAPI(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	var keys []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		paths = append(paths, r.URL.RequestURI())
		keys = append(keys, r.Header.Get("X-Api-Key"))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Request-Id", "req_cap1")
		_, _ = io.WriteString(w, anthropicStream)
	}))
	defer up.Close()

	for _, tc := range []struct {
		name     string
		userBase string // the user's ANTHROPIC_BASE_URL, "" for none
		wantPath string
	}{
		{name: "the user's base URL is the upstream", userBase: up.URL, wantPath: "/v1/messages?beta=true"},
		{name: "a base URL with a path", userBase: up.URL + "/gateway/anthropic/", wantPath: "/gateway/anthropic/v1/messages?beta=true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("ANTHROPIC_BASE_URL", tc.userBase)
			got := make(chan Inference, 4)
			s := claudeFixture(t, "claude")
			s.Inferences = func(in Inference) { got <- in }
			a := NewClaude().(*claude)
			_, env, err := a.Command(s)
			require.NoError(t, err)
			require.NotNil(t, a.proxy)
			t.Cleanup(func() { a.proxy.Close() })
			var base string
			for _, kv := range env {
				if v, ok := strings.CutPrefix(kv, "ANTHROPIC_BASE_URL="); ok {
					base = v
				}
			}
			require.Regexp(t, `^http://127\.0\.0\.1:\d+/[0-9a-f]{32}`, base, "Claude Code calls the proxy: %v", env)
			require.NotContains(t, base, strings.TrimPrefix(up.URL, "http://"), "the upstream stays the runner's to know")

			req, err := http.NewRequest(http.MethodPost, base+"/v1/messages?beta=true",
				strings.NewReader(`{"model":"claude-x","stream":true,"system":"sys","messages":[{"role":"user","content":"hi"}],"tools":[{"name":"t","input_schema":{"type":"object"}}]}`))
			require.NoError(t, err)
			req.Header.Set("X-Api-Key", "sk-ant-api-key-0123456789")
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			body, err := io.ReadAll(bufio.NewReader(resp.Body))
			resp.Body.Close()
			require.NoError(t, err)
			require.Equal(t, anthropicStream, string(body), "the stream passes byte for byte")
			require.Equal(t, "req_cap1", resp.Header.Get("Request-Id"), "the response headers pass")
			mu.Lock()
			require.Equal(t, tc.wantPath, paths[len(paths)-1])
			require.Equal(t, "sk-ant-api-key-0123456789", keys[len(keys)-1], "the agent's own key goes upstream untouched")
			mu.Unlock()

			select {
			case in := <-got:
				var r struct {
					System   string            `json:"system"`
					Messages []json.RawMessage `json:"messages"`
					Tools    []json.RawMessage `json:"tools"`
				}
				require.NoError(t, json.Unmarshal(in.Request, &r))
				require.Equal(t, "sys", r.System)
				require.Len(t, r.Messages, 1)
				require.Len(t, r.Tools, 1)
				var m struct {
					ID         string `json:"id"`
					StopReason string `json:"stop_reason"`
					Content    []struct{ Text string }
					Usage      struct {
						InputTokens  int `json:"input_tokens"`
						OutputTokens int `json:"output_tokens"`
					}
				}
				require.NoError(t, json.Unmarshal(in.Response, &m), "%s", in.Response)
				require.Equal(t, "msg_cap1", m.ID)
				require.Equal(t, "end_turn", m.StopReason)
				require.Equal(t, "Hello", m.Content[0].Text)
				require.Equal(t, 12, m.Usage.InputTokens)
				require.Equal(t, 2, m.Usage.OutputTokens)
				require.Contains(t, in.Credentials, "sk-ant-api-key-0123456789", "the key is redacted from the upload")
			case <-time.After(5 * time.Second):
				t.Fatal("no inference captured")
			}
		})
	}
}

func TestClaudeProxySettings(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		capture bool
		proxy   bool
		wantErr string
	}{
		{name: "the public API by default", env: map[string]string{}, capture: true, proxy: true},
		{name: "no capture: Claude Code calls its API itself", env: map[string]string{}, capture: false},
		{name: "Bedrock is not captured", env: map[string]string{"CLAUDE_CODE_USE_BEDROCK": "1"}, capture: true},
		{name: "Vertex is not captured", env: map[string]string{"CLAUDE_CODE_USE_VERTEX": "true"}, capture: true},
		{name: "Bedrock off", env: map[string]string{"CLAUDE_CODE_USE_BEDROCK": "0"}, capture: true, proxy: true},
		{name: "not a URL", env: map[string]string{"ANTHROPIC_BASE_URL": "api.example.com"}, capture: true, wantErr: "not an http(s) URL"},
		{name: "credentials in the URL", env: map[string]string{"ANTHROPIC_BASE_URL": "https://u:sk-secret@api.example.com"}, capture: true, wantErr: "carries credentials"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"ANTHROPIC_BASE_URL", "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX"} {
				t.Setenv(k, tc.env[k])
			}
			s := claudeFixture(t, "claude")
			var log strings.Builder
			s.Log = &log
			if tc.capture {
				s.Inferences = func(Inference) {}
			}
			a := NewClaude().(*claude)
			_, env, err := a.Command(s)
			if a.proxy != nil {
				t.Cleanup(func() { a.proxy.Close() })
			}
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				require.NotContains(t, err.Error(), "sk-secret")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.proxy, a.proxy != nil)
			has := strings.Contains(strings.Join(env, "\n"), "ANTHROPIC_BASE_URL=")
			require.Equal(t, tc.proxy, has, "%v", env)
			if tc.capture && !tc.proxy {
				require.Contains(t, log.String(), "not captured")
			}
		})
	}
}
