package toolbox

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"svc/cmd/internal/relay"
)

// approvalBroker is a broker for the approvals tools: bob's permissions and
// whom bob approves for are set per test.
func approvalBroker(perms, approverOf *string) *fakeBroker {
	fb := &fakeBroker{}
	fb.h = func(method, path string, body []byte) (int, string) {
		switch {
		case path == "/briefing":
			return 200, `{"member":{"name":"bob","permissions":` + *perms + `}}`
		case path == "/tool-sources":
			return 200, `{"sources":[]}`
		case path == "/members/bob/approvers":
			return 200, `{"approvers":[],"approverOf":` + *approverOf + `}`
		case path == "/approvals?status=all":
			return 200, `{"approvals":[]}`
		case path == "/approvals/a1/decide":
			return 200, `{"id":"a1","status":"denied","sent":` + string(body) + `}`
		}
		return 500, `{"error":"internal","message":"unexpected ` + path + `"}`
	}
	return fb
}

func TestApprovalToolsAreListedForApprovers(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, perms, approverOf string
		listed                  bool
	}{
		{"nobody's approver", `[]`, `[]`, false},
		{"named approver", `[]`, `["agent"]`, true},
		{"members.manage", `["members.manage"]`, `[]`, true},
		{"objectives.create: originates objectives", `["objectives.create"]`, `[]`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			perms, of := tc.perms, tc.approverOf
			tb, err := New(ctx, approvalBroker(&perms, &of), Options{URL: "http://x"})
			require.NoError(t, err)
			require.Equal(t, tc.listed, tb.registered("approvals_list"))
			require.Equal(t, tc.listed, tb.registered("approvals_decide"))
			require.False(t, tb.registered(ApprovalPromptTool), "the prompt tool is a server of its own")
		})
	}
	perms, of := `[]`, `["agent"]`
	tb, err := New(ctx, approvalBroker(&perms, &of), Options{URL: "http://x"})
	require.NoError(t, err)
	run := func(name, raw string) string {
		res := tb.runStatic(ctx, tb.static[name], json.RawMessage(raw))
		require.False(t, res.IsError, "%+v", res.Content)
		return res.Content[0].(*mcp.TextContent).Text
	}
	require.Equal(t, `{"approvals":[]}`, run("approvals_list", `{"status":"all"}`))
	require.JSONEq(t, `{"id":"a1","status":"denied","sent":{"decision":"deny","reason":"no"}}`, run("approvals_decide", `{"id":"a1","decision":"deny","reason":"no"}`))
	res := tb.runStatic(ctx, tb.static["approvals_decide"], json.RawMessage(`{"id":"a1","decision":"maybe"}`))
	require.True(t, res.IsError)
}

func TestApprovalPromptAsksTheRunner(t *testing.T) {
	ctx := context.Background()
	srv, err := relay.Listen("", nil)
	require.NoError(t, err)
	defer srv.Close()
	got := make(chan relay.ApprovalRequest, 4)
	srv.SetApprover(func(_ context.Context, r relay.ApprovalRequest) relay.ApprovalAnswer {
		got <- r
		if r.Tool == "Write" {
			return relay.ApprovalAnswer{Reason: "Denied by alice: not there", Approval: "a2"}
		}
		return relay.ApprovalAnswer{Allow: true, Approval: "a1", DecidedBy: "alice"}
	})

	for _, tc := range []struct {
		name, args, want string
		asked            *relay.ApprovalRequest
	}{
		{"allowed: the input runs as asked", `{"tool_name":"Bash","input":{"command":"ls"},"tool_use_id":"toolu_1"}`,
			`{"behavior":"allow","updatedInput":{"command":"ls"}}`,
			&relay.ApprovalRequest{Tool: "Bash", Input: json.RawMessage(`{"command":"ls"}`), ToolUseID: "toolu_1"}},
		{"denied: the model reads the reason", `{"tool_name":"Write","input":{"file_path":"/etc/x"}}`,
			`{"behavior":"deny","message":"Denied by alice: not there"}`,
			&relay.ApprovalRequest{Tool: "Write", Input: json.RawMessage(`{"file_path":"/etc/x"}`)}},
		{"extra fields of a newer Claude Code are fine", `{"tool_name":"Bash","input":{},"new_field":1}`,
			`{"behavior":"allow","updatedInput":{}}`, &relay.ApprovalRequest{Tool: "Bash", Input: json.RawMessage(`{}`)}},
		{"no tool named: denied, no one asked", `{"input":{}}`, `{"behavior":"deny","message":"svc: the permission prompt named no tool"}`, nil},
		{"not JSON: denied", `[1`, `{"behavior":"deny","message":"svc: the permission prompt named no tool"}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := runApprovalPrompt(ctx, srv.Path(), json.RawMessage(tc.args))
			require.Len(t, res.Content, 1)
			require.JSONEq(t, tc.want, res.Content[0].(*mcp.TextContent).Text)
			if tc.asked != nil {
				r := <-got
				require.Equal(t, tc.asked.Tool, r.Tool)
				require.Equal(t, tc.asked.ToolUseID, r.ToolUseID)
				require.JSONEq(t, string(tc.asked.Input), string(r.Input))
			}
		})
	}
	require.Empty(t, got)

	// Over MCP, as Claude Code runs it (`svc mcp --approval-prompt` with
	// the runner's socket and no credential in its environment): the
	// server lists the prompt tool alone.
	cin, sout := io.Pipe()
	sin, cout := io.Pipe()
	sctx, cancel := context.WithCancel(ctx)
	served := make(chan error, 1)
	env := Env{Stdin: sin, Stdout: sout, Stderr: io.Discard, Version: "test", Getenv: func(k string) string {
		if k == relay.Env {
			return srv.Path()
		}
		return ""
	}}
	go func() {
		err := Run(sctx, []string{"--approval-prompt"}, env)
		sout.Close() // a server that gave up fails the client, not hangs it
		served <- err
	}()
	cl := mcp.NewClient(&mcp.Implementation{Name: "claude-code", Version: "test"}, nil)
	sess, err := cl.Connect(ctx, &mcp.IOTransport{Reader: cin, Writer: cout}, nil)
	require.NoError(t, err)
	tools, err := sess.ListTools(ctx, nil)
	require.NoError(t, err)
	require.Len(t, tools.Tools, 1)
	require.Equal(t, ApprovalPromptTool, tools.Tools[0].Name)
	res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: ApprovalPromptTool, Arguments: map[string]any{"tool_name": "Write", "input": map[string]any{}}})
	require.NoError(t, err)
	require.JSONEq(t, `{"behavior":"deny","message":"Denied by alice: not there"}`, res.Content[0].(*mcp.TextContent).Text)
	<-got
	require.NoError(t, sess.Close())
	cancel()
	require.NoError(t, <-served)

	// Standalone (no runner) or with the runner gone: always a denial.
	text := runApprovalPrompt(ctx, "", json.RawMessage(`{"tool_name":"Bash"}`)).Content[0].(*mcp.TextContent).Text
	require.Contains(t, text, `"behavior":"deny"`)
	require.NoError(t, srv.Close())
	text = runApprovalPrompt(ctx, srv.Path(), json.RawMessage(`{"tool_name":"Bash"}`)).Content[0].(*mcp.TextContent).Text
	require.True(t, strings.HasPrefix(text, `{"behavior":"deny","message":"svc: no decision`), text)
}

func FuzzApprovalPrompt(f *testing.F) {
	srv, err := relay.Listen("", nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = srv.Close() })
	srv.SetApprover(func(_ context.Context, r relay.ApprovalRequest) relay.ApprovalAnswer {
		return relay.ApprovalAnswer{Allow: r.Tool == "ok", Reason: "no"}
	})
	f.Add([]byte(`{"tool_name":"ok","input":{"a":1},"tool_use_id":"t"}`))
	f.Add([]byte(`{"tool_name":"Bash","input":null}`))
	f.Add([]byte(`{"tool_name":"ok","input":[1,2]}`))
	f.Add([]byte(`{"tool_name":5}`))
	f.Add([]byte(``))
	f.Add([]byte("\x00"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		res := runApprovalPrompt(context.Background(), srv.Path(), raw)
		if len(res.Content) != 1 {
			t.Fatalf("%d blocks", len(res.Content))
		}
		var d promptDecision
		if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &d); err != nil {
			t.Fatalf("answer is not JSON: %v", err)
		}
		switch d.Behavior {
		case "deny":
		case "allow":
			var args struct {
				ToolName string `json:"tool_name"`
			}
			if json.Unmarshal(raw, &args) != nil || args.ToolName != "ok" {
				t.Fatalf("allowed %q", raw)
			}
		default:
			t.Fatalf("behavior %q", d.Behavior)
		}
	})
}
