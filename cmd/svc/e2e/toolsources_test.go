package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	apiv1 "svc/gen/svc/v1"
)

func init() {
	for name, spec := range map[string]rpcSpec{
		"ListToolSources":      {http.MethodGet, "/tool-sources", http.StatusOK, "", unaryOn(apiv1.NewToolSourcesClient, apiv1.ToolSourcesClient.ListToolSources)},
		"CreateToolSource":     {http.MethodPost, "/tool-sources", http.StatusCreated, "source", unaryOn(apiv1.NewToolSourcesClient, apiv1.ToolSourcesClient.CreateToolSource)},
		"GetToolSource":        {http.MethodGet, "/tool-sources/{slug}", http.StatusOK, "source", unaryOn(apiv1.NewToolSourcesClient, apiv1.ToolSourcesClient.GetToolSource)},
		"UpdateToolSource":     {http.MethodPatch, "/tool-sources/{slug}", http.StatusOK, "source", unaryOn(apiv1.NewToolSourcesClient, apiv1.ToolSourcesClient.UpdateToolSource)},
		"DeleteToolSource":     {http.MethodDelete, "/tool-sources/{slug}", http.StatusNoContent, "", unaryOn(apiv1.NewToolSourcesClient, apiv1.ToolSourcesClient.DeleteToolSource)},
		"SetToolCredential":    {http.MethodPut, "/tool-sources/{slug}/credential", http.StatusOK, "source", unaryOn(apiv1.NewToolSourcesClient, apiv1.ToolSourcesClient.SetToolCredential)},
		"DeleteToolCredential": {http.MethodDelete, "/tool-sources/{slug}/credential", http.StatusNoContent, "", unaryOn(apiv1.NewToolSourcesClient, apiv1.ToolSourcesClient.DeleteToolCredential)},
		"AddToolBinding":       {http.MethodPost, "/tool-sources/{slug}/bindings", http.StatusOK, "source", unaryOn(apiv1.NewToolSourcesClient, apiv1.ToolSourcesClient.AddToolBinding)},
		"RemoveToolBinding":    {http.MethodDelete, "/tool-sources/{slug}/bindings/{name}", http.StatusNoContent, "", unaryOn(apiv1.NewToolSourcesClient, apiv1.ToolSourcesClient.RemoveToolBinding)},
		"PutTool":              {http.MethodPut, "/tool-sources/{slug}/tools/{name}", http.StatusOK, "source", unaryOn(apiv1.NewToolSourcesClient, apiv1.ToolSourcesClient.PutTool)},
		"DeleteTool":           {http.MethodDelete, "/tool-sources/{slug}/tools/{name}", http.StatusNoContent, "", unaryOn(apiv1.NewToolSourcesClient, apiv1.ToolSourcesClient.DeleteTool)},
		"RefreshToolSource":    {http.MethodPost, "/tool-sources/{slug}/refresh", http.StatusOK, "", unaryOn(apiv1.NewToolSourcesClient, apiv1.ToolSourcesClient.RefreshToolSource)},
		"InvokeTool":           {http.MethodPost, "/tool-sources/{slug}/tools/{name}/invoke", http.StatusOK, "", unaryOn(apiv1.NewToolSourcesClient, apiv1.ToolSourcesClient.InvokeTool)},
	} {
		rpcs[name] = spec
	}
}

// TestE2EToolSourceGates calls every tool sources route as nobody, as a
// plain member and as a tools.manage holder.
func TestE2EToolSourceGates(t *testing.T) {
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		bob := bearer(createMember(t, d, admin, "bob"))
		mustCall(t, d, admin, "CreateToolSource", obj{"slug": "gh", "kind": "custom"})
		mustCall(t, d, admin, "CreateToolSource", obj{"slug": "m", "kind": "mcp", "config": obj{"url": "https://mcp.invalid/mcp"}})
		schema := obj{"type": "object"}
		binding := obj{"method": "GET", "url": "https://api.invalid/x"}
		manageOnly := []struct {
			op  string
			req obj
		}{
			{"CreateToolSource", obj{"slug": "x", "kind": "custom"}},
			{"UpdateToolSource", obj{"slug": "gh", "enabled": false}},
			{"DeleteToolSource", obj{"slug": "gh"}},
			{"SetToolCredential", obj{"slug": "gh", "kind": "bearer", "secret": "s"}},
			{"DeleteToolCredential", obj{"slug": "gh"}},
			{"AddToolBinding", obj{"slug": "gh", "member": "bob"}},
			{"RemoveToolBinding", obj{"slug": "gh", "name": "bob"}},
			{"PutTool", obj{"slug": "gh", "name": "t", "inputSchema": schema, "binding": binding}},
			{"DeleteTool", obj{"slug": "gh", "name": "t"}},
			{"RefreshToolSource", obj{"slug": "m"}},
		}
		for _, c := range manageOnly {
			mustFail(t, d, anonymous, c.op, c.req, "unauthenticated")
			mustFail(t, d, bob, c.op, c.req, "forbidden")
		}
		for _, c := range []struct {
			op  string
			req obj
		}{{"ListToolSources", nil}, {"GetToolSource", obj{"slug": "gh"}}, {"InvokeTool", obj{"slug": "gh", "name": "t"}}} {
			mustFail(t, d, anonymous, c.op, c.req, "unauthenticated")
		}
		mustCall(t, d, bob, "ListToolSources", nil)
		got := mustCall(t, d, bob, "GetToolSource", obj{"slug": "gh"})
		require.NotContains(t, got, "boundMembers")
		require.Equal(t, []any{}, mustCall(t, d, admin, "GetToolSource", obj{"slug": "gh"})["boundMembers"])

		// Invoke: 403 unbound, then 409 disabled, then 404 unknown tool.
		mustFail(t, d, bob, "InvokeTool", obj{"slug": "nope", "name": "t"}, "not_found")
		mustCall(t, d, admin, "UpdateToolSource", obj{"slug": "gh", "enabled": false})
		mustFail(t, d, bob, "InvokeTool", obj{"slug": "gh", "name": "t"}, "forbidden")
		mustCall(t, d, admin, "AddToolBinding", obj{"slug": "gh", "member": "bob"})
		mustFail(t, d, bob, "InvokeTool", obj{"slug": "gh", "name": "t"}, "conflict")
		mustCall(t, d, admin, "UpdateToolSource", obj{"slug": "gh", "enabled": true})
		mustFail(t, d, bob, "InvokeTool", obj{"slug": "gh", "name": "t"}, "not_found")
		// 1 MiB of args passes (its REST body is over the default 1 MiB
		// cap); a byte more is 413.
		fits := strings.Repeat("a", 1<<20-12) // args {"x":"…"}: 1 MiB - 4 bytes
		mustFail(t, d, bob, "InvokeTool", obj{"slug": "gh", "name": "t", "args": obj{"x": fits}}, "not_found")
		big := strings.Repeat("a", 1<<20)
		mustFail(t, d, bob, "InvokeTool", obj{"slug": "gh", "name": "t", "args": obj{"x": big}}, "payload_too_large")

		// The admin's changes, answered as the table says.
		mustCall(t, d, admin, "SetToolCredential", obj{"slug": "gh", "kind": "header", "headerName": "X-Key", "secret": "s"})
		require.Equal(t, true, mustCall(t, d, bob, "GetToolSource", obj{"slug": "gh"})["hasCredential"])
		mustCall(t, d, admin, "DeleteToolCredential", obj{"slug": "gh"})
		mustFail(t, d, admin, "DeleteToolCredential", obj{"slug": "gh"}, "not_found")
		mustFail(t, d, admin, "DeleteTool", obj{"slug": "gh", "name": "t"}, "not_found")
		mustFail(t, d, admin, "RefreshToolSource", obj{"slug": "gh"}, "conflict")
		mustFail(t, d, admin, "PutTool", obj{"slug": "m", "name": "t", "inputSchema": schema, "binding": binding}, "conflict")
		mustCall(t, d, admin, "RemoveToolBinding", obj{"slug": "gh", "name": "bob"})
		mustFail(t, d, admin, "RemoveToolBinding", obj{"slug": "gh", "name": "bob"}, "not_found")
		mustCall(t, d, admin, "DeleteToolSource", obj{"slug": "gh"})
		mustFail(t, d, admin, "DeleteToolSource", obj{"slug": "gh"}, "not_found")
	})
}

// TestE2EToolSourceBadInput refuses what the spec refuses.
func TestE2EToolSourceBadInput(t *testing.T) {
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		mustCall(t, d, admin, "CreateToolSource", obj{"slug": "gh", "kind": "custom"})
		for _, tc := range []struct {
			name string
			req  obj
			code string
		}{
			{"taken slug", obj{"slug": "gh", "kind": "custom"}, "conflict"},
			{"bad kind", obj{"slug": "a", "kind": "ftp"}, "bad_request"},
			{"mcp without url", obj{"slug": "a", "kind": "mcp"}, "bad_request"},
			{"mcp url not http", obj{"slug": "a", "kind": "mcp", "config": obj{"url": "file:///etc/passwd"}}, "bad_request"},
			{"bad slug", obj{"slug": "a__b", "kind": "custom"}, "bad_request"},
		} {
			mustFail(t, d, admin, "CreateToolSource", tc.req, tc.code)
		}
		mustFail(t, d, admin, "SetToolCredential", obj{"slug": "gh", "kind": "basic", "secret": "s"}, "bad_request")
		mustFail(t, d, admin, "SetToolCredential", obj{"slug": "gh", "kind": "bearer", "secret": "a\r\nb"}, "bad_request")
		mustFail(t, d, admin, "AddToolBinding", obj{"slug": "gh", "member": "ghost"}, "bad_request")
		require.Len(t, listOf(t, mustCall(t, d, admin, "ListToolSources", nil), "sources"), 1)
	})
}

// TestE2EToolSourceEvents: a bound member hears of changes on tool:<slug>
// and of its own unbinding.
func TestE2EToolSourceEvents(t *testing.T) {
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		bobTok := createMember(t, d, admin, "bob")
		carol := bearer(createMember(t, d, admin, "carol"))
		stream := p.subscribeSSE(t, bobTok, "bob", "")
		mustCall(t, d, admin, "CreateToolSource", obj{"slug": "gh", "kind": "custom"})
		mustCall(t, d, admin, "AddToolBinding", obj{"slug": "gh", "member": "bob"})
		mustCall(t, d, admin, "SetToolCredential", obj{"slug": "gh", "kind": "bearer", "secret": "tool-e2e-cred"})
		mustCall(t, d, admin, "RemoveToolBinding", obj{"slug": "gh", "name": "bob"})
		for _, want := range []string{"binding_added", "credential_set", "binding_removed"} {
			m := stream.nextMessage(t)
			data, _ := m["data"].(obj)
			require.Equal(t, "tool:gh", data["thread"])
			require.Equal(t, "tool_source", data["kind"])
			require.Equal(t, want, data["event"])
		}
		require.Len(t, listOf(t, mustCall(t, d, bearer(bobTok), "History", obj{"thread": "tool:gh"}), "messages"), 3)
		mustFail(t, d, carol, "History", obj{"thread": "tool:gh"}, "forbidden")
	})
}

// TestE2ERegistryCrawl stores secrets and credentials with distinctive
// values, then reads every registry route as the admin and as a member,
// and requires that no answer and no live message carries a value.
func TestE2ERegistryCrawl(t *testing.T) {
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		bobTok := createMember(t, d, admin, "bob")
		bob := bearer(bobTok)
		adminTok := strings.TrimPrefix(admin.authorization, "Bearer ")
		streams := []*sseStream{p.subscribeSSE(t, adminTok, "admin", ""), p.subscribeSSE(t, bobTok, "bob", "")}
		values := []string{"crawl-secret-value-1", "crawl-secret-value-2", "crawl-cred-bearer-3", "crawl-cred-header-4"}

		mustCall(t, d, admin, "CreateSecret", obj{"slug": "one", "envName": "ONE", "allMembers": true})
		mustCall(t, d, admin, "SetSecretValue", obj{"slug": "one", "value": values[0]})
		mustCall(t, d, admin, "CreateSecret", obj{"slug": "two", "envName": "TWO"})
		mustCall(t, d, admin, "AddSecretBinding", obj{"slug": "two", "member": "bob"})
		mustCall(t, d, admin, "SetSecretValue", obj{"slug": "two", "value": values[1]})
		mustCall(t, d, admin, "CreateToolSource", obj{"slug": "gh", "kind": "custom", "allMembers": true})
		mustCall(t, d, admin, "SetToolCredential", obj{"slug": "gh", "kind": "bearer", "secret": values[2]})
		mustCall(t, d, admin, "CreateToolSource", obj{"slug": "m", "kind": "mcp", "config": obj{"url": "https://mcp.invalid/mcp"}})
		mustCall(t, d, admin, "AddToolBinding", obj{"slug": "m", "member": "bob"})
		mustCall(t, d, admin, "SetToolCredential", obj{"slug": "m", "kind": "header", "headerName": "X-Key", "secret": values[3]})

		reads := []struct {
			op  string
			req obj
		}{
			{"ListSecrets", nil}, {"GetSecret", obj{"slug": "one"}}, {"GetSecret", obj{"slug": "two"}},
			{"ListToolSources", nil}, {"GetToolSource", obj{"slug": "gh"}}, {"GetToolSource", obj{"slug": "m"}},
			{"History", obj{"thread": "secret:one"}}, {"History", obj{"thread": "secret:two"}},
			{"History", obj{"thread": "tool:gh"}}, {"History", obj{"thread": "tool:m"}},
		}
		for _, c := range []cred{admin, bob} {
			for _, r := range reads {
				res := d.call(t, c, r.op, r.req)
				require.Empty(t, res.code, "%s %v", r.op, r.req)
				requireNoValue(t, res.body, values, r.op)
			}
		}
		// Resolve is the one route that answers values: the caller's own.
		require.Equal(t, obj{"ONE": values[0], "TWO": values[1]}, mustCall(t, d, bob, "ResolveSecrets", nil)["env"])
		require.Equal(t, obj{"ONE": values[0]}, mustCall(t, d, admin, "ResolveSecrets", nil)["env"])

		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		for _, s := range streams {
			n := 0
		read:
			for {
				select {
				case ev := <-s.events:
					n++
					requireNoValue(t, strings.Join(ev.lines, "\n"), values, "SSE")
				case <-ctx.Done():
					break read
				case <-time.After(300 * time.Millisecond):
					break read
				}
			}
			require.Positive(t, n, "the stream carried the registry events")
		}
	})
}

// requireNoValue fails when v, rendered, holds any of values.
func requireNoValue(t *testing.T, v any, values []string, what string) {
	t.Helper()
	s, ok := v.(string)
	if !ok {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		s = string(b)
	}
	for _, val := range values {
		require.NotContains(t, s, val, "%s leaks a stored value", what)
	}
}
