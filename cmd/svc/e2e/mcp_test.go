package e2e

// End-to-end tests of `svc mcp` (docs/MCP.md) with the MCP Go SDK's own
// client: the svc binary runs as `svc mcp` over stdio against a real
// broker, and every tool, error text, hidden tool, bound tool and
// tools/list_changed is checked as an agent would see it.

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

// mcpSession is one `svc mcp` child with an SDK client session on it.
type mcpSession struct {
	s       *mcp.ClientSession
	changed atomic.Int32 // tools/list_changed notifications received
}

// startMCP runs `svc mcp` for token against p and connects the SDK client.
func startMCP(t *testing.T, p *proc, token string, env ...string) *mcpSession {
	t.Helper()
	m := &mcpSession{}
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { m.changed.Add(1) },
	})
	cmd := childCommand(t, []string{"mcp"}, append([]string{"SVC_URL=" + p.base, "SVC_TOKEN=" + token}, env...))
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	s, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	m.s = s
	return m
}

// toolNames is tools/list.
func (m *mcpSession) toolNames(t *testing.T) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	res, err := m.s.ListTools(ctx, nil)
	require.NoError(t, err)
	var out []string
	for _, tl := range res.Tools {
		out = append(out, tl.Name)
	}
	return out
}

// call runs a tool and returns its one text block and isError.
func (m *mcpSession) call(t *testing.T, name string, args map[string]any) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if args == nil {
		args = map[string]any{}
	}
	res, err := m.s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err, "tools/call %s", name)
	require.Len(t, res.Content, 1, "%s answers one content block: %+v", name, res.Content)
	tc, ok := res.Content[0].(*mcp.TextContent)
	require.True(t, ok, "%s answers a text block", name)
	return tc.Text, res.IsError
}

// ok runs a tool that must succeed; it returns the text.
func (m *mcpSession) ok(t *testing.T, name string, args map[string]any) string {
	t.Helper()
	text, isErr := m.call(t, name, args)
	require.False(t, isErr, "%s failed: %s", name, text)
	return text
}

// okJSON runs a tool that must succeed with a JSON object.
func (m *mcpSession) okJSON(t *testing.T, name string, args map[string]any) obj {
	t.Helper()
	text := m.ok(t, name, args)
	var o obj
	require.NoError(t, json.Unmarshal([]byte(text), &o), "%s answers the broker's JSON: %s", name, text)
	return o
}

// fails runs a tool that must fail with exactly want.
func (m *mcpSession) fails(t *testing.T, name string, args map[string]any, want string) {
	t.Helper()
	text, isErr := m.call(t, name, args)
	require.True(t, isErr, "%s must fail; got %s", name, text)
	require.Equal(t, want, text, name)
}

// failsPrefix runs a tool that must fail with a text starting with prefix.
func (m *mcpSession) failsPrefix(t *testing.T, name string, args map[string]any, prefix string) string {
	t.Helper()
	text, isErr := m.call(t, name, args)
	require.True(t, isErr, "%s must fail; got %s", name, text)
	require.True(t, strings.HasPrefix(text, prefix), "%s: %q does not start with %q", name, text, prefix)
	return text
}

// mustMember creates a member over REST with a role title and returns its
// token.
func mustMember(t *testing.T, p *proc, admin, name, title string, perms ...string) string {
	t.Helper()
	if perms == nil {
		perms = []string{}
	}
	body := obj{"name": name, "permissions": perms}
	if title != "" {
		body["role"] = obj{"title": title, "description": title + " of the team"}
	}
	r := p.do(t, http.MethodPost, "/members", body, withBearer(admin))
	require.Equal(t, http.StatusOK, r.status, "create %s: %s", name, r.raw)
	tok, _ := r.body["token"].(string)
	require.NotEmpty(t, tok)
	return tok
}

func mustREST(t *testing.T, p *proc, tok, method, path string, body any) httpResp {
	t.Helper()
	r := p.do(t, method, path, body, withBearer(tok))
	require.Less(t, r.status, 300, "%s %s: %d %s", method, path, r.status, r.raw)
	return r
}

// The tools every member sees, and those only some do.
var (
	memberTools = []string{"roster", "broadcast", "send", "channels_list", "channels_post", "recent",
		"objectives_list", "objectives_view", "objectives_update", "objectives_discuss", "objectives_complete",
		"objectives_cancel", "objectives_watchers", "fs_ls", "fs_stat", "fs_read", "fs_write", "fs_mkdir", "fs_rm", "fs_mv", "fs_shared"}
	toolSourceToolNames = []string{"tool_sources_list", "tool_sources_view", "tool_sources_create", "tool_sources_update",
		"tool_sources_delete", "tool_sources_define_tool", "tool_sources_delete_tool", "tool_sources_bindings",
		"tool_sources_set_credential", "tool_sources_delete_credential", "tool_sources_refresh"}
	secretToolNames = []string{"secrets_list", "secrets_view", "secrets_create", "secrets_update", "secrets_delete",
		"secrets_set_value", "secrets_delete_value", "secrets_bindings"}
	notificationToolNames = []string{"notifications_list", "notifications_view", "notifications_create", "notifications_update",
		"notifications_delete", "notifications_set_secret", "notifications_delete_secret", "notifications_deliveries",
		"notifications_replay", "notifications_profiles", "notifications_profile_create", "notifications_profile_delete",
		"notifications_profile_set_secret"}
	approvalToolNames = []string{"approvals_list", "approvals_decide"}
)

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func TestE2EMCPToolList(t *testing.T) {
	p := mustStartSvc(t, procOpts{})
	admin := p.adminToken(t)
	bobTok := mustMember(t, p, admin, "bob", "Reviewer")

	all := slices.Concat(memberTools, []string{"objectives_create", "objectives_reassign"}, toolSourceToolNames, secretToolNames, notificationToolNames, approvalToolNames)
	a := startMCP(t, p, admin)
	require.Equal(t, sorted(all), sorted(a.toolNames(t)), "the admin sees every tool")

	bob := startMCP(t, p, bobTok)
	require.Equal(t, sorted(memberTools), sorted(bob.toolNames(t)), "a member without permissions sees no gated tool")

	// Hidden is not allowed: the broker refuses a hidden tool called by name.
	// (Listing secrets is open to every member in the spec, so a hidden
	// secrets_list answers; creating one is refused.)
	bob.ok(t, "secrets_list", nil)
	text := bob.failsPrefix(t, "secrets_create", map[string]any{"slug": "x", "envName": "X_KEY"}, "broker error 403: ")
	var body obj
	require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(text, "broker error 403: ")), &body), "the broker's raw JSON body: %s", text)
	require.Equal(t, "forbidden", body["error"])
	bob.failsPrefix(t, "tool_sources_create", map[string]any{"slug": "x", "kind": "custom"}, "broker error 403: ")
	bob.failsPrefix(t, "notifications_profiles", nil, "broker error 403: ")
	bob.failsPrefix(t, "objectives_reassign", map[string]any{"id": "x", "to": "bob"}, "objectives_reassign: requires director or manager authority")
	bob.fails(t, "objectives_create", map[string]any{"title": "t", "outcome": "o", "assignee": "bob"}, "objectives_create: requires director or manager authority")
	// Validation still comes first for a hidden tool.
	bob.fails(t, "secrets_create", map[string]any{"slug": "x"}, "secrets_create: envName is required")

	// Every tool has an object schema listing its required fields.
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	res, err := a.s.ListTools(ctx, nil)
	require.NoError(t, err)
	for _, tl := range res.Tools {
		require.NotEmpty(t, tl.Description, tl.Name)
		enc, err := json.Marshal(tl.InputSchema)
		require.NoError(t, err)
		var s struct {
			Type       string         `json:"type"`
			Properties map[string]obj `json:"properties"`
			Required   []string       `json:"required"`
		}
		require.NoError(t, json.Unmarshal(enc, &s))
		require.Equal(t, "object", s.Type, tl.Name)
		for _, r := range s.Required {
			require.Contains(t, s.Properties, r, "%s: required %s is a property", tl.Name, r)
		}
		switch tl.Name {
		case "objectives_update":
			require.Equal(t, []string{"id", "status"}, s.Required)
			require.Equal(t, []any{"active", "blocked"}, s.Properties["status"]["enum"])
			require.Contains(t, s.Properties, "blockReason")
		case "fs_write":
			require.Equal(t, []any{"error", "suffix", "overwrite"}, s.Properties["collide"]["enum"])
			require.Equal(t, []string{"path", "mimeType"}, s.Required)
		case "send":
			require.Equal(t, []any{"debug", "info", "notice", "warning", "error", "critical"}, s.Properties["level"]["enum"])
		case "notifications_create":
			for _, f := range []string{"authKind", "headerName", "prefix", "authProfile", "ifOffline", "ifBusy", "debounceMs", "debounceMax", "queueTtlMs", "maxWaitMs", "level", "targets"} {
				require.Contains(t, s.Properties, f)
			}
		}
	}
}

func TestE2EMCPMessagingAndRoster(t *testing.T) {
	p := mustStartSvc(t, procOpts{})
	admin := p.adminToken(t)
	aliceTok := mustMember(t, p, admin, "alice", "Lead", "members.manage", "objectives.create")
	mustMember(t, p, admin, "bob", "Reviewer")
	carolTok := mustMember(t, p, admin, "carol", "")
	alice := startMCP(t, p, aliceTok)
	carol := startMCP(t, p, carolTok)

	// Roster: alice's own standalone toolbox holds one stream.
	var lines []string
	require.Eventually(t, func() bool {
		lines = strings.Split(alice.ok(t, "roster", nil), "\n")
		return slices.Contains(lines, "- alice (you) [Lead] [admin operator] connected=1") &&
			slices.Contains(lines, "- carol connected=1") // no role: no bracket
	}, 10*time.Second, 50*time.Millisecond)
	require.Contains(t, lines, "- bob [Reviewer] offline")
	require.Len(t, lines, 4)
	require.True(t, strings.HasPrefix(lines[0], "- admin "), lines[0])

	// broadcast, send
	b := alice.okJSON(t, "broadcast", map[string]any{"body": "hello all", "title": "hi", "level": "notice"})
	require.Contains(t, b, "delivery")
	msg, _ := b["message"].(obj)
	require.Equal(t, "alice", msg["from"])
	require.Equal(t, "notice", msg["level"])
	s := alice.okJSON(t, "send", map[string]any{"to": "bob", "body": "psst"})
	require.Equal(t, "bob", s["message"].(obj)["to"])
	alice.fails(t, "send", map[string]any{"body": "x"}, "send: to is required")
	alice.fails(t, "send", map[string]any{"to": "bob", "body": ""}, "send: body is required")
	alice.fails(t, "send", map[string]any{"to": "bob", "body": "x", "level": "loud"}, "send: invalid level 'loud'")
	alice.failsPrefix(t, "send", map[string]any{"to": "nobody", "body": "x"}, "broker error 400: {")

	// channels
	mustREST(t, p, aliceTok, http.MethodPost, "/channels", obj{"slug": "ops"})
	chs := alice.okJSON(t, "channels_list", nil)
	require.Len(t, chs["channels"], 2)
	carol.fails(t, "channels_post", map[string]any{"channel": "ops", "body": "let me in"}, "you are not a member of #ops")
	post := alice.okJSON(t, "channels_post", map[string]any{"channel": "ops", "body": "standup"})
	thread := post["message"].(obj)["data"].(obj)["thread"].(string)
	require.True(t, strings.HasPrefix(thread, "chan:"), thread)
	carol.ok(t, "channels_post", map[string]any{"channel": "general", "body": "general is everyone's"})
	alice.failsPrefix(t, "channels_post", map[string]any{"channel": "nope", "body": "x"}, "broker error 404: ")

	// recent
	h := alice.okJSON(t, "recent", map[string]any{"with": "bob"})
	hm := h["messages"].([]any)
	require.Len(t, hm, 1)
	require.Equal(t, "psst", hm[0].(obj)["body"])
	h = alice.okJSON(t, "recent", map[string]any{"channel": "ops"})
	require.Len(t, h["messages"], 1)
	require.Equal(t, "standup", h["messages"].([]any)[0].(obj)["body"])
	h = alice.okJSON(t, "recent", map[string]any{"limit": 1})
	require.Len(t, h["messages"], 1, "general scrollback, one")
	require.Equal(t, "general is everyone's", h["messages"].([]any)[0].(obj)["body"])
	h = alice.okJSON(t, "recent", map[string]any{"limit": 100000})
	require.Len(t, h["messages"], 2, "a limit over 500 is capped, not refused")
	alice.fails(t, "recent", map[string]any{"with": "bob", "channel": "ops"}, "recent: give with or channel, not both")
	alice.fails(t, "recent", map[string]any{"limit": 0}, "recent: limit must be at least 1")
	alice.fails(t, "recent", map[string]any{"limit": "ten"}, "recent: limit must be an integer")
	alice.fails(t, "recent", map[string]any{"since": 1}, "recent: unknown field 'since'")
}

func TestE2EMCPAttachments(t *testing.T) {
	p := mustStartSvc(t, procOpts{})
	admin := p.adminToken(t)
	aliceTok := mustMember(t, p, admin, "alice", "Lead", "objectives.create")
	mustMember(t, p, admin, "bob", "Reviewer")
	alice := startMCP(t, p, aliceTok)
	alice.ok(t, "fs_write", map[string]any{"path": "/alice/a.txt", "mimeType": "text/plain", "text": "A"})
	alice.ok(t, "fs_mkdir", map[string]any{"path": "/alice/d"})
	mustREST(t, p, aliceTok, http.MethodPost, "/channels", obj{"slug": "ops"})
	o := alice.okJSON(t, "objectives_create", map[string]any{"title": "t", "outcome": "o", "assignee": "alice"})
	id := o["id"].(string)

	cases := []struct {
		tool string
		args map[string]any
	}{
		{"broadcast", map[string]any{"body": "b"}},
		{"send", map[string]any{"to": "bob", "body": "b"}},
		{"channels_post", map[string]any{"channel": "ops", "body": "b"}},
		{"objectives_discuss", map[string]any{"id": id, "body": "b"}},
		{"objectives_create", map[string]any{"title": "t", "outcome": "o", "assignee": "bob"}},
	}
	for _, tc := range cases {
		with := func(att ...string) map[string]any {
			a := map[string]any{}
			for k, v := range tc.args {
				a[k] = v
			}
			a["attachments"] = att
			return a
		}
		alice.fails(t, tc.tool, with("/alice/a.txt", "/alice/missing", "/alice/d"), "attachment not found: /alice/missing")
		alice.fails(t, tc.tool, with("/alice/a.txt", "/alice/d", "/alice/missing"), "attachment is a directory: /alice/d")
		out := alice.okJSON(t, tc.tool, with("/alice/a.txt"))
		require.Contains(t, string(mustJSON(t, out)), "/alice/a.txt", "%s carries the attachment", tc.tool)
	}
	// Nothing was sent by the refused calls: bob got exactly one DM.
	bobDMs := alice.okJSON(t, "recent", map[string]any{"with": "bob"})
	require.Len(t, bobDMs["messages"], 1)
}

func TestE2EMCPObjectives(t *testing.T) {
	p := mustStartSvc(t, procOpts{})
	admin := p.adminToken(t)
	aliceTok := mustMember(t, p, admin, "alice", "Lead", "members.manage", "objectives.create")
	bobTok := mustMember(t, p, admin, "bob", "Reviewer")
	carolTok := mustMember(t, p, admin, "carol", "Reviewer")
	alice := startMCP(t, p, aliceTok)
	bob := startMCP(t, p, bobTok)
	carol := startMCP(t, p, carolTok)

	o := alice.okJSON(t, "objectives_create", map[string]any{"title": "Ship", "outcome": "released", "assignee": "bob", "body": "ctx", "watchers": []string{"admin"}})
	id := o["id"].(string)
	require.Equal(t, "alice", o["originator"])
	alice.fails(t, "objectives_create", map[string]any{"title": "x", "assignee": "bob"}, "objectives_create: outcome is required")

	l := bob.okJSON(t, "objectives_list", nil)
	require.Len(t, l["objectives"], 1)
	l = bob.okJSON(t, "objectives_list", map[string]any{"status": "done"})
	require.Empty(t, l["objectives"])
	bob.fails(t, "objectives_list", map[string]any{"status": "open"}, "objectives_list: invalid status 'open'")
	v := bob.okJSON(t, "objectives_view", map[string]any{"id": id})
	require.Equal(t, "Ship", v["objective"].(obj)["title"])
	bob.fails(t, "objectives_view", nil, "objectives_view: id is required")

	bob.fails(t, "objectives_update", map[string]any{"id": id, "status": "done"}, "objectives_update: invalid status 'done'")
	bob.fails(t, "objectives_update", map[string]any{"id": id}, "objectives_update: status is required")
	bob.fails(t, "objectives_update", map[string]any{"id": id, "status": "blocked"}, "objectives_update: blockReason is required")
	u := bob.okJSON(t, "objectives_update", map[string]any{"id": id, "status": "blocked", "blockReason": "waiting on CI"})
	require.Equal(t, "blocked", u["status"])
	require.Equal(t, "waiting on CI", u["blockReason"])
	u = bob.okJSON(t, "objectives_update", map[string]any{"id": id, "status": "active"})
	require.Equal(t, "active", u["status"])

	d := bob.okJSON(t, "objectives_discuss", map[string]any{"id": id, "body": "on it"})
	require.Equal(t, "obj:"+id, d["data"].(obj)["thread"])

	// Authority: bob is neither originator nor a manager.
	const authority = ": requires director or manager authority"
	bob.fails(t, "objectives_cancel", map[string]any{"id": id}, "objectives_cancel"+authority)
	bob.fails(t, "objectives_watchers", map[string]any{"id": id, "add": []string{"bob"}}, "objectives_watchers"+authority)
	bob.fails(t, "objectives_reassign", map[string]any{"id": id, "to": "alice"}, "objectives_reassign"+authority)
	carol.fails(t, "objectives_update", map[string]any{"id": id, "status": "blocked", "blockReason": "x"}, "objectives_update"+authority)
	bob.fails(t, "objectives_watchers", map[string]any{"id": id}, "objectives_watchers: add or remove is required")

	w := alice.okJSON(t, "objectives_watchers", map[string]any{"id": id, "add": []string{"bob"}, "remove": []string{"admin"}})
	require.Equal(t, []any{"bob"}, w["watchers"])
	c := bob.okJSON(t, "objectives_complete", map[string]any{"id": id, "result": "v1 is out"})
	require.Equal(t, "done", c["status"])
	bob.fails(t, "objectives_complete", map[string]any{"id": id}, "objectives_complete: result is required")

	o2 := alice.okJSON(t, "objectives_create", map[string]any{"title": "Two", "outcome": "o", "assignee": "bob"})
	r := alice.okJSON(t, "objectives_reassign", map[string]any{"id": o2["id"], "to": "alice", "note": "mine now"})
	require.Equal(t, "alice", r["assignee"])
	x := alice.okJSON(t, "objectives_cancel", map[string]any{"id": o2["id"], "reason": "dropped"})
	require.Equal(t, "cancelled", x["status"])
	alice.failsPrefix(t, "objectives_view", map[string]any{"id": "no-such"}, "broker error 404: ")
}

func TestE2EMCPStartErrors(t *testing.T) {
	p := mustStartSvc(t, procOpts{})
	tests := []struct {
		name   string
		args   []string
		env    []string
		code   int
		stderr string
	}{
		{name: "revoked token", args: []string{"mcp"}, env: []string{"SVC_URL=" + p.base, "SVC_TOKEN=svc_" + strings.Repeat("A", 43)}, code: 1,
			stderr: "svc: unauthenticated: the broker at " + p.base + " refused the token (revoked, expired or unknown); run `svc login`\n"},
		{name: "broker down", args: []string{"mcp", "--url", "http://127.0.0.1:1", "--token", "svc_x"}, code: 1,
			stderr: "svc: cannot reach the broker at http://127.0.0.1:1: connection refused (is `svc serve` running?)\n"},
		{name: "no token", args: []string{"mcp", "--url", p.base}, env: []string{"SVC_AUTH_CONFIG_PATH=" + t.TempDir() + "/auth.json"}, code: 1, stderr: "svc: no token: "},
		{name: "argument", args: []string{"mcp", "extra"}, code: 2, stderr: "svc: usage: svc mcp [--url U] [--token T] [--approval-prompt]: no arguments\n"},
		{name: "bad url", args: []string{"mcp", "--url", "ftp://x"}, code: 2, stderr: "svc: broker URL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runSvc(t, tc.args, tc.env, nil)
			require.Equal(t, tc.code, code, stderr)
			require.Empty(t, stdout, "stdout carries the protocol only")
			require.True(t, strings.HasPrefix(stderr, tc.stderr), "%q", stderr)
			require.NotContains(t, stderr, strings.Repeat("A", 43), "the token is never echoed")
		})
	}
}

// A script that writes its requests and closes stdin still gets every
// answer before `svc mcp` exits.
func TestE2EMCPPipedStdin(t *testing.T) {
	p := mustStartSvc(t, procOpts{})
	admin := p.adminToken(t)
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"sh","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"roster","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"send","arguments":{"to":"admin"}}}`,
	}, "\n") + "\n"
	code, stdout, stderr := runSvc(t, []string{"mcp"}, []string{"SVC_URL=" + p.base, "SVC_TOKEN=" + admin}, strings.NewReader(in))
	require.Equal(t, 0, code, stderr)
	answers := map[float64]obj{}
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var m obj
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		answers[m["id"].(float64)] = m
	}
	require.Len(t, answers, 3, stdout)
	require.Contains(t, mustObj(t, answers[2]["result"])["content"].([]any)[0].(obj)["text"], "- admin (you) ")
	r3 := mustObj(t, answers[3]["result"])
	require.Equal(t, true, r3["isError"])
	require.Equal(t, "send: body is required", r3["content"].([]any)[0].(obj)["text"])
}
