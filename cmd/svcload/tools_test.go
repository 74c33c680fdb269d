package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	apiv1 "svc/gen/svc/v1"
)

// toolFake is a broker for the tools group: the REST routes the group
// calls and ToolSources.InvokeTool over gRPC, on one cleartext listener.
// Invokes really call the upstream the sources name (the binding's URL
// with {{args.n}} substituted, or the MCP endpoint) and append a
// tool_action row; wrong, when set, spoils the answer of some calls.
type toolFake struct {
	apiv1.UnimplementedToolSourcesServer

	mu       sync.Mutex
	wrong    func(slug, transport string, n int) bool // called with mu held
	binding  string                                   // the custom tool's URL
	mcpURL   string                                   // the MCP source's config.url
	bound    map[string]string                        // slug → member
	actions  []toolActionRow                          // oldest first
	invokes  map[string]int                           // by transport
	sessions *mcp.Client
}

type toolActionRow struct {
	tool    string
	success bool
}

func (f *toolFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	member, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer svc_")
	if member == "" {
		http.Error(w, "no token", http.StatusUnauthorized)
		return
	}
	var in map[string]any
	if r.Method != http.MethodGet {
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	}
	path := r.URL.Path
	switch {
	case r.Method == http.MethodPost && path == "/members":
		writeJSON(w, map[string]any{"token": "svc_" + in["name"].(string)})
	case r.Method == http.MethodPost && path == "/tool-sources":
		f.mu.Lock()
		if in["kind"] == "mcp" {
			f.mcpURL = in["config"].(map[string]any)["url"].(string)
		}
		f.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		writeJSON(w, map[string]any{"slug": in["slug"]})
	case r.Method == http.MethodPut && path == "/tool-sources/"+toolHTTPSlug+"/tools/"+toolName:
		b, _ := in["binding"].(map[string]any)
		if b["method"] != "GET" {
			http.Error(w, "want a GET binding", http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.binding, _ = b["url"].(string)
		f.mu.Unlock()
		writeJSON(w, map[string]any{"slug": toolHTTPSlug})
	case r.Method == http.MethodPost && strings.HasSuffix(path, "/bindings"):
		slug := strings.TrimSuffix(strings.TrimPrefix(path, "/tool-sources/"), "/bindings")
		f.mu.Lock()
		f.bound[slug] = in["member"].(string)
		f.mu.Unlock()
		writeJSON(w, map[string]any{"slug": slug})
	case r.Method == http.MethodPost && path == "/tool-sources/"+toolMCPSlug+"/refresh":
		writeJSON(w, map[string]any{"tools": []any{map[string]any{"name": toolName}}, "changed": true})
	case r.Method == http.MethodPost && strings.HasSuffix(path, "/tools/"+toolName+"/invoke"):
		slug := strings.TrimSuffix(strings.TrimPrefix(path, "/tool-sources/"), "/tools/"+toolName+"/invoke")
		args, _ := in["args"].(map[string]any)
		text, isErr, err := f.invoke(r.Context(), member, slug, "rest", args)
		if err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		writeJSON(w, map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}, "isError": isErr})
	case r.Method == http.MethodGet && path == "/members/"+toolCaller+"/activity":
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		f.mu.Lock()
		rows := []any{}
		for i := len(f.actions) - 1; i >= 0 && len(rows) < limit; i-- {
			a := f.actions[i]
			rows = append(rows, map[string]any{"kind": "tool_action", "data": map[string]any{"tool": a.tool, "success": a.success}})
		}
		f.mu.Unlock()
		writeJSON(w, map[string]any{"activity": rows})
	default:
		http.NotFound(w, r)
	}
}

// invoke calls the upstream of slug as a broker would and records the
// tool_action row.
func (f *toolFake) invoke(ctx context.Context, member, slug, transport string, args map[string]any) (string, bool, error) {
	f.mu.Lock()
	binding, mcpURL, bound := f.binding, f.mcpURL, f.bound[slug]
	f.invokes[transport]++
	f.mu.Unlock()
	if bound != member {
		return "", false, fmt.Errorf("%s is not bound to %s", member, slug)
	}
	n, ok := args["n"].(float64)
	if !ok {
		return "", false, errors.New("no n")
	}
	var text string
	var isErr bool
	var err error
	switch slug {
	case toolHTTPSlug:
		text, err = getText(ctx, strings.ReplaceAll(binding, "{{args.n}}", strconv.Itoa(int(n))))
	case toolMCPSlug:
		var cs *mcp.ClientSession
		if cs, err = f.sessions.Connect(ctx, mcpTransport(http.DefaultClient, mcpURL), nil); err == nil {
			var res *mcp.CallToolResult
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: toolName, Arguments: args})
			if err == nil {
				text, isErr, err = mcpResultText(res)
			}
			_ = cs.Close()
		}
	default:
		return "", false, fmt.Errorf("no source %s", slug)
	}
	if err != nil {
		text, isErr = err.Error(), true
	}
	f.mu.Lock()
	if f.wrong != nil && f.wrong(slug, transport, int(n)) {
		text, isErr = "the tool broke", true
	}
	f.actions = append(f.actions, toolActionRow{tool: slug + "__" + toolName, success: !isErr})
	f.mu.Unlock()
	return text, isErr, nil
}

func getText(ctx context.Context, u string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("upstream answered %s", resp.Status)
	}
	return string(b), err
}

// InvokeTool implements apiv1.ToolSourcesServer.
func (f *toolFake) InvokeTool(ctx context.Context, req *apiv1.InvokeToolRequest) (*apiv1.InvokeToolResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	auth := md.Get("authorization")
	if len(auth) != 1 || !strings.HasPrefix(auth[0], "Bearer svc_") {
		return nil, status.Error(codes.Unauthenticated, "no token")
	}
	if req.GetName() != toolName {
		return nil, status.Error(codes.NotFound, "no tool")
	}
	text, isErr, err := f.invoke(ctx, strings.TrimPrefix(auth[0], "Bearer svc_"), req.GetSlug(), "grpc", req.GetArgs().AsMap())
	if err != nil {
		return nil, status.Error(codes.PermissionDenied, err.Error())
	}
	block, err := structpb.NewValue(map[string]any{"type": "text", "text": text})
	if err != nil {
		return nil, err
	}
	return &apiv1.InvokeToolResponse{Content: []*structpb.Value{block}, IsError: isErr}, nil
}

// mustToolLoadgen serves f (REST and gRPC) on 127.0.0.1 and returns a
// loadgen pointed at it with short runs.
func mustToolLoadgen(t *testing.T, f *toolFake) *loadgen {
	t.Helper()
	f.bound, f.invokes = map[string]string{}, map[string]int{}
	f.sessions = mcp.NewClient(&mcp.Implementation{Name: "fake-broker", Version: "1"}, nil)
	gs := grpc.NewServer()
	apiv1.RegisterToolSourcesServer(gs, f)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Protocols: new(http.Protocols), Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
			gs.ServeHTTP(w, r)
			return
		}
		f.ServeHTTP(w, r)
	})}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	b := &broker{pid: os.Getpid(), addr: l.Addr().String(), token: "svc_admin", dir: t.TempDir()}
	lg := newLoadgen(quickPlan, b)
	t.Cleanup(lg.close)
	return lg
}

func TestToolsGroup(t *testing.T) {
	f := &toolFake{}
	lg := mustToolLoadgen(t, f)
	require.NoError(t, lg.tools(context.Background()))
	require.NoError(t, lg.brokenErr())

	// Per kind and number of callers a row per path: HTTP has one direct
	// path, MCP two; then the verify row.
	n := lg.toolCalls()
	require.Len(t, lg.rows, len(toolCallers)*(3+4)+1)
	for _, r := range lg.rows[:len(lg.rows)-1] {
		require.Nil(t, r.met, "no failure row: %+v", r)
		require.Contains(t, r.result, "calls/s")
	}
	require.Equal(t, fmt.Sprintf("tool call HTTP, 1 caller (%d): direct HTTP", n), lg.rows[0].name)
	require.Contains(t, lg.rows[1].result, "over direct")
	require.Contains(t, lg.rows[6].name, "tool call MCP, 1 caller")
	require.Contains(t, lg.rows[7].result, "over one session")
	verify := lg.rows[len(lg.rows)-1]
	require.True(t, *verify.met, verify.result)
	made := 2 * (toolWarmup + len(toolCallers)*n) // per transport: two kinds
	require.Equal(t, map[string]int{"rest": made, "grpc": made}, f.invokes)
	require.Contains(t, verify.result, fmt.Sprintf("(%d invokes made)", 2*made))
	require.Len(t, f.actions, 2*made)
}

// A wrong answer is a failed call: it breaks the run, and its failed
// tool_action row spoils the check of the activity.
func TestToolsGroupWrongAnswer(t *testing.T) {
	spoiled := false // once: in the run with one caller
	f := &toolFake{wrong: func(slug, transport string, n int) bool {
		if spoiled || slug != toolMCPSlug || transport != "grpc" || n != toolWarmup+7 {
			return false
		}
		spoiled = true
		return true
	}}
	lg := mustToolLoadgen(t, f)
	require.NoError(t, lg.tools(context.Background()))
	err := lg.brokenErr()
	require.ErrorContains(t, err, "tools MCP via svc gRPC, 1 caller: 1 of")
	require.ErrorContains(t, err, "isError: the tool broke")
	require.ErrorContains(t, err, "does not hold a successful tool_action row per invoke")
	var failed int
	for _, r := range lg.rows {
		if strings.TrimSpace(r.name) == "failed/skipped" {
			failed++
			require.False(t, *r.met)
		}
	}
	require.Equal(t, 1, failed, "one failure row: the 1-caller MCP gRPC run")
	require.False(t, *lg.rows[len(lg.rows)-1].met)
}

func TestToolUpstream(t *testing.T) {
	up, err := startToolUpstream()
	require.NoError(t, err)
	defer up.close()
	c := up.directClient()
	defer c.CloseIdleConnections()
	ctx := context.Background()
	require.NoError(t, up.httpCall(c)(ctx, 42))
	require.NoError(t, up.mcpSessionCall(c)(ctx, 43))
	pool, err := newMCPPool(ctx, c, up.mcpURL(), 2)
	require.NoError(t, err)
	defer pool.close()
	require.NoError(t, pool.call(ctx, 44))

	text, err := getText(ctx, up.base+"/ping?n=7")
	require.NoError(t, err)
	require.Equal(t, `{"ok":true,"n":7}`, text)
	_, err = getText(ctx, up.base+"/ping?n=x")
	require.ErrorContains(t, err, "400")

	require.NoError(t, checkText(`{"ok":true,"n":7}`, false, 7))
	require.ErrorContains(t, checkText(`{"ok":true,"n":7}`, false, 8), "want")
	require.ErrorContains(t, checkText(`{"ok":true,"n":7}`, true, 7), "isError")
}

func TestOverhead(t *testing.T) {
	ms := func(v ...float64) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x * 1e6)
		}
		return out
	}
	require.Equal(t, "p50 +2.00 ms (3.0x), p99 +6.00 ms (4.0x)", overhead(ms(1, 2), ms(3, 8)))
	require.Equal(t, "p50 -0.50 ms (0.5x), p99 -0.50 ms (0.5x)", overhead(ms(1), ms(0.5)))
	require.Equal(t, "overhead n/a: no samples", overhead(nil, ms(1)))
}
