package toolbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"svc/cmd/internal/relay"
)

// ApprovalPromptServer and ApprovalPromptTool name the permission-prompt
// tool as Claude Code sees it (mcp__svc_approvals__prompt): Claude Code
// calls it (--permission-prompt-tool) when a tool needs permission, and it
// waits on the runner for a person's decision (docs/APPROVALS.md). It is
// served alone by `svc mcp --approval-prompt`, a server entry of its own
// that needs only the runner's socket: a prompt tool Claude Code cannot
// find ends its session (measured with 2.1.328), so it must not depend on
// the broker answering when the toolbox starts. Claude Code keeps the tool
// it names there from the model.
const (
	ApprovalPromptServer = "svc_approvals"
	ApprovalPromptTool   = "prompt"
)

// Pseudo-leaves that gate tools the way permission leaves do: Recompute
// grants them from what the broker and the environment say.
const (
	// gateApprover lists the approvals tools: the caller may decide
	// someone's approvals (members.manage, objectives it originates, or a
	// member naming it as an approver).
	gateApprover = "svc:approver"
)

// maxPromptArgs bounds the permission-prompt tool's arguments: a tool's
// input, which the runner caps again for the broker.
const maxPromptArgs = 4 << 20

func approvalTools() []*tool {
	return []*tool{
		{name: "approvals_list", gate: gateApprover,
			desc:   "List the approvals you may decide (other agents' requests to use a tool) and your own requests; newest first.",
			fields: []field{{name: "status", typ: tString, enum: []string{"pending", "decided", "all"}, desc: "pending (default), decided or all."}},
			run: func(ctx context.Context, c *call) (string, error) {
				q := url.Values{}
				if s := c.a.str("status"); s != "" {
					q.Set("status", s)
				}
				path := "/approvals"
				if len(q) > 0 {
					path += "?" + q.Encode()
				}
				return c.do(ctx, http.MethodGet, path, nil)
			}},
		{name: "approvals_decide", gate: gateApprover,
			desc: "Allow or deny an approval you may decide; the agent that asked continues, or reads your reason.",
			fields: []field{{name: "id", typ: tString, required: true, desc: "Approval id."},
				{name: "decision", typ: tString, required: true, enum: []string{"allow", "deny"}, desc: "allow or deny."},
				{name: "reason", typ: tString, desc: "Why; shown to the agent."}},
			run: func(ctx context.Context, c *call) (string, error) {
				return c.do(ctx, http.MethodPost, "/approvals/"+seg(c.a.str("id"))+"/decide", c.body("decision", "reason"))
			}},
	}
}

// approvalPrompt is the permission-prompt tool's definition: Claude Code's
// arguments, described loosely (the handler reads them itself).
func approvalPrompt() *mcp.Tool {
	return &mcp.Tool{
		Name:        ApprovalPromptTool,
		Description: "Asks a person whether a tool may run (the agent's permission prompt). Called by the agent itself, not by the model.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"tool_name":{"type":"string"},"input":{"type":"object"},"tool_use_id":{"type":"string"}},"required":["tool_name"]}`),
	}
}

// promptDecision is the text Claude Code reads from a permission-prompt
// tool: allow with the input to run, or deny with the message the model
// gets.
type promptDecision struct {
	Behavior     string          `json:"behavior"`
	UpdatedInput json.RawMessage `json:"updatedInput,omitempty"`
	Message      string          `json:"message,omitempty"`
}

// ServeApprovalPrompt is `svc mcp --approval-prompt`: an MCP server on in
// and out with the permission-prompt tool alone, asking the runner at
// socket, until the client closes in or ctx ends.
func ServeApprovalPrompt(ctx context.Context, in io.Reader, out io.Writer, socket, version string) error {
	if version == "" {
		version = "dev"
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: ApprovalPromptServer, Version: version}, &mcp.ServerOptions{
		Logger:       slog.New(slog.DiscardHandler),
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
	})
	srv.AddTool(approvalPrompt(), func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return runApprovalPrompt(ctx, socket, req.Params.Arguments), nil
	})
	t := &mcp.IOTransport{Reader: io.NopCloser(in), Writer: nopWriteCloser{out}}
	if err := srv.Run(ctx, t); err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("mcp: %w", err)
	}
	return nil
}

// runApprovalPrompt asks the runner at socket and waits, as long as the
// person takes (the broker's expiry bounds it): no call timeout. Anything
// that goes wrong is a denial, never an allow.
func runApprovalPrompt(ctx context.Context, socket string, raw json.RawMessage) *mcp.CallToolResult {
	deny := func(msg string) *mcp.CallToolResult {
		return promptResult(promptDecision{Behavior: "deny", Message: msg})
	}
	if len(raw) > maxPromptArgs {
		return deny(fmt.Sprintf("svc: the tool's input is over %d bytes; no person was asked", maxPromptArgs))
	}
	var args struct {
		ToolName  string          `json:"tool_name"`
		Input     json.RawMessage `json:"input"`
		ToolUseID string          `json:"tool_use_id"`
	}
	if err := json.Unmarshal(raw, &args); err != nil || args.ToolName == "" {
		return deny("svc: the permission prompt named no tool")
	}
	if socket == "" {
		return deny("svc: no person can be asked here (approvals go through svc runner)")
	}
	input := args.Input
	if len(input) == 0 || string(input) == "null" {
		input = json.RawMessage("{}")
	}
	ans, err := relay.RequestApproval(ctx, socket, relay.ApprovalRequest{Tool: args.ToolName, Input: input, ToolUseID: args.ToolUseID})
	switch {
	case err != nil:
		return deny("svc: no decision (" + err.Error() + ")")
	case ans.Allow:
		return promptResult(promptDecision{Behavior: "allow", UpdatedInput: input})
	}
	return deny(ans.Reason)
}

func promptResult(d promptDecision) *mcp.CallToolResult {
	b, _ := json.Marshal(d)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}
}

// isApprover says whether the broker names the member an approver of
// another: then it sees the approvals tools even without a permission
// that makes it one.
func (t *Toolbox) isApprover(ctx context.Context, self string) bool {
	var r struct {
		ApproverOf []string `json:"approverOf"`
	}
	if err := t.doInto(ctx, http.MethodGet, "/members/"+url.PathEscape(self)+"/approvers", nil, &r); err != nil {
		t.log.Warn("approvers not read; the approvals tools follow permissions only", "error", err.Error())
		return false
	}
	return len(r.ApproverOf) > 0
}
