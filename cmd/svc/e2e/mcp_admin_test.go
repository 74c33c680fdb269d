package e2e

// End-to-end tests of `svc mcp`'s files, admin groups, bound tools and
// tools/list_changed (standalone and under a runner's relay), and a smoke
// test with the MCP Inspector's CLI from npm.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"svc/cmd/internal/relay"
	"svc/cmd/svc/internal/npmcache"
)

func TestE2EMCPFiles(t *testing.T) {
	p := mustStartSvc(t, procOpts{})
	admin := p.adminToken(t)
	aliceTok := mustMember(t, p, admin, "alice", "Lead")
	bobTok := mustMember(t, p, admin, "bob", "Reviewer")
	alice := startMCP(t, p, aliceTok)
	bob := startMCP(t, p, bobTok)

	w := alice.okJSON(t, "fs_write", map[string]any{"path": "/alice/notes/a.md", "mimeType": "text/markdown", "text": "# héllo\n"})
	require.Equal(t, "/alice/notes/a.md", w["entry"].(obj)["path"])
	require.Equal(t, false, w["renamed"])
	png := []byte{0x89, 'P', 'N', 'G', 0, 1, 2, 0xff}
	alice.ok(t, "fs_write", map[string]any{"path": "/alice/i.png", "mimeType": "image/png", "base64": base64.StdEncoding.EncodeToString(png)})
	alice.ok(t, "fs_write", map[string]any{"path": "/alice/d.json", "mimeType": "application/json", "text": `{"a":1}`})

	require.Equal(t, "# héllo\n", alice.ok(t, "fs_read", map[string]any{"path": "/alice/notes/a.md"}))
	require.Equal(t, `{"a":1}`, alice.ok(t, "fs_read", map[string]any{"path": "/alice/d.json"}))
	require.Equal(t, base64.StdEncoding.EncodeToString(png), alice.ok(t, "fs_read", map[string]any{"path": "/alice/i.png"}))
	alice.failsPrefix(t, "fs_read", map[string]any{"path": "/alice/none"}, "broker error 404: {")
	bob.failsPrefix(t, "fs_read", map[string]any{"path": "/alice/i.png"}, "broker error 403: {")

	alice.failsPrefix(t, "fs_write", map[string]any{"path": "/alice/i.png", "mimeType": "image/png", "text": "x"}, "broker error 409: {")
	s := alice.okJSON(t, "fs_write", map[string]any{"path": "/alice/i.png", "mimeType": "image/png", "text": "x", "collide": "suffix"})
	require.Equal(t, true, s["renamed"])
	alice.ok(t, "fs_write", map[string]any{"path": "/alice/i.png", "mimeType": "text/plain", "text": "now text", "collide": "overwrite"})
	require.Equal(t, "now text", alice.ok(t, "fs_read", map[string]any{"path": "/alice/i.png"}))
	alice.fails(t, "fs_write", map[string]any{"path": "/alice/x", "mimeType": "text/plain"}, "fs_write: text or base64 is required")
	alice.fails(t, "fs_write", map[string]any{"path": "/alice/x", "mimeType": "text/plain", "text": "a", "base64": "YQ=="}, "fs_write: give text or base64, not both")
	alice.fails(t, "fs_write", map[string]any{"path": "/alice/x", "mimeType": "text/plain", "base64": "%%%"}, "fs_write: base64 is not valid base64")
	alice.fails(t, "fs_write", map[string]any{"path": "/alice/x", "text": "a"}, "fs_write: mimeType is required")
	alice.fails(t, "fs_write", map[string]any{"path": "/alice/x", "mimeType": "text/plain", "text": "a", "collide": "merge"}, "fs_write: invalid collide 'merge'")

	ls := alice.okJSON(t, "fs_ls", nil)
	var names []string
	for _, e := range ls["entries"].([]any) {
		names = append(names, e.(obj)["path"].(string))
	}
	require.Contains(t, names, "/alice/notes")
	require.Contains(t, names, "/alice/d.json")
	ls = alice.okJSON(t, "fs_ls", map[string]any{"path": "/alice/notes"})
	require.Len(t, ls["entries"], 1)
	st := alice.okJSON(t, "fs_stat", map[string]any{"path": "/alice/notes"})
	require.Equal(t, "dir", st["entry"].(obj)["kind"])
	alice.fails(t, "fs_stat", nil, "fs_stat: path is required")

	mk := alice.okJSON(t, "fs_mkdir", map[string]any{"path": "/alice/x/y", "recursive": true})
	require.Equal(t, "/alice/x/y", mk["entry"].(obj)["path"])
	alice.failsPrefix(t, "fs_mkdir", map[string]any{"path": "/alice/p/q"}, "broker error ")
	mv := alice.okJSON(t, "fs_mv", map[string]any{"from": "/alice/d.json", "to": "/alice/x/d.json"})
	require.Equal(t, "/alice/x/d.json", mv["entry"].(obj)["path"])
	alice.failsPrefix(t, "fs_rm", map[string]any{"path": "/alice/x"}, "broker error ")
	require.Equal(t, "ok", alice.ok(t, "fs_rm", map[string]any{"path": "/alice/x", "recursive": true}))
	alice.failsPrefix(t, "fs_stat", map[string]any{"path": "/alice/x"}, "broker error 404: ")

	require.Empty(t, bob.okJSON(t, "fs_shared", nil)["entries"])
	alice.ok(t, "send", map[string]any{"to": "bob", "body": "see", "attachments": []string{"/alice/notes/a.md"}})
	sh := bob.okJSON(t, "fs_shared", nil)
	require.Len(t, sh["entries"], 1)
	require.Equal(t, "# héllo\n", bob.ok(t, "fs_read", map[string]any{"path": "/alice/notes/a.md"}), "the attachment grants bob read")
}

func TestE2EMCPAdminGroups(t *testing.T) {
	p := mustStartSvc(t, procOpts{env: []string{toolEgress}})
	admin := p.adminToken(t)
	mustMember(t, p, admin, "alice", "Lead")
	a := startMCP(t, p, admin)
	mustREST(t, p, admin, http.MethodPost, "/channels", obj{"slug": "ops"})

	// Tool sources.
	src := a.okJSON(t, "tool_sources_create", map[string]any{"slug": "gh", "kind": "custom", "displayName": "GitHub"})
	require.Equal(t, "gh", src["slug"])
	a.fails(t, "tool_sources_create", map[string]any{"slug": "x", "kind": "soap"}, "tool_sources_create: invalid kind 'soap'")
	a.failsPrefix(t, "tool_sources_create", map[string]any{"slug": "gh", "kind": "custom"}, "broker error 409: ")
	require.Len(t, a.okJSON(t, "tool_sources_list", nil)["sources"], 1)
	upd := a.okJSON(t, "tool_sources_update", map[string]any{"slug": "gh", "displayName": "GH", "allMembers": true})
	require.Equal(t, "GH", upd["displayName"])
	require.Equal(t, true, upd["allMembers"])
	def := a.okJSON(t, "tool_sources_define_tool", map[string]any{"slug": "gh", "name": "ping", "description": "Pings.",
		"inputSchema": obj{"type": "object"}, "binding": obj{"method": "GET", "url": "https://api.example.com/ping"}})
	require.Equal(t, float64(1), def["toolCount"])
	a.fails(t, "tool_sources_define_tool", map[string]any{"slug": "gh", "name": "p", "description": "d", "inputSchema": "{}", "binding": obj{}}, "tool_sources_define_tool: inputSchema must be an object")
	b := a.okJSON(t, "tool_sources_bindings", map[string]any{"slug": "gh", "add": []string{"alice"}})
	require.Equal(t, []any{"alice"}, b["boundMembers"])
	b = a.okJSON(t, "tool_sources_bindings", map[string]any{"slug": "gh", "remove": []string{"alice"}})
	require.Empty(t, b["boundMembers"])
	a.fails(t, "tool_sources_bindings", map[string]any{"slug": "gh"}, "tool_sources_bindings: add or remove is required")
	a.failsPrefix(t, "tool_sources_bindings", map[string]any{"slug": "gh", "add": []string{"nobody"}}, "broker error 400: ")
	cred := a.okJSON(t, "tool_sources_set_credential", map[string]any{"slug": "gh", "kind": "header", "headerName": "X-Api-Key", "secret": "s3cr3t-value"})
	require.Equal(t, true, cred["hasCredential"])
	require.NotContains(t, string(mustJSON(t, cred)), "s3cr3t-value")
	require.Equal(t, true, a.okJSON(t, "tool_sources_view", map[string]any{"slug": "gh"})["hasCredential"])
	require.Equal(t, "ok", a.ok(t, "tool_sources_delete_credential", map[string]any{"slug": "gh"}))
	a.failsPrefix(t, "tool_sources_refresh", map[string]any{"slug": "gh"}, "broker error 4")
	remote := startMCPServer(t, "127.0.0.1:0", mcpTool{name: "hello", description: "Says hello.", schema: `{"type":"object"}`,
		call: func(map[string]any, http.Header) (string, bool) { return "hello", false }})
	a.ok(t, "tool_sources_create", map[string]any{"slug": "remote", "kind": "mcp", "config": obj{"url": remote.URL}})
	ref := a.okJSON(t, "tool_sources_refresh", map[string]any{"slug": "remote"})
	require.Equal(t, true, ref["changed"])
	require.Equal(t, "hello", ref["tools"].([]any)[0].(obj)["name"])
	require.Equal(t, "ok", a.ok(t, "tool_sources_delete_tool", map[string]any{"slug": "gh", "name": "ping"}))
	require.Equal(t, "ok", a.ok(t, "tool_sources_delete", map[string]any{"slug": "gh"}))
	a.failsPrefix(t, "tool_sources_view", map[string]any{"slug": "gh"}, "broker error 404: ")

	// Secrets.
	sec := a.okJSON(t, "secrets_create", map[string]any{"slug": "api", "envName": "API_KEY", "description": "the key"})
	require.Equal(t, "API_KEY", sec["envName"])
	a.failsPrefix(t, "secrets_create", map[string]any{"slug": "bad", "envName": "PATH"}, "broker error 400: ")
	require.Len(t, a.okJSON(t, "secrets_list", nil)["secrets"], 1)
	sec = a.okJSON(t, "secrets_update", map[string]any{"slug": "api", "description": "rotated monthly", "enabled": true})
	require.Equal(t, "rotated monthly", sec["description"])
	sec = a.okJSON(t, "secrets_set_value", map[string]any{"slug": "api", "value": "v-123456"})
	require.Equal(t, true, sec["hasValue"])
	require.NotContains(t, string(mustJSON(t, sec)), "v-123456")
	sec = a.okJSON(t, "secrets_bindings", map[string]any{"slug": "api", "add": []string{"alice"}})
	require.Equal(t, []any{"alice"}, sec["boundMembers"])
	require.Equal(t, []any{"alice"}, a.okJSON(t, "secrets_view", map[string]any{"slug": "api"})["boundMembers"])
	require.Equal(t, "ok", a.ok(t, "secrets_delete_value", map[string]any{"slug": "api"}))
	require.Equal(t, false, a.okJSON(t, "secrets_view", map[string]any{"slug": "api"})["hasValue"])
	require.Equal(t, "ok", a.ok(t, "secrets_delete", map[string]any{"slug": "api"}))

	// Notifications, with the flattened fields.
	a.fails(t, "notifications_create", map[string]any{"slug": "gh", "targets": []string{"alice"}}, "notifications_create: invalid target 'alice' (want @member or #channel)")
	a.fails(t, "notifications_create", map[string]any{"slug": "gh"}, "notifications_create: targets is required")
	ep := a.okJSON(t, "notifications_create", map[string]any{"slug": "gh", "targets": []string{"@alice", "#ops"},
		"authKind": "hmac-sha256", "headerName": "X-Sig", "prefix": "v1=", "ifOffline": "queue", "ifBusy": "wait",
		"debounceMs": 250, "debounceMax": 5, "queueTtlMs": 60000, "maxWaitMs": 30000, "level": "warning", "dedupeHeader": "X-Id"})
	require.Equal(t, "gh", ep["slug"])
	targets := ep["targets"].([]any)
	require.Len(t, targets, 2)
	require.Equal(t, "alice", targets[0].(obj)["member"])
	require.NotEmpty(t, targets[1].(obj)["channel"])
	require.Equal(t, obj{"kind": "hmac-sha256", "headerName": "X-Sig", "prefix": "v1="}, ep["auth"])
	pol := ep["policy"].(obj)
	require.Equal(t, "queue", pol["ifOffline"])
	require.Equal(t, "wait", pol["ifBusy"])
	require.Equal(t, float64(250), pol["debounceMs"])
	require.Equal(t, float64(5), pol["debounceMax"])
	require.Equal(t, float64(60000), pol["queueTtlMs"])
	require.Equal(t, float64(30000), pol["maxWaitMs"])
	require.Equal(t, "warning", ep["level"])
	require.Equal(t, false, ep["hasSecret"])
	a.fails(t, "notifications_update", map[string]any{"slug": "gh", "ifOffline": "keep"}, "notifications_update: invalid ifOffline 'keep'")
	ep = a.okJSON(t, "notifications_update", map[string]any{"slug": "gh", "targets": []string{"@alice"}, "ifOffline": "drop", "enabled": true})
	require.Len(t, ep["targets"], 1)
	require.Equal(t, "drop", ep["policy"].(obj)["ifOffline"])
	require.Equal(t, "wait", ep["policy"].(obj)["ifBusy"], "policy fields not given are kept")
	require.Len(t, a.okJSON(t, "notifications_list", nil)["endpoints"], 1)
	require.Equal(t, "/hooks/gh", a.okJSON(t, "notifications_view", map[string]any{"slug": "gh"})["ingressPath"])
	ep = a.okJSON(t, "notifications_set_secret", map[string]any{"slug": "gh", "secret": "hook-secret-1"})
	require.Equal(t, true, ep["hasSecret"])
	require.NotContains(t, string(mustJSON(t, ep)), "hook-secret-1")
	// An unsigned delivery is rejected and receipted; replay runs it again.
	r := p.do(t, http.MethodPost, "/hooks/gh", []byte(`{"x":1}`))
	require.Equal(t, http.StatusUnauthorized, r.status)
	dl := a.okJSON(t, "notifications_deliveries", map[string]any{"slug": "gh", "limit": 10})
	ds := dl["deliveries"].([]any)
	require.Len(t, ds, 1)
	require.Equal(t, "rejected", ds[0].(obj)["status"])
	rep := a.okJSON(t, "notifications_replay", map[string]any{"id": ds[0].(obj)["id"]})
	require.NotEqual(t, ds[0].(obj)["id"], rep["id"], "a fresh receipt")
	require.True(t, strings.HasPrefix(rep["reason"].(string), fmt.Sprintf("replay of %s", ds[0].(obj)["id"])), "%v", rep)
	require.Equal(t, "ok", a.ok(t, "notifications_delete_secret", map[string]any{"slug": "gh"}))

	pr := a.okJSON(t, "notifications_profile_create", map[string]any{"slug": "shared", "authKind": "header-secret", "headerName": "X-Token", "description": "ci"})
	require.Equal(t, "header-secret", pr["auth"].(obj)["kind"])
	a.fails(t, "notifications_profile_create", map[string]any{"slug": "p2"}, "notifications_profile_create: authKind is required")
	pr = a.okJSON(t, "notifications_profile_set_secret", map[string]any{"slug": "shared", "secret": "profile-secret"})
	require.Equal(t, true, pr["hasSecret"])
	a.okJSON(t, "notifications_update", map[string]any{"slug": "gh", "authProfile": "shared"})
	profiles := a.okJSON(t, "notifications_profiles", nil)["profiles"].([]any)
	require.Equal(t, float64(1), profiles[0].(obj)["endpointCount"])
	a.failsPrefix(t, "notifications_profile_delete", map[string]any{"slug": "shared"}, "broker error 409: ")
	require.Equal(t, "ok", a.ok(t, "notifications_delete", map[string]any{"slug": "gh"}))
	require.Equal(t, "ok", a.ok(t, "notifications_profile_delete", map[string]any{"slug": "shared"}))
}

// boundSource makes a custom source "up" with two tools whose bindings
// call up: echo answers JSON, broken a 500.
func boundSource(t *testing.T, p *proc, admin string, up *httpUpstream) {
	t.Helper()
	mustREST(t, p, admin, http.MethodPost, "/tool-sources", obj{"slug": "up", "kind": "custom"})
	mustREST(t, p, admin, http.MethodPut, "/tool-sources/up/tools/echo", obj{"description": "Echoes q.",
		"inputSchema": obj{"type": "object", "properties": obj{"q": obj{"type": "string"}}, "required": []string{"q"}},
		"binding":     obj{"method": "GET", "url": up.srv.URL + "/echo/{{args.q}}"}})
	mustREST(t, p, admin, http.MethodPut, "/tool-sources/up/tools/broken", obj{"description": "Fails.",
		"inputSchema": obj{"type": "object"}, "binding": obj{"method": "GET", "url": up.srv.URL + "/fail/x"}})
}

func TestE2EMCPBoundToolsStandalone(t *testing.T) {
	p := mustStartSvc(t, procOpts{env: []string{toolEgress}})
	admin := p.adminToken(t)
	aliceTok := mustMember(t, p, admin, "alice", "Lead")
	up := newHTTPUpstream(t)
	boundSource(t, p, admin, up)
	alice := startMCP(t, p, aliceTok)
	require.NotContains(t, alice.toolNames(t), "up__echo", "not bound yet")
	// The toolbox's own stream is open once alice shows connected.
	require.Eventually(t, func() bool {
		return strings.Contains(alice.ok(t, "roster", nil), "- alice (you) [Lead] connected=1")
	}, 10*time.Second, 50*time.Millisecond)

	before := alice.changed.Load()
	mustREST(t, p, admin, http.MethodPost, "/tool-sources/up/bindings", obj{"member": "alice"})
	require.Eventually(t, func() bool { return alice.changed.Load() > before }, 10*time.Second, 20*time.Millisecond, "list_changed after the binding")
	names := alice.toolNames(t)
	require.Contains(t, names, "up__echo")
	require.Contains(t, names, "up__broken")

	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	res, err := alice.s.ListTools(ctx, nil)
	require.NoError(t, err)
	i := slices.IndexFunc(res.Tools, func(tl *mcp.Tool) bool { return tl.Name == "up__echo" })
	require.GreaterOrEqual(t, i, 0)
	require.Equal(t, "Echoes q.", res.Tools[i].Description)
	require.Equal(t, []any{"q"}, mustObj(t, res.Tools[i].InputSchema)["required"])

	text := alice.ok(t, "up__echo", map[string]any{"q": "hi there"})
	require.Contains(t, text, `"path":"/echo/hi%20there"`)
	text, isErr := alice.call(t, "up__broken", nil)
	require.True(t, isErr, "a failing upstream is the broker's isError result: %s", text)
	require.Contains(t, text, "500")

	// Disabling the source takes its tools away, announced again.
	before = alice.changed.Load()
	mustREST(t, p, admin, http.MethodPatch, "/tool-sources/up", obj{"enabled": false})
	require.Eventually(t, func() bool { return alice.changed.Load() > before }, 10*time.Second, 20*time.Millisecond)
	require.NotContains(t, alice.toolNames(t), "up__echo")
}

func mustObj(t *testing.T, v any) obj {
	t.Helper()
	var o obj
	require.NoError(t, json.Unmarshal(mustJSON(t, v), &o))
	return o
}

func TestE2EMCPRelayMode(t *testing.T) {
	p := mustStartSvc(t, procOpts{env: []string{toolEgress}})
	admin := p.adminToken(t)
	aliceTok := mustMember(t, p, admin, "alice", "Lead")
	up := newHTTPUpstream(t)
	boundSource(t, p, admin, up)

	dir, err := os.MkdirTemp("", "mcpr")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	srv, err := relay.Listen(dir, nil)
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })

	alice := startMCP(t, p, aliceTok, relay.Env+"="+srv.Path())
	require.Eventually(t, func() bool { return srv.Subscribers() == 1 }, 10*time.Second, 20*time.Millisecond)
	// Subscribing recomputes once (a change before it would be missed
	// otherwise); let that settle before changing anything. The recompute
	// is one call to the broker after the debounce, which on a loaded
	// machine under -race took longer than 3 debounces (the binding below
	// then landed first and the toolbox knew of it): nothing observable
	// says it is done, so the wait is generous.
	time.Sleep(3 * time.Second)
	// Under a runner the toolbox opens no stream of its own.
	require.Contains(t, strings.Split(alice.ok(t, "roster", nil), "\n"), "- alice (you) [Lead] offline")

	mustREST(t, p, admin, http.MethodPost, "/tool-sources/up/bindings", obj{"member": "alice"})
	// Without the runner relaying it, the toolbox does not know yet.
	time.Sleep(2 * Debounce())
	require.NotContains(t, alice.toolNames(t), "up__echo")
	before := alice.changed.Load()
	srv.Publish(relay.Event{Kind: "tool_source", Thread: "tool:up"})
	require.Eventually(t, func() bool { return alice.changed.Load() > before }, 10*time.Second, 20*time.Millisecond)
	require.Contains(t, alice.toolNames(t), "up__echo")
	require.Contains(t, alice.ok(t, "up__echo", map[string]any{"q": "relay"}), "/echo/relay")
	require.Contains(t, strings.Split(alice.ok(t, "roster", nil), "\n"), "- alice (you) [Lead] offline")
}

// Debounce is the toolbox's recompute debounce (docs/MCP.md).
func Debounce() time.Duration { return 150 * time.Millisecond }

// inspectorCLI is the MCP Inspector's CLI, pinned.
var inspectorCLI = npmcache.Package{
	Name: "@modelcontextprotocol/inspector-cli", Version: "1.0.3",
	Dir:            "inspector-cli-1.0.3",
	InstallTimeout: 5 * time.Minute,
	Verify: func(dir string) error {
		pkg := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "inspector-cli")
		b, err := os.ReadFile(filepath.Join(pkg, "package.json"))
		if err != nil {
			return err
		}
		var meta struct{ Name, Version string }
		if err := json.Unmarshal(b, &meta); err != nil {
			return err
		}
		if meta.Version != "1.0.3" {
			return fmt.Errorf("inspector-cli %s, want 1.0.3", meta.Version)
		}
		_, err = os.Stat(filepath.Join(pkg, "build", "index.js"))
		return err
	},
}

// inspect runs the Inspector CLI against `svc mcp` and returns its stdout.
func inspect(t *testing.T, p *proc, token string, args ...string) []byte {
	t.Helper()
	dir, err := inspectorCLI.Ensure(t)
	require.NoError(t, err, "installing the pinned inspector-cli")
	node, err := exec.LookPath("node")
	require.NoError(t, err, "node is needed")
	svc := childCommand(t, []string{"mcp"}, []string{"SVC_URL=" + p.base, "SVC_TOKEN=" + token})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	build := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "inspector-cli", "build")
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join(build, "cli.js"), "--cli", svc.Path, "mcp"}, args...)...)
	// The CLI finds its own package.json relative to the working directory.
	cmd.Env, cmd.Dir = svc.Env, build
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "inspector-cli: %s", stderr.String())
	return stdout.Bytes()
}

func TestE2EMCPInspectorCLI(t *testing.T) {
	p := mustStartSvc(t, procOpts{})
	admin := p.adminToken(t)
	bobTok := mustMember(t, p, admin, "bob", "Reviewer")

	var list struct {
		Tools []struct {
			Name        string `json:"name"`
			InputSchema obj    `json:"inputSchema"`
		} `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(inspect(t, p, bobTok, "--method", "tools/list"), &list))
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
	}
	require.Equal(t, sorted(memberTools), sorted(names))

	var res struct {
		Content []struct{ Type, Text string } `json:"content"`
		IsError bool                          `json:"isError"`
	}
	require.NoError(t, json.Unmarshal(inspect(t, p, bobTok, "--method", "tools/call", "--tool-name", "send", "--tool-arg", "to=admin", "--tool-arg", "body=from the inspector"), &res))
	require.False(t, res.IsError, "%+v", res)
	require.Len(t, res.Content, 1)
	require.Contains(t, res.Content[0].Text, `"body":"from the inspector"`)

	require.NoError(t, json.Unmarshal(inspect(t, p, bobTok, "--method", "tools/call", "--tool-name", "roster"), &res))
	require.Contains(t, strings.Split(res.Content[0].Text, "\n"), "- bob (you) [Reviewer] connected=1")
}
