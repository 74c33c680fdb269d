package e2e

// End-to-end tests of tool sources against real upstreams (docs/API.md
// "Tool sources", docs/TOOLCALL.md): a custom tool's binding is validated
// at save and substituted at invoke against an HTTP server on loopback, an
// MCP source is refreshed and called against the reference server-everything
// and in-process go-sdk servers, and each call's tool_action row keeps no
// credential or secret value. The broker may reach loopback
// (SVC_EGRESS_ALLOW=127.0.0.1); everything else about it is as shipped.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"svc/cmd/svc/internal/mcptest"
)

// toolEgress lets the broker's tool calls reach the test's loopback
// upstreams; the default policy refuses loopback.
const toolEgress = "SVC_EGRESS_ALLOW=127.0.0.1"

// seenRequest is one request an httpUpstream received.
type seenRequest struct {
	method string
	uri    string // the request target as sent: escaped path and query
	header http.Header
	body   []byte
}

// httpUpstream is a custom tool's upstream on 127.0.0.1. It records every
// request; /fail/... answers 500, anything else 200 with a JSON object
// echoing the X-Api-Key header it got and the escaped path.
type httpUpstream struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []seenRequest
}

func newHTTPUpstream(t testing.TB) *httpUpstream {
	t.Helper()
	u := &httpUpstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.reqs = append(u.reqs, seenRequest{method: r.Method, uri: r.RequestURI, header: r.Header.Clone(), body: body})
		u.mu.Unlock()
		if strings.HasPrefix(r.URL.Path, "/fail/") {
			http.Error(w, "boom: the upstream broke", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(obj{"ok": true, "key": r.Header.Get("X-Api-Key"), "path": r.URL.EscapedPath()})
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *httpUpstream) requests() []seenRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.reqs)
}

// randomHex is n random bytes in hex: values no fixture shares.
func randomHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// invoke calls a tool as c and requires a 200 with the CallToolResult
// shape; it returns the result and the text of its one text block.
func invoke(t testing.TB, d driver, c cred, slug, name string, args obj) (obj, string) {
	t.Helper()
	req := obj{"slug": slug, "name": name}
	if args != nil {
		req["args"] = args
	}
	res := mustCall(t, d, c, "InvokeTool", req)
	_, ok := res["isError"].(bool)
	require.True(t, ok, "isError is a boolean: %v", res)
	content := listOf(t, res, "content")
	require.Len(t, content, 1, "one content block: %v", res)
	require.Equal(t, "text", content[0]["type"], "a text block: %v", res)
	text, ok := content[0]["text"].(string)
	require.True(t, ok, "the block's text is a string: %v", res)
	return res, text
}

// toolNames lists the names of a list of tool definitions.
func toolNames(t testing.TB, v any) []string {
	t.Helper()
	raw, ok := v.([]any)
	require.True(t, ok, "tools must be a list: %#v", v)
	var out []string
	for _, x := range raw {
		tool, ok := x.(obj)
		require.True(t, ok, "tools are objects: %#v", v)
		out = append(out, tool["name"].(string))
	}
	return out
}

// toolActions lists member's tool_action rows as c, newest first.
func toolActions(t testing.TB, p *proc, d driver, c cred, member string) []obj {
	t.Helper()
	return mustList(t, p, d, c, member, actQuery{kinds: []string{"tool_action"}})
}

// TestE2EToolsCustomInvoke saves a custom tool with a real binding, calls
// it as a bound member against a loopback upstream, and reads back what
// the upstream got, what the caller got and what the activity kept.
func TestE2EToolsCustomInvoke(t *testing.T) {
	onEachTransportEnv(t, []string{toolEgress}, func(t *testing.T, p *proc, admin cred, d driver) {
		up := newHTTPUpstream(t)
		credSecret := "cred-" + randomHex(t, 12)
		boundValue := "bound-" + randomHex(t, 12)
		teamValue := "team-" + randomHex(t, 12)
		bob := bearer(createMember(t, d, admin, "bob"))

		// bob may use two secrets: one bound to him, one for everybody.
		mustCall(t, d, admin, "CreateSecret", obj{"slug": "mine", "envName": "MINE"})
		mustCall(t, d, admin, "SetSecretValue", obj{"slug": "mine", "value": boundValue})
		mustCall(t, d, admin, "AddSecretBinding", obj{"slug": "mine", "member": "bob"})
		mustCall(t, d, admin, "CreateSecret", obj{"slug": "team", "envName": "TEAM", "allMembers": true})
		mustCall(t, d, admin, "SetSecretValue", obj{"slug": "team", "value": teamValue})

		mustCall(t, d, admin, "CreateToolSource", obj{"slug": "gh", "kind": "custom"})
		mustCall(t, d, admin, "SetToolCredential", obj{"slug": "gh", "kind": "header", "headerName": "X-Api-Key", "secret": credSecret})
		mustCall(t, d, admin, "AddToolBinding", obj{"slug": "gh", "member": "bob"})
		schema := obj{"type": "object", "required": []any{"owner", "q", "n", "flag", "labels", "meta", "trace", "title"}}
		binding := obj{
			"method": "POST",
			"url":    up.srv.URL + "/repos/{{args.owner}}/issues?q={{args.q}}&n={{args.n}}&static=1",
			"headers": obj{
				"X-Trace": "trace-{{ args.trace }}",
				"Accept":  "application/json",
			},
			"body": obj{
				"title":  "{{args.title}}",
				"count":  "{{args.n}}",
				"flag":   "{{args.flag}}",
				"labels": "{{args.labels}}",
				"meta":   "{{args.meta}}",
				"first":  "{{args.labels.0}}",
				"note":   "n={{args.n}} by {{args.owner}}",
				"fixed":  obj{"list": []any{"{{args.trace}}", 7, nil}},
			},
		}
		src := mustCall(t, d, admin, "PutTool", obj{"slug": "gh", "name": "create_issue", "description": "Opens an issue.", "inputSchema": schema, "binding": binding})
		require.Equal(t, float64(1), src["toolCount"])
		tools := listOf(t, src, "tools")
		require.Len(t, tools, 1)
		stored, _ := tools[0]["binding"].(obj)
		require.Equal(t, "POST", stored["method"], "a manager sees the binding: %v", tools[0])
		require.Equal(t, binding["url"], stored["url"])
		require.Equal(t, actJSON(t, binding["headers"]), stored["headers"])
		require.Equal(t, actJSON(t, binding["body"]), stored["body"])
		// A member sees name, description and schema, never the binding.
		bobView := listOf(t, mustCall(t, d, bob, "GetToolSource", obj{"slug": "gh"}), "tools")
		require.Len(t, bobView, 1)
		require.NotContains(t, bobView[0], "binding")
		require.Equal(t, "Opens an issue.", bobView[0]["description"])

		owner := "o w/n?er#é"
		title := "leak " + credSecret + " and " + boundValue
		args := obj{
			"owner": owner, "q": "a&b=c d", "n": 42, "flag": true,
			"labels": []any{"bug", "p1"}, "meta": obj{"k": 1.5, "s": "x"},
			"trace": "t-1", "title": title,
			// Not templated: it only travels into the activity's input.
			"aside": "team=" + teamValue,
		}
		res, text := invoke(t, d, bob, "gh", "create_issue", args)
		require.Equal(t, false, res["isError"], "a 2xx answer: %v", res)

		reqs := up.requests()
		require.Len(t, reqs, 1, "one upstream call")
		got := reqs[0]
		require.Equal(t, http.MethodPost, got.method)
		require.Equal(t, "/repos/o%20w%2Fn%3Fer%23%C3%A9/issues?q=a%26b%3Dc%20d&n=42&static=1", got.uri,
			"each value is one percent-encoded path segment or query value")
		require.Equal(t, "trace-t-1", got.header.Get("X-Trace"))
		require.Equal(t, "application/json", got.header.Get("Accept"))
		require.Equal(t, "application/json", got.header.Get("Content-Type"))
		require.Equal(t, []string{credSecret}, got.header.Values("X-Api-Key"), "the credential, in its header, once")
		require.Empty(t, got.header.Values("Authorization"), "a header credential sends no Authorization")
		var body any
		require.NoError(t, json.Unmarshal(got.body, &body), "the body is JSON: %s", got.body)
		require.Equal(t, actJSON(t, obj{
			"title": title, "count": 42, "flag": true, "labels": []any{"bug", "p1"},
			"meta": obj{"k": 1.5, "s": "x"}, "first": "bug", "note": "n=42 by " + owner,
			"fixed": obj{"list": []any{"t-1", 7, nil}},
		}), body, "whole-string templates keep their JSON types")

		// The answer: the upstream's body as text and, being a JSON object,
		// as structuredContent; the credential it echoed is redacted.
		require.NotContains(t, text, credSecret)
		require.Contains(t, text, `"key":"[REDACTED]"`)
		require.Contains(t, text, `"ok":true`)
		require.Equal(t, obj{"ok": true, "key": "[REDACTED]", "path": "/repos/o%20w%2Fn%3Fer%23%C3%A9/issues"}, res["structuredContent"])

		// A 500 is the tool's failure: 200 with isError and the body.
		mustCall(t, d, admin, "PutTool", obj{"slug": "gh", "name": "broken", "inputSchema": obj{"type": "object"},
			"binding": obj{"method": "GET", "url": up.srv.URL + "/fail/{{args.id}}"}})
		res, text = invoke(t, d, bob, "gh", "broken", obj{"id": "x y"})
		require.Equal(t, true, res["isError"], "an upstream 500: %v", res)
		require.Contains(t, text, "500")
		require.Contains(t, text, "boom: the upstream broke")
		require.Equal(t, "/fail/x%20y", up.requests()[1].uri)

		// A templated argument that is missing is the caller's mistake: 400,
		// and nothing is sent.
		mustFail(t, d, bob, "InvokeTool", obj{"slug": "gh", "name": "broken", "args": obj{"other": 1}}, "bad_request")
		mustFail(t, d, bob, "InvokeTool", obj{"slug": "gh", "name": "create_issue"}, "bad_request")
		require.Len(t, up.requests(), 2, "a refused call reaches no upstream")

		// The activity: one tool_action per call that ran, newest first, its
		// input redacted of the credential and of every secret bob may use.
		rows := toolActions(t, p, d, bob, "bob")
		require.Len(t, rows, 2, "the calls that ran: %v", rows)
		failed, _ := rows[0]["data"].(obj)
		require.Equal(t, "gh__broken", failed["tool"])
		require.Equal(t, false, failed["success"])
		require.Equal(t, obj{"id": "x y"}, failed["input"])
		data, _ := rows[1]["data"].(obj)
		require.Equal(t, "gh__create_issue", data["tool"])
		require.Equal(t, "result", data["phase"])
		require.Equal(t, "broker", data["source"])
		require.Equal(t, "gh", data["toolSource"])
		require.Equal(t, true, data["success"])
		require.GreaterOrEqual(t, actWhole(t, data["durationMs"], "durationMs"), int64(0))
		input, _ := data["input"].(obj)
		require.Equal(t, "leak [REDACTED] and [REDACTED]", input["title"])
		require.Equal(t, "team=[REDACTED]", input["aside"])
		require.Equal(t, owner, input["owner"], "other arguments are kept as given")
		require.Equal(t, float64(42), input["n"])
		raw, err := json.Marshal(rows)
		require.NoError(t, err)
		for _, v := range []string{credSecret, boundValue, teamValue} {
			require.NotContains(t, string(raw), v, "a tool_action row keeps no credential or secret value")
		}
		require.Contains(t, string(raw), "[REDACTED]")
		// The admin, with activity.read, reads the same rows.
		require.Len(t, toolActions(t, p, d, admin, "bob"), 2)
		require.Empty(t, toolActions(t, p, d, admin, "admin"), "the caller's activity only")
	})
}

// TestE2EToolsBindingRefusals: the engine's save-time checks, over the
// wire. Each refusal is 400 bad_request and stores nothing; the binding
// each case mutates is itself accepted.
func TestE2EToolsBindingRefusals(t *testing.T) {
	onEachTransportEnv(t, []string{toolEgress}, func(t *testing.T, p *proc, admin cred, d driver) {
		up := newHTTPUpstream(t)
		hostPort := strings.TrimPrefix(up.srv.URL, "http://")
		mustCall(t, d, admin, "CreateToolSource", obj{"slug": "rf", "kind": "custom"})
		mustCall(t, d, admin, "SetToolCredential", obj{"slug": "rf", "kind": "header", "headerName": "X-Api-Key", "secret": "rf-cred"})
		base := func() obj {
			return obj{
				"method":  "POST",
				"url":     up.srv.URL + "/x/{{args.a}}?q={{args.b}}",
				"headers": obj{"X-Trace": "v-{{args.c}}"},
				"body":    obj{"a": "{{args.a}}"},
			}
		}
		with := func(k string, v any) obj { b := base(); b[k] = v; return b }
		header := func(name, value string) obj { return with("headers", obj{"X-Trace": "v", name: value}) }
		put := func(name string, b obj) result {
			return d.call(t, admin, "PutTool", obj{"slug": "rf", "name": name, "inputSchema": obj{"type": "object"}, "binding": b})
		}
		refusals := []struct {
			name    string
			binding obj
		}{
			{"template in host", with("url", "http://{{args.host}}/x")},
			{"template in host after a dot", with("url", "http://api.{{args.host}}/x")},
			{"template in port", with("url", "http://127.0.0.1:{{args.port}}/x")},
			{"userinfo in origin", with("url", "http://user@"+hostPort+"/x")},
			{"@ after the port", with("url", up.srv.URL+"@example.com/x")},
			{"percent in host", with("url", "http://127.0.0.%31:"+strings.Split(hostPort, ":")[1]+"/x")},
			{"not http", with("url", "ftp://"+hostPort+"/x")},
			{"fragment", with("url", up.srv.URL+"/x#frag")},
			{"dot-dot segment", with("url", up.srv.URL+"/a/../x")},
			{"encoded slash", with("url", up.srv.URL+"/a%2Fb")},
			{"LF in url", with("url", up.srv.URL+"/x\n")},
			{"aUthorization", header("aUthorization", "Bearer x")},
			{"COOKIE", header("COOKIE", "a=b")},
			{"host", header("host", "example.com")},
			{"proxy-AUTHORIZATION", header("proxy-AUTHORIZATION", "x")},
			{"the credential's header, another case", header("x-API-key", "x")},
			{"Content-length", header("Content-length", "1")},
			{"transfer-ENCODING", header("transfer-ENCODING", "chunked")},
			{"one header twice in two cases", header("x-trace", "w")},
			{"CR LF in a header value", header("X-Other", "a\r\nInjected: yes")},
			{"LF in a header value", header("X-Other", "a\nb")},
			{"CR in a header value", header("X-Other", "a\rb")},
			{"NUL in a header value", header("X-Other", "a\x00b")},
			{"space in a header name", header("X Other", "a")},
			{"lowercase method", with("method", "post")},
			{"HEAD", with("method", "HEAD")},
			{"GET with a body", with("method", "GET")},
			{"template in a body key", with("body", obj{"{{args.a}}": 1})},
			{"another template root", with("url", up.srv.URL+"/x/{{env.HOME}}")},
			{"unterminated template", with("url", up.srv.URL+"/x/{{args.a")},
		}
		for _, tc := range refusals {
			r := put("t", tc.binding)
			require.Equal(t, "bad_request", r.code, "%s: %v", tc.name, tc.binding)
		}
		got := mustCall(t, d, admin, "GetToolSource", obj{"slug": "rf"})
		require.Equal(t, float64(0), got["toolCount"], "a refused binding stores nothing")
		require.Empty(t, listOf(t, got, "tools"))

		// The binding every case mutates is valid; a refused PUT leaves the
		// stored tool as it was.
		mustCall(t, d, admin, "PutTool", obj{"slug": "rf", "name": "t", "inputSchema": obj{"type": "object"}, "binding": base()})
		for _, tc := range refusals[:3] {
			require.Equal(t, "bad_request", put("t", tc.binding).code, tc.name)
		}
		tools := listOf(t, mustCall(t, d, admin, "GetToolSource", obj{"slug": "rf"}), "tools")
		require.Len(t, tools, 1)
		require.Equal(t, base()["url"], tools[0]["binding"].(obj)["url"])

		// The header guard holds both ways: a credential whose header a
		// stored binding sets is 409.
		mustCall(t, d, admin, "PutTool", obj{"slug": "rf", "name": "t2", "inputSchema": obj{"type": "object"},
			"binding": with("headers", obj{"X-Other": "v"})})
		mustFail(t, d, admin, "SetToolCredential", obj{"slug": "rf", "kind": "header", "headerName": "x-other", "secret": "s"}, "conflict")
		require.Equal(t, "X-Api-Key", mustCall(t, d, admin, "GetToolSource", obj{"slug": "rf"})["credentialHeaderName"])
		require.Empty(t, up.requests(), "saving calls nothing")
	})
}

// TestE2EToolsInvokeOrder: refusals of invoke come in the documented
// order, and none reaches the upstream.
func TestE2EToolsInvokeOrder(t *testing.T) {
	onEachTransportEnv(t, []string{toolEgress}, func(t *testing.T, p *proc, admin cred, d driver) {
		up := newHTTPUpstream(t)
		carol := bearer(createMember(t, d, admin, "carol"))
		dave := bearer(createMember(t, d, admin, "dave"))
		tool := obj{"inputSchema": obj{"type": "object"}, "binding": obj{"method": "POST", "url": up.srv.URL + "/ord", "body": obj{"x": "{{args.x}}"}}}
		mustCall(t, d, admin, "CreateToolSource", obj{"slug": "ord", "kind": "custom"})
		mustCall(t, d, admin, "PutTool", mergeObj(tool, obj{"slug": "ord", "name": "t"}))

		mustFail(t, d, carol, "InvokeTool", obj{"slug": "nope", "name": "t"}, "not_found")
		mustFail(t, d, carol, "InvokeTool", obj{"slug": "ord", "name": "t", "args": obj{"x": 1}}, "forbidden")
		mustFail(t, d, admin, "InvokeTool", obj{"slug": "ord", "name": "t", "args": obj{"x": 1}}, "forbidden")
		mustCall(t, d, admin, "UpdateToolSource", obj{"slug": "ord", "enabled": false})
		mustFail(t, d, carol, "InvokeTool", obj{"slug": "ord", "name": "nope"}, "forbidden")
		mustCall(t, d, admin, "AddToolBinding", obj{"slug": "ord", "member": "carol"})
		mustFail(t, d, carol, "InvokeTool", obj{"slug": "ord", "name": "nope"}, "conflict")
		mustFail(t, d, carol, "InvokeTool", obj{"slug": "ord", "name": "t", "args": obj{"x": 1}}, "conflict")
		mustCall(t, d, admin, "UpdateToolSource", obj{"slug": "ord", "enabled": true})
		mustFail(t, d, carol, "InvokeTool", obj{"slug": "ord", "name": "nope"}, "not_found")
		big := strings.Repeat("a", 1<<20)
		mustFail(t, d, carol, "InvokeTool", obj{"slug": "ord", "name": "t", "args": obj{"x": big}}, "payload_too_large")
		require.Empty(t, up.requests(), "no refused call reached the upstream")

		res, _ := invoke(t, d, carol, "ord", "t", obj{"x": 1})
		require.Equal(t, false, res["isError"])
		require.Len(t, up.requests(), 1)
		require.JSONEq(t, `{"x":1}`, string(up.requests()[0].body))

		// allMembers covers a member without a binding.
		mustFail(t, d, dave, "InvokeTool", obj{"slug": "ord", "name": "t", "args": obj{"x": 2}}, "forbidden")
		mustCall(t, d, admin, "UpdateToolSource", obj{"slug": "ord", "allMembers": true})
		res, _ = invoke(t, d, dave, "ord", "t", obj{"x": 2})
		require.Equal(t, false, res["isError"])
		require.Len(t, up.requests(), 2)
		require.Len(t, toolActions(t, p, d, carol, "carol"), 1, "refusals leave no tool_action")
		require.Len(t, toolActions(t, p, d, dave, "dave"), 1)
	})
}

func mergeObj(a, b obj) obj {
	out := obj{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// mcpServer is an in-process MCP server over Streamable HTTP on
// 127.0.0.1, serving tools at /mcp, recording the Authorization headers it
// gets.
type mcpServer struct {
	srv  *httptest.Server
	URL  string
	mu   sync.Mutex
	auth []string
}

// mcpTool is one tool of an mcpServer: its handler gets the arguments and
// the request's headers and answers text.
type mcpTool struct {
	name, description string
	schema            string
	call              func(args map[string]any, h http.Header) (string, bool)
}

// startMCPServer serves tools on addr ("127.0.0.1:0" for any port). It
// retries a taken port for a while: the server it replaces may be
// releasing it.
func startMCPServer(t testing.TB, addr string, tools ...mcpTool) *mcpServer {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "svc-e2e", Version: "1"}, nil)
	for _, tool := range tools {
		s.AddTool(&mcp.Tool{Name: tool.name, Description: tool.description, InputSchema: json.RawMessage(tool.schema)},
			func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				var args map[string]any
				if len(req.Params.Arguments) > 0 {
					if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
						return nil, err
					}
				}
				text, isErr := tool.call(args, req.Extra.Header)
				return &mcp.CallToolResult{IsError: isErr, Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil
			})
	}
	m := &mcpServer{}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	mux := http.NewServeMux()
	mux.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		m.auth = append(m.auth, r.Header.Get("Authorization"))
		m.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	var l net.Listener
	deadline := time.Now().Add(10 * time.Second)
	for {
		var err error
		l, err = net.Listen("tcp", addr)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EADDRINUSE) || time.Now().After(deadline) {
			t.Fatalf("listen on %s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	m.srv = httptest.NewUnstartedServer(mux)
	m.srv.Listener.Close()
	m.srv.Listener = l
	m.srv.Start()
	t.Cleanup(m.srv.Close)
	m.URL = m.srv.URL + "/mcp"
	return m
}

func (m *mcpServer) authSeen() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.auth)
}

// closedURL is an MCP URL on a loopback port nothing listens on.
func closedURL(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return "http://" + addr + "/mcp"
}

// TestE2EToolsMCP refreshes and calls an MCP source: the reference
// server-everything, then, on the same port, a go-sdk server with other
// tools, then another server at a URL the source is patched to, then
// nothing.
func TestE2EToolsMCP(t *testing.T) {
	onEachTransportEnv(t, []string{toolEgress}, func(t *testing.T, p *proc, admin cred, d driver) {
		tr := transportOf(d)
		ev := mcptest.Everything(t)
		bob := bearer(createMember(t, d, admin, "bob"))
		mustCall(t, d, admin, "CreateToolSource", obj{"slug": "ev", "kind": "mcp", "config": obj{"url": ev.URL}})
		mustCall(t, d, admin, "AddToolBinding", obj{"slug": "ev", "member": "bob"})

		// Nothing is cached before a refresh: a miss is 404.
		mustFail(t, d, bob, "InvokeTool", obj{"slug": "ev", "name": "echo", "args": obj{"message": "x"}}, "not_found")

		r := mustCall(t, d, admin, "RefreshToolSource", obj{"slug": "ev"})
		require.Equal(t, true, r["changed"], "the first refresh fills the cache")
		names := toolNames(t, r["tools"])
		require.Contains(t, names, "echo", "server-everything lists echo: %v", names)
		require.True(t, slices.IsSorted(names), "tools come sorted by name: %v", names)
		for _, tool := range listOf(t, r, "tools") {
			require.NotContains(t, tool, "binding", "mcp tools have no binding")
			_, ok := tool["inputSchema"].(obj)
			require.True(t, ok, "every schema is an object: %v", tool)
		}
		src := mustCall(t, d, bob, "GetToolSource", obj{"slug": "ev"})
		require.Equal(t, float64(len(names)), src["toolCount"])
		require.Equal(t, names, toolNames(t, src["tools"]))

		r = mustCall(t, d, admin, "RefreshToolSource", obj{"slug": "ev"})
		require.Equal(t, false, r["changed"], "the same list again changes nothing")
		require.Equal(t, names, toolNames(t, r["tools"]))

		msg := "hi from svc over " + tr
		res, text := invoke(t, d, bob, "ev", "echo", obj{"message": msg})
		require.Equal(t, false, res["isError"], "%v", res)
		require.Equal(t, "Echo: "+msg, text)
		rows := toolActions(t, p, d, bob, "bob")
		require.Len(t, rows, 1)
		data, _ := rows[0]["data"].(obj)
		require.Equal(t, "ev__echo", data["tool"])
		require.Equal(t, "ev", data["toolSource"])
		require.Equal(t, true, data["success"])
		require.Equal(t, obj{"message": msg}, data["input"])

		// server-everything goes; a go-sdk server with other tools takes
		// its port. The source now has a bearer credential.
		u, err := url.Parse(ev.URL)
		require.NoError(t, err)
		ev.Stop()
		credSecret := "mcp-cred-" + randomHex(t, 12)
		mustCall(t, d, admin, "SetToolCredential", obj{"slug": "ev", "kind": "bearer", "secret": credSecret})
		objSchema := `{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}}}`
		second := startMCPServer(t, u.Host,
			mcpTool{name: "sum", description: "Adds a and b.", schema: objSchema, call: func(args map[string]any, _ http.Header) (string, bool) {
				a, _ := args["a"].(float64)
				b, _ := args["b"].(float64)
				return fmt.Sprint(a + b), false
			}},
			mcpTool{name: "whoami", description: "Says what authorization it got.", schema: `{"type":"object"}`, call: func(_ map[string]any, h http.Header) (string, bool) {
				return "auth=" + h.Get("Authorization"), false
			}},
			mcpTool{name: "refuse", description: "Always fails.", schema: `{"type":"object"}`, call: func(map[string]any, http.Header) (string, bool) {
				return "refused by the tool", true
			}},
		)
		require.Equal(t, ev.URL, second.URL, "the same endpoint")
		r = mustCall(t, d, admin, "RefreshToolSource", obj{"slug": "ev"})
		require.Equal(t, true, r["changed"])
		require.Equal(t, []string{"refuse", "sum", "whoami"}, toolNames(t, r["tools"]))
		require.Equal(t, "Adds a and b.", listOf(t, r, "tools")[1]["description"])
		mustFail(t, d, bob, "InvokeTool", obj{"slug": "ev", "name": "echo", "args": obj{"message": "x"}}, "not_found")
		seen := len(second.authSeen())
		mustFail(t, d, bob, "InvokeTool", obj{"slug": "ev", "name": "nope"}, "not_found")
		require.Len(t, second.authSeen(), seen, "a cache miss calls no upstream")

		res, text = invoke(t, d, bob, "ev", "sum", obj{"a": 2, "b": 3.5})
		require.Equal(t, false, res["isError"], "%v", res)
		require.Equal(t, "5.5", text)
		res, text = invoke(t, d, bob, "ev", "whoami", nil)
		require.Equal(t, false, res["isError"])
		require.Equal(t, "auth=Bearer [REDACTED]", text, "the credential is redacted from what the tool answers")
		res, text = invoke(t, d, bob, "ev", "refuse", nil)
		require.Equal(t, true, res["isError"], "the tool's own failure")
		require.Equal(t, "refused by the tool", text)
		auth := second.authSeen()
		require.NotEmpty(t, auth)
		for _, a := range auth {
			require.Equal(t, "Bearer "+credSecret, a, "every request to the endpoint carries the credential")
		}

		// The credential is bound to its origin (docs/TOOLCALL.md,
		// Credential origin): moving the source elsewhere is 409 while it
		// is set. Without it, the next refresh takes the new server's tools.
		third := startMCPServer(t, "127.0.0.1:0", mcpTool{name: "ping", schema: `{"type":"object"}`,
			call: func(map[string]any, http.Header) (string, bool) { return "pong", false }})
		mustFail(t, d, admin, "UpdateToolSource", obj{"slug": "ev", "config": obj{"url": third.URL}}, "conflict")
		mustCall(t, d, admin, "DeleteToolCredential", obj{"slug": "ev"})
		mustCall(t, d, admin, "UpdateToolSource", obj{"slug": "ev", "config": obj{"url": third.URL}})
		r = mustCall(t, d, admin, "RefreshToolSource", obj{"slug": "ev"})
		require.Equal(t, true, r["changed"])
		require.Equal(t, []string{"ping"}, toolNames(t, r["tools"]))
		_, text = invoke(t, d, bob, "ev", "ping", nil)
		require.Equal(t, "pong", text)
		for _, a := range third.authSeen() {
			require.NotContains(t, a, credSecret, "the other origin never gets the credential")
		}

		// Gone: refresh is 502 and keeps the cache; a call is the tool's
		// failure.
		third.srv.Close()
		mustFail(t, d, admin, "RefreshToolSource", obj{"slug": "ev"}, "bad_gateway")
		require.Equal(t, []string{"ping"}, toolNames(t, mustCall(t, d, admin, "GetToolSource", obj{"slug": "ev"})["tools"]))
		res, text = invoke(t, d, bob, "ev", "ping", nil)
		require.Equal(t, true, res["isError"], "an unreachable upstream: %v", res)
		require.Contains(t, text, "could not be reached")
		require.NotContains(t, text, credSecret)

		// A source whose URL was never reachable: 502, nothing cached.
		mustCall(t, d, admin, "CreateToolSource", obj{"slug": "void", "kind": "mcp", "config": obj{"url": closedURL(t)}})
		mustFail(t, d, admin, "RefreshToolSource", obj{"slug": "void"}, "bad_gateway")
		require.Equal(t, float64(0), mustCall(t, d, admin, "GetToolSource", obj{"slug": "void"})["toolCount"])

		rows = toolActions(t, p, d, bob, "bob")
		require.Len(t, rows, 6, "each call that ran is a row")
		last, _ := rows[0]["data"].(obj)
		require.Equal(t, "ev__ping", last["tool"])
		require.Equal(t, false, last["success"])
		raw, err := json.Marshal(rows)
		require.NoError(t, err)
		require.NotContains(t, string(raw), credSecret)
	})
}
