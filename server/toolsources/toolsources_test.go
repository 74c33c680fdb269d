package toolsources

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	apiv1 "svc/gen/svc/v1"
	"svc/server/apierr"
	"svc/server/auth"
	"svc/server/kek"
	"svc/server/registry"
	"svc/server/toolcall"
	"svc/store"
	"svc/store/sqlite"
)

// env is the tool sources service over an in-memory store with members
// admin (tools.manage), alice and bob, a KEK unless noKEK, a fake tool
// engine, and a registry kit whose committer stores each change's event
// messages in the change's transaction, as the broker's does.
type env struct {
	st     store.Store
	tools  *Service
	engine *fakeEngine
	perms  map[string][]string
	// secretValues stand in for the secrets capability, by member.
	secretValues map[string][]string
	// deps built tools; a test may build another service over them.
	deps Deps
}

func newEnv(t *testing.T, noKEK bool, act store.ActivityStore) *env {
	t.Helper()
	ctx := context.Background()
	perms := map[string][]string{"admin": {auth.SecretsManage, auth.ToolsManage, auth.MembersManage}, "alice": {}, "bob": {}}
	st, err := sqlite.Open(ctx, "")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	names := slices.Sorted(maps.Keys(perms))
	for _, n := range names {
		require.NoError(t, st.PutMember(ctx, store.Member{Name: n, Permissions: perms[n], CreatedAt: time.Now(), UpdatedAt: time.Now()}))
	}
	var k *kek.KEK
	if !noKEK {
		key := make([]byte, kek.KeySize)
		_, err := rand.Read(key)
		require.NoError(t, err)
		k, err = kek.New(key)
		require.NoError(t, err)
	}
	kit := registry.New(registry.Deps{
		Commit: func(ctx context.Context, apply func(ctx context.Context, tx store.Tx) ([]store.Message, error)) error {
			return st.WithTx(ctx, func(tx store.Tx) error {
				msgs, err := apply(ctx, tx)
				if err != nil || len(msgs) == 0 {
					return err
				}
				for i := range msgs {
					msgs[i].CreatedAt = time.Now()
				}
				_, err = tx.AppendMessages(ctx, msgs)
				return err
			})
		},
		Members: func() []string { return names },
		Holders: func(leaf string) []string {
			var out []string
			for _, n := range names {
				if slices.Contains(perms[n], leaf) {
					out = append(out, n)
				}
			}
			return out
		},
		KEK: k,
	})
	e := &env{st: st, engine: newFakeEngine(), perms: perms, secretValues: map[string][]string{}}
	var record func(ctx context.Context, ev store.ActivityEvent) error
	if act != nil {
		record = func(ctx context.Context, ev store.ActivityEvent) error {
			_, err := act.CommitActivity(ctx, store.ActivityBatch{Events: []store.ActivityEvent{ev}})
			return err
		}
	}
	e.deps = Deps{
		Store: st, Registry: kit, Engine: e.engine, Record: record,
		SecretValues: func(_ context.Context, member string) ([]string, error) { return e.secretValues[member], nil },
		Now:          time.Now, Log: slog.New(slog.DiscardHandler),
	}
	e.tools = New(e.deps)
	return e
}

func (e *env) as(name string) context.Context {
	return auth.WithPrincipal(context.Background(), &auth.Principal{Member: name, Permissions: e.perms[name]})
}

// events returns the registry events member received on thread, oldest
// first, as "event member" ("created ", "binding_added bob").
func (e *env) events(t *testing.T, member, thread string) []string {
	t.Helper()
	msgs, err := e.st.MessagesFor(context.Background(), member, 0, 500)
	require.NoError(t, err)
	var out []string
	for _, m := range msgs {
		if m.Thread != thread {
			continue
		}
		var d struct{ Event, Member string }
		require.NoError(t, json.Unmarshal(m.Data, &d))
		out = append(out, d.Event+" "+d.Member)
	}
	return out
}

// allMessages are every message of the store as JSON, for leak checks.
func (e *env) allMessages(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, m := range []string{"admin", "alice", "bob"} {
		msgs, err := e.st.MessagesFor(context.Background(), m, 0, 1000)
		require.NoError(t, err)
		for _, x := range msgs {
			j, err := json.Marshal(x)
			require.NoError(t, err)
			b.Write(j)
		}
	}
	return b.String()
}

// requireCode asserts err is (or wraps) the domain error code.
func requireCode(t *testing.T, err error, code apierr.Code) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, code, apierr.Classify(err).Code, "%v", err)
}

func ptr[T any](v T) *T { return &v }

// fakeEngine stands in for the toolcall engine: it validates bindings by
// the contract's header guards and static origin, records the calls it
// gets and answers what the test set.
type fakeEngine struct {
	mu      sync.Mutex
	calls   []fakeCall
	result  toolcall.Result
	callErr error
	listed  []toolcall.Tool
	listErr error
}

type fakeCall struct {
	kind, url, tool string
	args            map[string]any
	cred            *toolcall.Credential
}

func newFakeEngine() *fakeEngine {
	return &fakeEngine{result: toolcall.Result{Content: []json.RawMessage{json.RawMessage(`{"type":"text","text":"ok"}`)}}}
}

func (f *fakeEngine) Validate(b toolcall.Binding, credHeader string) error {
	u, err := url.Parse(b.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || strings.Contains(u.Host, "{{") {
		return &toolcall.InvalidError{Field: "url", Message: "must be a static http or https origin"}
	}
	for h := range b.Headers {
		for _, bad := range []string{"Authorization", "Cookie", "Host", credHeader} {
			if bad != "" && strings.EqualFold(h, bad) {
				return &toolcall.InvalidError{Field: "headers." + h, Message: "may not be set"}
			}
		}
	}
	return nil
}

func (f *fakeEngine) record(c fakeCall) (toolcall.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, c)
	return f.result, f.callErr
}

func (f *fakeEngine) InvokeHTTP(_ context.Context, b toolcall.Binding, args map[string]any, cred *toolcall.Credential) (toolcall.Result, error) {
	return f.record(fakeCall{kind: "http", url: b.URL, args: args, cred: cred})
}

func (f *fakeEngine) ListMCP(_ context.Context, u string, cred *toolcall.Credential) ([]toolcall.Tool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fakeCall{kind: "list", url: u, cred: cred})
	return f.listed, f.listErr
}

func (f *fakeEngine) CallMCP(_ context.Context, u string, cred *toolcall.Credential, name string, args map[string]any) (toolcall.Result, error) {
	return f.record(fakeCall{kind: "mcp", url: u, tool: name, args: args, cred: cred})
}

// Redact replaces every secret inside strings, as toolcall.Redact does.
func (f *fakeEngine) Redact(v any, secrets ...string) any {
	switch x := v.(type) {
	case string:
		for _, s := range secrets {
			if s != "" {
				x = strings.ReplaceAll(x, s, "[REDACTED]")
			}
		}
		return x
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = f.Redact(e, secrets...)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = f.Redact(e, secrets...)
		}
		return out
	}
	return v
}

func (f *fakeEngine) lastCall(t *testing.T) fakeCall {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	require.NotEmpty(t, f.calls)
	return f.calls[len(f.calls)-1]
}

func (f *fakeEngine) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

func mcpConfig(u string) *structpb.Struct {
	s, _ := structpb.NewStruct(map[string]any{"url": u})
	return s
}

func (e *env) createSource(t *testing.T, slug, kind string, all bool) {
	t.Helper()
	req := &apiv1.CreateToolSourceRequest{Slug: slug, Kind: kind, AllMembers: &all}
	if kind == KindMCP {
		req.Config = mcpConfig("https://mcp.example.com/mcp")
	}
	_, err := e.tools.CreateToolSource(e.as("admin"), req)
	require.NoError(t, err)
}

func objectSchema() *structpb.Struct {
	s, _ := structpb.NewStruct(map[string]any{"type": "object"})
	return s
}

func (e *env) putTool(t *testing.T, slug, name string, headers map[string]string) error {
	t.Helper()
	_, err := e.tools.PutTool(e.as("admin"), &apiv1.PutToolRequest{
		Slug: slug, Name: name, Description: "d", InputSchema: objectSchema(),
		Binding: &apiv1.ToolBinding{Method: "POST", Url: "https://api.example.com/x/{{args.id}}", Headers: headers},
	})
	return err
}

func TestToolSourceCreateRefusals(t *testing.T) {
	e := newEnv(t, false, nil)
	e.createSource(t, "gh", KindCustom, false)
	for _, tc := range []struct {
		name string
		req  *apiv1.CreateToolSourceRequest
		code apierr.Code
	}{
		{"taken slug", &apiv1.CreateToolSourceRequest{Slug: "gh", Kind: KindCustom}, apierr.CodeConflict},
		{"bad kind", &apiv1.CreateToolSourceRequest{Slug: "x", Kind: "grpc"}, apierr.CodeBadRequest},
		{"bad slug", &apiv1.CreateToolSourceRequest{Slug: "X__y", Kind: KindCustom}, apierr.CodeBadRequest},
		{"mcp without url", &apiv1.CreateToolSourceRequest{Slug: "x", Kind: KindMCP}, apierr.CodeBadRequest},
		{"mcp ftp url", &apiv1.CreateToolSourceRequest{Slug: "x", Kind: KindMCP, Config: mcpConfig("ftp://h/x")}, apierr.CodeBadRequest},
		{"mcp userinfo", &apiv1.CreateToolSourceRequest{Slug: "x", Kind: KindMCP, Config: mcpConfig("https://u:p@h/x")}, apierr.CodeBadRequest},
		{"mcp no host", &apiv1.CreateToolSourceRequest{Slug: "x", Kind: KindMCP, Config: mcpConfig("https:///x")}, apierr.CodeBadRequest},
		{"control in display name", &apiv1.CreateToolSourceRequest{Slug: "x", Kind: KindCustom, DisplayName: ptr("a\nb")}, apierr.CodeBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.tools.CreateToolSource(e.as("admin"), tc.req)
			requireCode(t, err, tc.code)
		})
	}
	list, err := e.tools.ListToolSources(e.as("admin"), &apiv1.ListToolSourcesRequest{})
	require.NoError(t, err)
	require.Len(t, list.GetSources(), 1)
	_, err = e.tools.UpdateToolSource(e.as("admin"), &apiv1.UpdateToolSourceRequest{Slug: "nope", Enabled: ptr(false)})
	requireCode(t, err, apierr.CodeNotFound)
}

func TestToolSourceViews(t *testing.T) {
	e := newEnv(t, false, nil)
	e.createSource(t, "gh", KindCustom, false)
	require.NoError(t, e.putTool(t, "gh", "issue", map[string]string{"X-Trace": "1"}))
	_, err := e.tools.AddToolBinding(e.as("admin"), &apiv1.AddToolBindingRequest{Slug: "gh", Member: "bob"})
	require.NoError(t, err)
	_, err = e.tools.SetToolCredential(e.as("admin"), &apiv1.SetToolCredentialRequest{Slug: "gh", Kind: "bearer", Secret: "tok-s3cr3t"})
	require.NoError(t, err)

	for _, tc := range []struct {
		name, viewer   string
		bound, manager bool
	}{
		{"manager", "admin", false, true},
		{"bound member", "bob", true, false},
		{"other member", "alice", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.tools.GetToolSource(e.as(tc.viewer), &apiv1.GetToolSourceRequest{Slug: "gh"})
			require.NoError(t, err)
			s := got.GetSource()
			require.Equal(t, tc.bound, s.GetBound())
			require.True(t, s.GetHasCredential())
			require.EqualValues(t, 1, s.GetToolCount())
			require.Len(t, s.GetTools(), 1)
			require.Equal(t, tc.manager, s.GetTools()[0].GetBinding() != nil, "bindings for managers only")
			require.Equal(t, tc.manager, s.GetBoundMembers() != nil, "boundMembers for managers only")
			b, err := protojson.Marshal(got)
			require.NoError(t, err)
			require.NotContains(t, string(b), "tok-s3cr3t")
			list, err := e.tools.ListToolSources(e.as(tc.viewer), &apiv1.ListToolSourcesRequest{})
			require.NoError(t, err)
			require.Equal(t, tc.bound, list.GetSources()[0].GetBound())
			require.EqualValues(t, 1, list.GetSources()[0].GetToolCount())
			require.Empty(t, list.GetSources()[0].GetTools())
			require.Nil(t, list.GetSources()[0].GetBoundMembers())
		})
	}
}

func TestToolCredentialHeaderGuards(t *testing.T) {
	e := newEnv(t, false, nil)
	admin := e.as("admin")
	e.createSource(t, "gh", KindCustom, true)
	require.NoError(t, e.putTool(t, "gh", "a", map[string]string{"X-Api-Key": "literal"}))
	// A credential in a header a stored binding sets is refused.
	_, err := e.tools.SetToolCredential(admin, &apiv1.SetToolCredentialRequest{Slug: "gh", Kind: "header", HeaderName: ptr("x-api-key"), Secret: "k"})
	requireCode(t, err, apierr.CodeConflict)
	got, err := e.tools.GetToolSource(admin, &apiv1.GetToolSourceRequest{Slug: "gh"})
	require.NoError(t, err)
	require.False(t, got.GetSource().GetHasCredential(), "nothing stored on refusal")
	// And a binding setting the credential's header is refused.
	_, err = e.tools.SetToolCredential(admin, &apiv1.SetToolCredentialRequest{Slug: "gh", Kind: "header", HeaderName: ptr("X-Token"), Secret: "k"})
	require.NoError(t, err)
	requireCode(t, e.putTool(t, "gh", "b", map[string]string{"x-token": "v"}), apierr.CodeBadRequest)
	requireCode(t, e.putTool(t, "gh", "b", map[string]string{"Authorization": "v"}), apierr.CodeBadRequest)
	for _, tc := range []struct {
		name string
		req  *apiv1.SetToolCredentialRequest
		code apierr.Code
	}{
		{"bad kind", &apiv1.SetToolCredentialRequest{Slug: "gh", Kind: "basic", Secret: "k"}, apierr.CodeBadRequest},
		{"header without a name", &apiv1.SetToolCredentialRequest{Slug: "gh", Kind: "header", Secret: "k"}, apierr.CodeBadRequest},
		{"bad header name", &apiv1.SetToolCredentialRequest{Slug: "gh", Kind: "header", HeaderName: ptr("X Key"), Secret: "k"}, apierr.CodeBadRequest},
		{"reserved header", &apiv1.SetToolCredentialRequest{Slug: "gh", Kind: "header", HeaderName: ptr("Host"), Secret: "k"}, apierr.CodeBadRequest},
		{"a framing header", &apiv1.SetToolCredentialRequest{Slug: "gh", Kind: "header", HeaderName: ptr("transfer-encoding"), Secret: "k"}, apierr.CodeBadRequest},
		{"CRLF in secret", &apiv1.SetToolCredentialRequest{Slug: "gh", Kind: "bearer", Secret: "a\r\nX: y"}, apierr.CodeBadRequest},
		{"empty secret", &apiv1.SetToolCredentialRequest{Slug: "gh", Kind: "bearer"}, apierr.CodeBadRequest},
		{"unknown source", &apiv1.SetToolCredentialRequest{Slug: "nope", Kind: "bearer", Secret: "k"}, apierr.CodeNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.tools.SetToolCredential(admin, tc.req)
			requireCode(t, err, tc.code)
		})
	}
	_, err = e.tools.DeleteToolCredential(admin, &apiv1.DeleteToolCredentialRequest{Slug: "gh"})
	require.NoError(t, err)
	_, err = e.tools.DeleteToolCredential(admin, &apiv1.DeleteToolCredentialRequest{Slug: "gh"})
	requireCode(t, err, apierr.CodeNotFound)
}

func TestToolDefinitions(t *testing.T) {
	e := newEnv(t, false, nil)
	admin := e.as("admin")
	e.createSource(t, "gh", KindCustom, true)
	e.createSource(t, "m", KindMCP, true)
	requireCode(t, e.putTool(t, "m", "a", nil), apierr.CodeConflict)
	requireCode(t, e.putTool(t, "gh", "bad name", nil), apierr.CodeBadRequest)
	requireCode(t, e.putTool(t, "nope", "a", nil), apierr.CodeNotFound)
	_, err := e.tools.PutTool(admin, &apiv1.PutToolRequest{Slug: "gh", Name: "a", Binding: &apiv1.ToolBinding{Method: "GET", Url: "https://x"}})
	requireCode(t, err, apierr.CodeBadRequest) // no inputSchema
	_, err = e.tools.PutTool(admin, &apiv1.PutToolRequest{Slug: "gh", Name: "a", InputSchema: objectSchema()})
	requireCode(t, err, apierr.CodeBadRequest) // no binding
	_, err = e.tools.PutTool(admin, &apiv1.PutToolRequest{Slug: "gh", Name: "a", InputSchema: objectSchema(), Binding: &apiv1.ToolBinding{Method: "GET", Url: "https://{{args.host}}/x"}})
	requireCode(t, err, apierr.CodeBadRequest) // templated origin
	require.NoError(t, e.putTool(t, "gh", "a", nil))
	_, err = e.tools.DeleteTool(admin, &apiv1.DeleteToolRequest{Slug: "gh", Name: "a"})
	require.NoError(t, err)
	_, err = e.tools.DeleteTool(admin, &apiv1.DeleteToolRequest{Slug: "gh", Name: "a"})
	requireCode(t, err, apierr.CodeNotFound)
	require.Equal(t, []string{"created ", "tool_defined ", "tool_deleted "}, e.events(t, "bob", "tool:gh"))
}

func TestToolRefresh(t *testing.T) {
	e := newEnv(t, false, nil)
	admin := e.as("admin")
	e.createSource(t, "m", KindMCP, false)
	e.createSource(t, "c", KindCustom, false)
	_, err := e.tools.SetToolCredential(admin, &apiv1.SetToolCredentialRequest{Slug: "m", Kind: "bearer", Secret: "mcp-tok"})
	require.NoError(t, err)
	e.engine.listed = []toolcall.Tool{
		{Name: "search", Description: "find", InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)},
		{Name: "bad name!", InputSchema: json.RawMessage(`{}`)},
		{Name: "fetch", InputSchema: json.RawMessage(`[1]`)},
	}
	got, err := e.tools.RefreshToolSource(admin, &apiv1.RefreshToolSourceRequest{Slug: "m"})
	require.NoError(t, err)
	require.True(t, got.GetChanged())
	require.Len(t, got.GetTools(), 2)
	require.Equal(t, "fetch", got.GetTools()[0].GetName())
	require.Equal(t, "object", got.GetTools()[0].GetInputSchema().GetFields()["type"].GetStringValue(), "a schema that is not an object becomes the empty object schema")
	call := e.engine.lastCall(t)
	require.Equal(t, "https://mcp.example.com/mcp", call.url)
	require.Equal(t, &toolcall.Credential{Kind: "bearer", Secret: "mcp-tok"}, call.cred)

	got, err = e.tools.RefreshToolSource(admin, &apiv1.RefreshToolSourceRequest{Slug: "m"})
	require.NoError(t, err)
	require.False(t, got.GetChanged())

	e.engine.listErr = &toolcall.UpstreamError{Err: errors.New("connection refused")}
	_, err = e.tools.RefreshToolSource(admin, &apiv1.RefreshToolSourceRequest{Slug: "m"})
	requireCode(t, err, apierr.CodeBadGateway)
	src, err := e.tools.GetToolSource(admin, &apiv1.GetToolSourceRequest{Slug: "m"})
	require.NoError(t, err)
	require.Len(t, src.GetSource().GetTools(), 2, "a failed refresh keeps the cache")

	_, err = e.tools.RefreshToolSource(admin, &apiv1.RefreshToolSourceRequest{Slug: "c"})
	requireCode(t, err, apierr.CodeConflict)
	_, err = e.tools.RefreshToolSource(admin, &apiv1.RefreshToolSourceRequest{Slug: "nope"})
	requireCode(t, err, apierr.CodeNotFound)
	require.Equal(t, []string{"created ", "credential_set ", "refreshed "}, e.events(t, "admin", "tool:m"))
}

func TestInvokeFailureOrder(t *testing.T) {
	e := newEnv(t, false, nil)
	admin := e.as("admin")
	e.createSource(t, "gh", KindCustom, false)
	require.NoError(t, e.putTool(t, "gh", "a", nil))
	invoke := func(member, slug, tool string) error {
		_, err := e.tools.InvokeTool(e.as(member), &apiv1.InvokeToolRequest{Slug: slug, Name: tool})
		return err
	}
	requireCode(t, invoke("bob", "nope", "a"), apierr.CodeNotFound)
	// Unbound comes before disabled and unknown tool.
	_, err := e.tools.UpdateToolSource(admin, &apiv1.UpdateToolSourceRequest{Slug: "gh", Enabled: ptr(false)})
	require.NoError(t, err)
	requireCode(t, invoke("bob", "gh", "missing"), apierr.CodeForbidden)
	requireCode(t, invoke("admin", "gh", "a"), apierr.CodeForbidden) // tools.manage does not bind
	_, err = e.tools.AddToolBinding(admin, &apiv1.AddToolBindingRequest{Slug: "gh", Member: "bob"})
	require.NoError(t, err)
	requireCode(t, invoke("bob", "gh", "missing"), apierr.CodeConflict)
	_, err = e.tools.UpdateToolSource(admin, &apiv1.UpdateToolSourceRequest{Slug: "gh", Enabled: ptr(true)})
	require.NoError(t, err)
	requireCode(t, invoke("bob", "gh", "missing"), apierr.CodeNotFound)
	require.Equal(t, 0, e.engine.callCount(), "no refused call reaches the engine")
	require.NoError(t, invoke("bob", "gh", "a"))
	requireCode(t, invoke("alice", "gh", "a"), apierr.CodeForbidden)
	_, err = e.tools.UpdateToolSource(admin, &apiv1.UpdateToolSourceRequest{Slug: "gh", AllMembers: ptr(true)})
	require.NoError(t, err)
	require.NoError(t, invoke("alice", "gh", "a"))

	big, err := structpb.NewStruct(map[string]any{"x": strings.Repeat("a", MaxInvokeArgs)})
	require.NoError(t, err)
	_, err = e.tools.InvokeTool(e.as("bob"), &apiv1.InvokeToolRequest{Slug: "gh", Name: "a", Args: big})
	requireCode(t, err, apierr.CodePayloadTooLarge)
}

func TestInvokeCallsAndRedacts(t *testing.T) {
	act, err := sqlite.OpenActivity(context.Background(), "")
	require.NoError(t, err)
	t.Cleanup(func() { _ = act.Close() })
	e := newEnv(t, false, act)
	admin := e.as("admin")
	e.createSource(t, "gh", KindCustom, false)
	e.createSource(t, "m", KindMCP, true)
	require.NoError(t, e.putTool(t, "gh", "a", nil))
	_, err = e.tools.AddToolBinding(admin, &apiv1.AddToolBindingRequest{Slug: "gh", Member: "bob"})
	require.NoError(t, err)
	_, err = e.tools.SetToolCredential(admin, &apiv1.SetToolCredentialRequest{Slug: "gh", Kind: "header", HeaderName: ptr("X-Key"), Secret: "cred-s3cr3t"})
	require.NoError(t, err)
	// A secret bob may use (the secrets capability's MemberValues).
	e.secretValues["bob"] = []string{"env-s3cr3t"}

	args, err := structpb.NewStruct(map[string]any{"id": "7", "note": "use cred-s3cr3t and env-s3cr3t", "list": []any{"env-s3cr3t"}})
	require.NoError(t, err)
	e.engine.result = toolcall.Result{Content: []json.RawMessage{json.RawMessage(`{"type":"text","text":"done"}`)}, IsError: true}
	got, err := e.tools.InvokeTool(e.as("bob"), &apiv1.InvokeToolRequest{Slug: "gh", Name: "a", Args: args})
	require.NoError(t, err)
	require.True(t, got.GetIsError())
	require.Equal(t, "done", got.GetContent()[0].GetStructValue().GetFields()["text"].GetStringValue())
	call := e.engine.lastCall(t)
	require.Equal(t, "http", call.kind)
	require.Equal(t, "https://api.example.com/x/{{args.id}}", call.url)
	require.Equal(t, "use cred-s3cr3t and env-s3cr3t", call.args["note"], "the tool gets the args as sent")
	require.Equal(t, &toolcall.Credential{Kind: "header", HeaderName: "X-Key", Secret: "cred-s3cr3t"}, call.cred)

	rows, err := act.ListActivity(context.Background(), store.ActivityFilter{Member: "bob", Kinds: []string{kindToolAction}})
	require.NoError(t, err)
	require.Len(t, rows, 1)
	var data map[string]any
	require.NoError(t, json.Unmarshal(rows[0].Data, &data))
	require.Equal(t, "gh__a", data["tool"])
	require.Equal(t, false, data["success"])
	require.Equal(t, map[string]any{"id": "7", "note": "use [REDACTED] and [REDACTED]", "list": []any{"[REDACTED]"}}, data["input"])

	// Redaction grows the input wherever a secret occurs; the row keeps at
	// most MaxToolInput of it, still redacted.
	big, err := structpb.NewStruct(map[string]any{"x": strings.Repeat("env-s3cr3t", 60_000)})
	require.NoError(t, err)
	_, err = e.tools.InvokeTool(e.as("bob"), &apiv1.InvokeToolRequest{Slug: "gh", Name: "a", Args: big})
	require.NoError(t, err)
	rows, err = act.ListActivity(context.Background(), store.ActivityFilter{Member: "bob", Kinds: []string{kindToolAction}})
	require.NoError(t, err)
	require.Len(t, rows, 2)
	require.Less(t, len(rows[0].Data), MaxToolInput+1024, "newest first: the big call's row is bounded")
	require.NotContains(t, string(rows[0].Data), "env-s3cr3t")
	data = nil
	require.NoError(t, json.Unmarshal(rows[0].Data, &data))
	require.Equal(t, true, data["inputTruncated"])
	require.IsType(t, "", data["input"])

	// An MCP tool must be in the cache; a miss does not go upstream.
	n := e.engine.callCount()
	_, err = e.tools.InvokeTool(e.as("alice"), &apiv1.InvokeToolRequest{Slug: "m", Name: "search"})
	requireCode(t, err, apierr.CodeNotFound)
	require.Equal(t, n, e.engine.callCount())
	e.engine.listed = []toolcall.Tool{{Name: "search", InputSchema: json.RawMessage(`{"type":"object"}`)}}
	_, err = e.tools.RefreshToolSource(admin, &apiv1.RefreshToolSourceRequest{Slug: "m"})
	require.NoError(t, err)
	e.engine.result = toolcall.Result{Content: []json.RawMessage{json.RawMessage(`{"type":"text","text":"hit"}`)}}
	got, err = e.tools.InvokeTool(e.as("alice"), &apiv1.InvokeToolRequest{Slug: "m", Name: "search"})
	require.NoError(t, err)
	require.False(t, got.GetIsError())
	call = e.engine.lastCall(t)
	require.Equal(t, "mcp", call.kind)
	require.Equal(t, "search", call.tool)
	require.Nil(t, call.cred)

	// An upstream the engine cannot reach is a failed call, not an error.
	e.engine.callErr = &toolcall.UpstreamError{Err: errors.New("refused")}
	got, err = e.tools.InvokeTool(e.as("alice"), &apiv1.InvokeToolRequest{Slug: "m", Name: "search"})
	require.NoError(t, err)
	require.True(t, got.GetIsError())
}

func TestToolsWithoutKEK(t *testing.T) {
	e := newEnv(t, true, nil)
	e.createSource(t, "gh", KindCustom, true)
	_, err := e.tools.SetToolCredential(e.as("admin"), &apiv1.SetToolCredentialRequest{Slug: "gh", Kind: "bearer", Secret: "k"})
	requireCode(t, err, apierr.CodeUnavailable)
	got, err := e.tools.GetToolSource(e.as("admin"), &apiv1.GetToolSourceRequest{Slug: "gh"})
	require.NoError(t, err)
	require.False(t, got.GetSource().GetHasCredential())
	// A source without a credential still works without a KEK.
	require.NoError(t, e.putTool(t, "gh", "a", nil))
	_, err = e.tools.InvokeTool(e.as("bob"), &apiv1.InvokeToolRequest{Slug: "gh", Name: "a"})
	require.NoError(t, err)
}

func TestToolSourceEventRecipients(t *testing.T) {
	e := newEnv(t, false, nil)
	admin := e.as("admin")
	e.createSource(t, "gh", KindCustom, false)
	_, err := e.tools.AddToolBinding(admin, &apiv1.AddToolBindingRequest{Slug: "gh", Member: "bob"})
	require.NoError(t, err)
	_, err = e.tools.AddToolBinding(admin, &apiv1.AddToolBindingRequest{Slug: "gh", Member: "nobody"})
	requireCode(t, err, apierr.CodeBadRequest)
	_, err = e.tools.SetToolCredential(admin, &apiv1.SetToolCredentialRequest{Slug: "gh", Kind: "bearer", Secret: "cred-value-x"})
	require.NoError(t, err)
	_, err = e.tools.RemoveToolBinding(admin, &apiv1.RemoveToolBindingRequest{Slug: "gh", Name: "bob"})
	require.NoError(t, err)
	_, err = e.tools.RemoveToolBinding(admin, &apiv1.RemoveToolBindingRequest{Slug: "gh", Name: "bob"})
	requireCode(t, err, apierr.CodeNotFound)
	_, err = e.tools.UpdateToolSource(admin, &apiv1.UpdateToolSourceRequest{Slug: "gh", DisplayName: ptr("GitHub")})
	require.NoError(t, err)
	_, err = e.tools.DeleteToolSource(admin, &apiv1.DeleteToolSourceRequest{Slug: "gh"})
	require.NoError(t, err)
	_, err = e.tools.DeleteToolSource(admin, &apiv1.DeleteToolSourceRequest{Slug: "gh"})
	requireCode(t, err, apierr.CodeNotFound)

	require.Equal(t, []string{"created ", "binding_added bob", "credential_set ", "binding_removed bob", "updated ", "deleted "}, e.events(t, "admin", "tool:gh"))
	require.Equal(t, []string{"binding_added bob", "credential_set ", "binding_removed bob"}, e.events(t, "bob", "tool:gh"))
	require.Empty(t, e.events(t, "alice", "tool:gh"))
	require.NotContains(t, e.allMessages(t), "cred-value-x")

	// Recreated, nothing of the old source remains.
	e.createSource(t, "gh", KindCustom, false)
	got, err := e.tools.GetToolSource(admin, &apiv1.GetToolSourceRequest{Slug: "gh"})
	require.NoError(t, err)
	require.False(t, got.GetSource().GetHasCredential())
	require.Empty(t, got.GetSource().GetTools())
}
