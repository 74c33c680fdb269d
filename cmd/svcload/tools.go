package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	apiv1 "svc/gen/svc/v1"
)

// The tools group: what invoking a tool through svc adds over calling its
// upstream directly. An upstream in this process on 127.0.0.1 answers
// GET /ping?n=N and, at /mcp, an MCP server (Streamable HTTP, go-sdk)
// whose tool ping does the same; the broker holds a custom tool bound to
// the first and an MCP source at the second (SVC_EGRESS_ALLOW lets it
// reach loopback). Each run makes the same calls directly and through
// POST /tool-sources/…/invoke over REST and gRPC, one caller at a time and
// with a few concurrent callers, and reports latency and the overhead.
// Every answer is checked: a call counts when it carries its own n.
const (
	toolCaller   = "toolcaller" // the member the tools are bound to
	toolHTTPSlug = "bench-http"
	toolMCPSlug  = "bench-mcp"
	toolName     = "ping"
	toolWarmup   = 20 // unmeasured calls per path before its runs
	// toolPhaseCap bounds one run, so a slow broker shortens the figures
	// instead of eating the run budget.
	toolPhaseCap = time.Minute
	// minCPUWindow is the shortest run whose CPU use is reported: /proc
	// counts in 10 ms ticks.
	minCPUWindow = 500 * time.Millisecond
)

// toolCallers are the concurrent callers of the runs: one at a time, then
// a few.
var toolCallers = []int{1, 4}

// toolCalls is the calls per run.
func (p plan) toolCalls() int {
	if p.name == "quick" {
		return 100
	}
	return 1000
}

// toolCall makes call i and returns an error unless the answer is the
// upstream's for i.
type toolCall func(ctx context.Context, i int) error

// toolPath is one way of making the calls of a run; short names it as
// the baseline of the others.
type toolPath struct {
	name, short string
	call        toolCall
}

// counted wraps call to count the calls answered right in n.
func counted(call toolCall, n *atomic.Int64) toolCall {
	return func(ctx context.Context, i int) error {
		err := call(ctx, i)
		if err == nil {
			n.Add(1)
		}
		return err
	}
}

// tools runs the group: the upstream, the sources, then per upstream kind
// and number of callers a run of each path.
func (lg *loadgen) tools(ctx context.Context) error {
	up, err := startToolUpstream()
	if err != nil {
		return err
	}
	defer up.close()
	if err := lg.toolSetup(ctx, up); err != nil {
		return err
	}
	conn, err := grpc.NewClient(lg.b.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	grpcClient := apiv1.NewToolSourcesClient(conn)

	direct := up.directClient()
	defer direct.CloseIdleConnections()
	maxCallers := toolCallers[len(toolCallers)-1]
	sessions, err := newMCPPool(ctx, direct, up.mcpURL(), maxCallers)
	if err != nil {
		return err
	}
	defer sessions.close()

	kinds := []struct {
		label, slug string
		direct      []toolPath // the first is the baseline of the overheads
	}{
		{"HTTP", toolHTTPSlug, []toolPath{{"direct HTTP", "direct", up.httpCall(direct)}}},
		{"MCP", toolMCPSlug, []toolPath{
			{"direct MCP, one session per caller", "one session", sessions.call},
			{"direct MCP, a session per call (as svc does)", "", up.mcpSessionCall(direct)},
		}},
	}
	// invoked counts the invokes through svc answered right: each leaves
	// a tool_action row.
	var invoked atomic.Int64
	for _, k := range kinds {
		paths := append(k.direct,
			toolPath{"via svc REST", "", counted(lg.restInvoke(k.slug), &invoked)},
			toolPath{"via svc gRPC", "", counted(lg.grpcInvoke(grpcClient, k.slug), &invoked)})
		for _, p := range paths {
			if err := warmUp(ctx, p.call); err != nil {
				return fmt.Errorf("tools %s %s: warm-up: %w", k.label, p.name, err)
			}
		}
		for _, callers := range toolCallers {
			if err := lg.toolRun(ctx, k.label, callers, paths); err != nil {
				return err
			}
		}
	}
	return lg.toolVerify(ctx, int(invoked.Load()))
}

func warmUp(ctx context.Context, call toolCall) error {
	for i := range toolWarmup {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		err := call(cctx, i)
		cancel()
		if err != nil {
			return err
		}
	}
	return nil
}

// toolRun makes lg.toolCalls() calls on each path with callers concurrent
// callers and reports each path's latency; every path after the first
// also its overhead over the first.
func (lg *loadgen) toolRun(ctx context.Context, label string, callers int, paths []toolPath) error {
	n := lg.toolCalls()
	var base []time.Duration
	for k, p := range paths {
		name := fmt.Sprintf("  %s", p.name)
		if k == 0 {
			name = fmt.Sprintf("tool call %s, %s (%d): %s", label, countN(callers, "caller"), n, p.name)
		}
		progress("%s", strings.TrimSpace(name))
		cpu := lg.startCPU()
		s := closedLoop(ctx, n, callers, toolPhaseCap, p.call)
		cpuUse := cpu()
		if err := context.Cause(ctx); err != nil {
			return err
		}
		if s.elapsed < minCPUWindow {
			cpuUse = "n/a: run under " + minCPUWindow.String()
		}
		result := fmt.Sprintf("%s, %.0f calls/s", pctls(s.lats), s.rate()) // sorts s.lats
		if k == 0 {
			base = s.lats
		} else {
			result += "; " + overhead(base, s.lats) + " over " + paths[0].short
		}
		lg.rows = append(lg.rows, row{name: name, result: result, cpu: cpuUse})
		if s.fails > 0 || s.skipped > 0 {
			lg.rows = append(lg.rows, row{
				name:   "    failed/skipped",
				result: fmt.Sprintf("%d failed, %d not started of %d", s.fails, s.skipped, s.n),
				target: "0 / 0", met: verdict(false),
			})
		}
		if s.fails > 0 {
			lg.broken = append(lg.broken, fmt.Errorf("tools %s %s, %s: %d of %d failed, first: %w",
				label, p.name, countN(callers, "caller"), s.fails, s.n, s.firstErr))
		}
	}
	return nil
}

// overhead formats what via adds over base at p50 and p99, in ms and as
// a ratio; both are sorted.
func overhead(base, via []time.Duration) string {
	if len(base) == 0 || len(via) == 0 {
		return "overhead n/a: no samples"
	}
	part := func(p float64) string {
		b, v := percentile(base, p), percentile(via, p)
		ratio := "n/a"
		if b > 0 {
			ratio = strconv.FormatFloat(float64(v)/float64(b), 'f', 1, 64) + "x"
		}
		return fmt.Sprintf("p%.0f %+.2f ms (%s)", p, float64(v-b)/1e6, ratio)
	}
	return part(50) + ", " + part(99)
}

// pingAnswer is what the upstream answers call n, as the text of a tool
// result.
func pingAnswer(n int) string { return `{"ok":true,"n":` + strconv.Itoa(n) + `}` }

// checkText is nil when text is the answer to call n.
func checkText(text string, isError bool, n int) error {
	if isError {
		return fmt.Errorf("isError: %.200s", text)
	}
	if text != pingAnswer(n) {
		return fmt.Errorf("answered %.200q, want %q", text, pingAnswer(n))
	}
	return nil
}

// toolUpstream is the group's upstream: GET /ping and the MCP endpoint
// /mcp on one loopback listener.
type toolUpstream struct {
	srv  *http.Server
	base string // http://127.0.0.1:port
}

func startToolUpstream() (*toolUpstream, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "svcload-upstream", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{
		Name: toolName, Description: "Answers its n.",
		InputSchema: json.RawMessage(`{"type":"object","required":["n"],"properties":{"n":{"type":"integer"}}}`),
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in struct {
			N *float64 `json:"n"`
		}
		if err := json.Unmarshal(req.Params.Arguments, &in); err != nil || in.N == nil || *in.N != float64(int(*in.N)) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "n must be an integer"}}}, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: pingAnswer(int(*in.N))}}}, nil
	})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ping", pingHandler)
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	u := &toolUpstream{srv: &http.Server{Handler: mux, ReadHeaderTimeout: callTimeout}, base: "http://" + l.Addr().String()}
	go func() { _ = u.srv.Serve(l) }()
	return u, nil
}

// pingHandler answers GET /ping?n=N, N a decimal integer.
func pingHandler(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.Atoi(r.URL.Query().Get("n"))
	if err != nil {
		http.Error(w, "n must be an integer", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, pingAnswer(n))
}

func (u *toolUpstream) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if u.srv.Shutdown(ctx) != nil {
		_ = u.srv.Close()
	}
}

func (u *toolUpstream) mcpURL() string { return u.base + "/mcp" }

// directClient is the HTTP client of the direct calls: kept-alive
// connections, as the broker's egress client keeps them.
func (u *toolUpstream) directClient() *http.Client {
	return &http.Client{Timeout: callTimeout, Transport: &http.Transport{
		MaxIdleConnsPerHost: 64, DisableCompression: true,
	}}
}

// httpCall is a direct GET of the upstream.
func (u *toolUpstream) httpCall(c *http.Client) toolCall {
	return func(ctx context.Context, i int) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.base+"/ping?n="+strconv.Itoa(i), nil)
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return statusError(resp)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		return checkText(string(body), false, i)
	}
}

// mcpTransport is a Streamable HTTP client transport as the broker sets
// one up: no standalone stream, no reconnection.
func mcpTransport(c *http.Client, endpoint string) *mcp.StreamableClientTransport {
	return &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: c, MaxRetries: -1, DisableStandaloneSSE: true}
}

var mcpClientImpl = &mcp.Implementation{Name: "svcload", Version: "1"}

// mcpResultText checks a CallToolResult of one text block and returns it.
func mcpResultText(res *mcp.CallToolResult) (string, bool, error) {
	if len(res.Content) != 1 {
		return "", false, fmt.Errorf("%d content blocks, want 1", len(res.Content))
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		return "", false, fmt.Errorf("a %T block, want text", res.Content[0])
	}
	return tc.Text, res.IsError, nil
}

// mcpSessionCall opens a session for each call, as the broker does.
func (u *toolUpstream) mcpSessionCall(c *http.Client) toolCall {
	client := mcp.NewClient(mcpClientImpl, nil)
	return func(ctx context.Context, i int) error {
		cs, err := client.Connect(ctx, mcpTransport(c, u.mcpURL()), nil)
		if err != nil {
			return err
		}
		defer cs.Close()
		return callPing(ctx, cs, i)
	}
}

func callPing(ctx context.Context, cs *mcp.ClientSession, i int) error {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: toolName, Arguments: map[string]any{"n": i}})
	if err != nil {
		return err
	}
	text, isErr, err := mcpResultText(res)
	if err != nil {
		return err
	}
	return checkText(text, isErr, i)
}

// mcpPool holds one open session per caller: a client that talks to the
// MCP server directly keeps its session.
type mcpPool struct {
	all  []*mcp.ClientSession
	free chan *mcp.ClientSession
}

func newMCPPool(ctx context.Context, c *http.Client, endpoint string, n int) (*mcpPool, error) {
	p := &mcpPool{free: make(chan *mcp.ClientSession, n)}
	client := mcp.NewClient(mcpClientImpl, nil)
	for range n {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		cs, err := client.Connect(cctx, mcpTransport(c, endpoint), nil)
		cancel()
		if err != nil {
			p.close()
			return nil, fmt.Errorf("tools: MCP session: %w", err)
		}
		p.all = append(p.all, cs)
		p.free <- cs
	}
	return p, nil
}

func (p *mcpPool) call(ctx context.Context, i int) error {
	var cs *mcp.ClientSession
	select {
	case cs = <-p.free:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	defer func() { p.free <- cs }()
	return callPing(ctx, cs, i)
}

func (p *mcpPool) close() {
	for _, cs := range p.all {
		_ = cs.Close()
	}
}

// invokeAnswer is the part of an InvokeTool answer the runs check.
type invokeAnswer struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	IsError bool `json:"isError"`
}

// restInvoke invokes the ping tool of slug over REST as the tool caller.
func (lg *loadgen) restInvoke(slug string) toolCall {
	path := "/tool-sources/" + url.PathEscape(slug) + "/tools/" + toolName + "/invoke"
	return func(ctx context.Context, i int) error {
		var out invokeAnswer
		body := []byte(`{"args":{"n":` + strconv.Itoa(i) + `}}`)
		if err := lg.send(ctx, http.MethodPost, path, lg.tokens[toolCaller], body, &out); err != nil {
			return err
		}
		if len(out.Content) != 1 || out.Content[0].Type != "text" {
			return fmt.Errorf("content %+v, want one text block", out.Content)
		}
		return checkText(out.Content[0].Text, out.IsError, i)
	}
}

// grpcInvoke invokes the ping tool of slug over gRPC as the tool caller.
func (lg *loadgen) grpcInvoke(c apiv1.ToolSourcesClient, slug string) toolCall {
	return func(ctx context.Context, i int) error {
		args, err := structpb.NewStruct(map[string]any{"n": i})
		if err != nil {
			return err
		}
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+lg.tokens[toolCaller])
		res, err := c.InvokeTool(ctx, &apiv1.InvokeToolRequest{Slug: slug, Name: toolName, Args: args})
		if err != nil {
			return err
		}
		if len(res.GetContent()) != 1 {
			return fmt.Errorf("%d content blocks, want 1", len(res.GetContent()))
		}
		block := res.GetContent()[0].GetStructValue().GetFields()
		if block["type"].GetStringValue() != "text" {
			return fmt.Errorf("block %v, want text", block)
		}
		return checkText(block["text"].GetStringValue(), res.GetIsError(), i)
	}
}

// send sends one request with a bearer token and a JSON body (nil: none)
// and decodes a 2xx answer into out (when not nil).
func (lg *loadgen) send(ctx context.Context, method, path, token string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, lg.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := lg.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return statusError(resp)
	}
	if out == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// toolSetup creates the tool caller, a custom source with the ping tool
// and an MCP source at the upstream, both bound to the caller, and
// refreshes the MCP source.
func (lg *loadgen) toolSetup(ctx context.Context, up *toolUpstream) error {
	if err := lg.createMember(ctx, toolCaller); err != nil {
		return err
	}
	admin := lg.tokens["admin"]
	j := func(v any) []byte { b, _ := json.Marshal(v); return b }
	steps := []struct {
		method, path string
		body         any
	}{
		{http.MethodPost, "/tool-sources", map[string]any{"slug": toolHTTPSlug, "kind": "custom"}},
		{http.MethodPut, "/tool-sources/" + toolHTTPSlug + "/tools/" + toolName, map[string]any{
			"description": "Answers its n.",
			"inputSchema": map[string]any{"type": "object", "required": []string{"n"}, "properties": map[string]any{"n": map[string]any{"type": "integer"}}},
			"binding":     map[string]any{"method": "GET", "url": up.base + "/ping?n={{args.n}}"},
		}},
		{http.MethodPost, "/tool-sources/" + toolHTTPSlug + "/bindings", map[string]any{"member": toolCaller}},
		{http.MethodPost, "/tool-sources", map[string]any{"slug": toolMCPSlug, "kind": "mcp", "config": map[string]any{"url": up.mcpURL()}}},
		{http.MethodPost, "/tool-sources/" + toolMCPSlug + "/bindings", map[string]any{"member": toolCaller}},
	}
	for _, s := range steps {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		err := lg.send(cctx, s.method, s.path, admin, j(s.body), nil)
		cancel()
		if err != nil {
			return fmt.Errorf("tools setup: %w", err)
		}
	}
	var refreshed struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
		Changed bool `json:"changed"`
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if err := lg.send(cctx, http.MethodPost, "/tool-sources/"+toolMCPSlug+"/refresh", admin, []byte(`{}`), &refreshed); err != nil {
		return fmt.Errorf("tools setup: %w", err)
	}
	if len(refreshed.Tools) != 1 || refreshed.Tools[0].Name != toolName || !refreshed.Changed {
		return fmt.Errorf("tools setup: refresh of the MCP source answered %+v, want the one tool %s", refreshed, toolName)
	}
	return nil
}

// toolVerify reads the tool caller's newest tool_action rows: each of
// the made invokes through svc that answered right records one, so the
// newest must all be successful calls of the two ping tools, as many as
// were made (up to the 1,000 a list holds).
func (lg *loadgen) toolVerify(ctx context.Context, made int) error {
	want := min(made, 1000)
	if want == 0 {
		lg.rows = append(lg.rows, row{name: "  verify tool_action rows", result: "no invoke answered right", target: "= made", met: verdict(false)})
		lg.broken = append(lg.broken, errors.New("tools: no invoke through svc answered right"))
		return nil
	}
	var out struct {
		Activity []struct {
			Kind string `json:"kind"`
			Data struct {
				Tool    string `json:"tool"`
				Success bool   `json:"success"`
			} `json:"data"`
		} `json:"activity"`
	}
	path := fmt.Sprintf("/members/%s/activity?kind=tool_action&limit=%d", toolCaller, want)
	if err := lg.get(ctx, path, lg.tokens[toolCaller], &out); err != nil {
		return fmt.Errorf("tools verify: %w", err)
	}
	good := 0
	for _, a := range out.Activity {
		if a.Kind == "tool_action" && a.Data.Success &&
			(a.Data.Tool == toolHTTPSlug+"__"+toolName || a.Data.Tool == toolMCPSlug+"__"+toolName) {
			good++
		}
	}
	ok := good == want && len(out.Activity) == want
	lg.rows = append(lg.rows, row{
		name:   "  verify tool_action rows",
		result: fmt.Sprintf("%d of the newest %d rows are successful ping calls (%d invokes made)", good, want, made),
		target: "= made", met: verdict(ok),
	})
	if !ok {
		lg.broken = append(lg.broken, errors.New("tools: the tool caller's activity does not hold a successful tool_action row per invoke"))
	}
	return nil
}
