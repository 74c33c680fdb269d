package toolcall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"svc/server/egress"
)

// mcpUpstream is an in-process MCP server over Streamable HTTP with tools
// for each case, and a record of the credential headers it saw.
type mcpUpstream struct {
	srv *httptest.Server
	mu  sync.Mutex
	// auth and key are the Authorization and X-Key headers of every HTTP
	// request.
	auth, key []string
}

func (u *mcpUpstream) seen() (auth, key []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.auth...), append([]string(nil), u.key...)
}

func newMCPUpstream(t *testing.T, nTools int) *mcpUpstream {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "test-upstream", Version: "1"}, &mcp.ServerOptions{PageSize: 2})
	schema := json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)
	text := func(s string) []mcp.Content { return []mcp.Content{&mcp.TextContent{Text: s}} }
	s.AddTool(&mcp.Tool{Name: "echo", Description: "Echoes text.", InputSchema: schema},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct{ Text string }
			if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: text("echo: " + in.Text)}, nil
		})
	s.AddTool(&mcp.Tool{Name: "fail", Description: "A tool error.", InputSchema: schema},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true, Content: text("it broke")}, nil
		})
	s.AddTool(&mcp.Tool{Name: "mixed", Description: "Several blocks.", InputSchema: schema},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{
				Content: []mcp.Content{
					&mcp.TextContent{Text: "a"},
					&mcp.ImageContent{Data: []byte{1, 2, 3}, MIMEType: "image/png"},
					&mcp.ResourceLink{URI: "file:///x", Name: "x"},
				},
				StructuredContent: map[string]any{"n": 1, "s": "v"},
			}, nil
		})
	s.AddTool(&mcp.Tool{Name: "leak", Description: "Echoes the credential.", InputSchema: schema},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			h := req.Extra.Header
			return &mcp.CallToolResult{
				Content:           text("auth=" + h.Get("Authorization") + " key=" + h.Get("X-Key")),
				StructuredContent: map[string]any{h.Get("X-Key"): []any{h.Get("Authorization")}},
			}, nil
		})
	release := make(chan struct{})
	s.AddTool(&mcp.Tool{Name: "slow", Description: "Answers when the test ends.", InputSchema: schema},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-release:
				return &mcp.CallToolResult{Content: text("late")}, nil
			}
		})
	s.AddTool(&mcp.Tool{Name: "big", Description: "A large answer.", InputSchema: schema},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: text(strings.Repeat("x", 64<<10))}, nil
		})
	for i := range nTools {
		s.AddTool(&mcp.Tool{Name: fmt.Sprintf("extra%02d", i), InputSchema: schema},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: text("extra")}, nil
			})
	}
	u := &mcpUpstream{}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.auth = append(u.auth, r.Header.Get("Authorization"))
		u.key = append(u.key, r.Header.Get("X-Key"))
		u.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(u.srv.Close)
	// Cleanups run last first: the slow tool returns before Close waits
	// for its connection.
	t.Cleanup(func() { close(release) })
	return u
}

func TestListMCP(t *testing.T) {
	t.Parallel()
	u := newMCPUpstream(t, 5) // 11 tools, pages of 2
	cred := &Credential{Kind: "header", HeaderName: "x-key", Secret: testSecret}
	tools, err := newCaller(Options{}).ListMCP(context.Background(), u.srv.URL, cred)
	require.NoError(t, err)
	names := map[string]Tool{}
	for _, tool := range tools {
		names[tool.Name] = tool
	}
	require.Len(t, tools, 11)
	require.Len(t, names, 11)
	for _, n := range []string{"echo", "fail", "mixed", "leak", "slow", "big", "extra00", "extra04"} {
		require.Contains(t, names, n)
	}
	require.Equal(t, "Echoes text.", names["echo"].Description)
	require.JSONEq(t, `{"type":"object","properties":{"text":{"type":"string"}}}`, string(names["echo"].InputSchema))
	auth, key := u.seen()
	require.NotEmpty(t, key)
	for i := range key {
		require.Equal(t, testSecret, key[i], "request %d", i)
		require.Empty(t, auth[i])
	}
}

func TestCallMCP(t *testing.T) {
	t.Parallel()
	u := newMCPUpstream(t, 0)
	tests := []struct {
		name       string
		tool       string
		args       map[string]any
		isError    bool
		content    []string // JSON of each block
		structured string
		contains   string // with content nil: the one text block holds this
	}{
		{name: "echo", tool: "echo", args: map[string]any{"text": "héllo"}, content: []string{`{"type":"text","text":"echo: héllo"}`}},
		{name: "tool error", tool: "fail", isError: true, content: []string{`{"type":"text","text":"it broke"}`}},
		{name: "mixed blocks", tool: "mixed", content: []string{
			`{"type":"text","text":"a"}`,
			`{"type":"image","data":"AQID","mimeType":"image/png"}`,
			`{"type":"resource_link","uri":"file:///x","name":"x"}`,
		}, structured: `{"n":1,"s":"v"}`},
		{name: "credential echoed back is redacted", tool: "leak", content: []string{`{"type":"text","text":"auth=Bearer [REDACTED] key="}`},
			structured: `{"":["Bearer [REDACTED]"]}`},
		{name: "unknown tool", tool: "nope", isError: true, contains: "nope"},
		{name: "bad arguments", tool: "echo", args: map[string]any{"text": 5}, isError: true, contains: "unmarshal number"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res, err := newCaller(Options{}).CallMCP(context.Background(), u.srv.URL, &Credential{Kind: "bearer", Secret: testSecret}, tc.tool, tc.args)
			require.NoError(t, err)
			require.Equal(t, tc.isError, res.IsError, "%s", res.Content)
			if tc.content != nil {
				require.Len(t, res.Content, len(tc.content))
				for i := range tc.content {
					require.JSONEq(t, tc.content[i], string(res.Content[i]))
				}
			} else {
				require.Contains(t, blockText(t, res), tc.contains)
			}
			if tc.structured != "" {
				require.JSONEq(t, tc.structured, string(res.StructuredContent))
			} else {
				require.Empty(t, res.StructuredContent)
			}
			raw, err := json.Marshal(res)
			require.NoError(t, err)
			require.NotContains(t, string(raw), testSecret)
		})
	}
	auth, _ := u.seen()
	for i := range auth {
		require.Equal(t, "Bearer "+testSecret, auth[i], "request %d", i)
	}
}

func TestCallMCPLimits(t *testing.T) {
	t.Parallel()
	u := newMCPUpstream(t, 0)
	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		res, err := newCaller(Options{Timeout: 300 * time.Millisecond}).CallMCP(context.Background(), u.srv.URL, nil, "slow", nil)
		require.NoError(t, err)
		require.True(t, res.IsError)
		// Under load the session's initialize can be what runs out of time: either way the
		// answer is the timeout, said once.
		require.Contains(t, blockText(t, res), "the upstream did not answer within 300ms")
		require.Less(t, time.Since(start), 5*time.Second)
	})
	t.Run("oversized", func(t *testing.T) {
		t.Parallel()
		res, err := newCaller(Options{MaxResponse: 32 << 10}).CallMCP(context.Background(), u.srv.URL, nil, "big", nil)
		require.NoError(t, err)
		require.True(t, res.IsError)
		require.Equal(t, "the upstream's answer is larger than 32768 bytes", blockText(t, res))
	})
	t.Run("within the limit", func(t *testing.T) {
		t.Parallel()
		res, err := newCaller(Options{MaxResponse: 256 << 10}).CallMCP(context.Background(), u.srv.URL, nil, "big", nil)
		require.NoError(t, err)
		require.False(t, res.IsError)
		require.Len(t, blockText(t, res), 64<<10)
	})
	t.Run("cancelled", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(200*time.Millisecond, cancel)
		_, err := newCaller(Options{}).CallMCP(ctx, u.srv.URL, nil, "slow", nil)
		require.ErrorIs(t, err, context.Canceled)
	})
	t.Run("list cancelled", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := newCaller(Options{}).ListMCP(ctx, u.srv.URL, nil)
		require.ErrorIs(t, err, context.Canceled)
	})
}

func TestMCPUnreachable(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := "http://" + l.Addr().String() + "/mcp"
	require.NoError(t, l.Close())
	notMCP := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<html>hello " + r.Header.Get("Authorization") + "</html>"))
	}))
	t.Cleanup(notMCP.Close)
	notFound := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(notFound.Close)
	cred := &Credential{Kind: "bearer", Secret: testSecret}
	for _, tc := range []struct{ name, url string }{
		{name: "closed port", url: closed},
		{name: "not MCP", url: notMCP.URL},
		{name: "404", url: notFound.URL},
		{name: "not a URL", url: "ftp://x/"},
		{name: "userinfo", url: "http://a:" + testSecret + "@127.0.0.1:1/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCaller(Options{Timeout: 5 * time.Second})
			_, err := c.ListMCP(context.Background(), tc.url, cred)
			var ue *UpstreamError
			require.ErrorAs(t, err, &ue)
			require.NotContains(t, err.Error(), testSecret)

			res, err := c.CallMCP(context.Background(), tc.url, cred, "echo", nil)
			require.NoError(t, err)
			require.True(t, res.IsError)
			require.True(t, strings.HasPrefix(blockText(t, res), "the MCP upstream could not be reached: "), "%s", blockText(t, res))
			require.NotContains(t, blockText(t, res), testSecret)
		})
	}
}

func TestMCPEgressPolicy(t *testing.T) {
	t.Parallel()
	u := newMCPUpstream(t, 0)
	// The default policy: public addresses only, so loopback is refused.
	_, err := New(egress.NewClient(egress.Options{}), Options{}).ListMCP(context.Background(), u.srv.URL, nil)
	var ue *UpstreamError
	require.ErrorAs(t, err, &ue)
	require.Contains(t, err.Error(), "not public and not allowed")
	require.False(t, errors.Is(err, context.Canceled))
}

// TestMCPNoLeak checks a session leaves no goroutine behind, also when the
// upstream is still busy at the timeout. Not parallel: goleak sees the
// whole process.
func TestMCPNoLeak(t *testing.T) {
	// The upstream keeps the session of the timed-out call (its DELETE
	// came after the deadline, so it was never sent): that goroutine is the
	// test server's, not the caller's.
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(),
		goleak.IgnoreTopFunction("github.com/modelcontextprotocol/go-sdk/mcp.(*streamableServerConn).Read"))
	client := egress.NewClient(egress.Options{Policy: egress.AllowAll})
	// The timeout only has to end the slow tool's call; the echo before
	// it must fit well inside it even on a loaded machine (300 ms did not).
	c := New(client, Options{Timeout: 2 * time.Second})
	// In a subtest, so the upstream's cleanups (release the slow tool,
	// close) run before the check.
	t.Run("calls", func(t *testing.T) {
		u := newMCPUpstream(t, 0)
		_, err := c.ListMCP(context.Background(), u.srv.URL, nil)
		require.NoError(t, err)
		res, err := c.CallMCP(context.Background(), u.srv.URL, nil, "echo", map[string]any{"text": "x"})
		require.NoError(t, err)
		require.False(t, res.IsError)
		res, err = c.CallMCP(context.Background(), u.srv.URL, nil, "slow", nil)
		require.NoError(t, err)
		require.True(t, res.IsError)
	})
	client.CloseIdleConnections()
}
