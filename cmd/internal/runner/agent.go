package runner

import (
	"context"
	"encoding/json"
	"io"
	"time"

	"svc/cmd/internal/relay"
)

// Agent is one kind of agent the runner drives: Claude Code, Codex, or a
// plain agent that reads one JSON turn per line. The runner picks it from
// the agent command's base name (or --agent) and never knows more about an
// agent than this interface says, so a new agent is a new adapter.
type Agent interface {
	// Name is the adapter's name: "claude", "codex", "plain".
	Name() string
	// Command returns the process to start: the user's command with the
	// adapter's flags added, and the environment entries (KEY=VALUE) to
	// add to the runner's own environment and the setup's Env. It may write
	// private files (MCP config, settings) into s.Dir.
	Command(s Setup) (argv []string, env []string, err error)
	// Attach is called once the process runs, with its stdin and stdout.
	// The session reads stdout until EOF itself; what it learns there
	// (a turn ended, the session started) it sends on events, which the
	// runner merges with the hook events. Output meant for a person goes
	// to log.
	Attach(stdin io.WriteCloser, stdout io.Reader, events chan<- Event, log io.Writer) Session
	// ParseHook turns one hook payload (the JSON the agent gives its hook
	// command on stdin) into the events it means; none for a hook that
	// means nothing to the runner.
	ParseHook(payload json.RawMessage) []Event
}

// Setup is what the runner gives an adapter to build the agent's command.
type Setup struct {
	// Argv is the user's agent command, after `--`.
	Argv []string
	// Dir is a private 0700 directory for the adapter's files; removed
	// when the runner exits.
	Dir string
	// Svc is the absolute path of the svc binary: the agent's MCP server
	// is `Svc mcp` and its hook command is `Svc hook`.
	Svc string
	// MCPEnv is the environment of the agent's `svc mcp` (SVC_URL,
	// SVC_RUNNER_SOCKET, SVC_RUNNER_TICKET: a one-time ticket, never the
	// token), for adapters whose MCP config names an environment.
	MCPEnv map[string]string
	// Env is the environment the runner adds for the agent itself: the
	// member's secrets, the OTLP exporter settings (the runner's relay and
	// its key), SVC_RUNNER_SOCKET.
	Env map[string]string
	// Log is the runner's log (redacted): the adapter's own problems, and
	// those of what it starts (the capturing proxy).
	Log io.Writer
	// SystemPrompt is the briefing: member record, team directive and
	// context, and the standing hooks section.
	SystemPrompt string
	// Capture is false under --no-capture: the adapter must not switch on
	// anything that reports activity (telemetry, hooks that upload).
	Capture bool
	// Approve asks a person whether the agent may use a tool and waits for
	// the decision (docs/APPROVALS.md): for adapters whose agent asks its
	// client (Codex's approval requests). It returns a refusal when ctx
	// ends first. Claude Code asks through the toolbox's permission-prompt
	// tool, which reaches the same function over the relay.
	Approve func(ctx context.Context, r relay.ApprovalRequest) relay.ApprovalAnswer
	// Inferences takes each full model call an adapter captures (the
	// provider's request and response JSON, a streamed response already
	// reassembled): the runner redacts it and uploads it as a GenAI record
	// (POST /members/:name/genai). It never blocks. Nil under --no-capture.
	Inferences func(Inference)
}

// Inference is one captured model call.
type Inference struct {
	// TS is the capture time: when the response ended.
	TS time.Time
	// Request and Response are the provider's JSON bodies.
	Request, Response []byte
	// Credentials are values the call's own headers carried (the
	// provider's API key): redacted from the upload like the member's
	// secrets (capture.Exchange.Credentials).
	Credentials []string
}

// Session is a running agent.
type Session interface {
	// Deliver starts a new turn holding t. An error means the turn was not
	// delivered; the runner keeps t and tries again at the next idle.
	Deliver(ctx context.Context, t Turn) error
	// Close ends the agent's input (EOF on its stdin).
	Close() error
}

// Turn is one thing the runner hands the agent as a new turn: a message
// from the broker, or the runner's own context re-brief.
type Turn struct {
	// Text is the turn as the agent reads it: the header line (sender,
	// thread, level, id) and the body.
	Text string
	// MessageID is the broker message id ("" for the re-brief).
	MessageID string
	// Meta is the message's meta; the re-brief carries
	// {kind: context_refresh, from: svc}.
	Meta map[string]any
}

// EventKind is what an agent event means to the runner's state machine
// (docs/RUNNER.md).
type EventKind int

const (
	// TurnStart: a prompt was submitted, a turn started.
	TurnStart EventKind = iota + 1
	// TurnEnd: the turn stopped; clears blocked.
	TurnEnd
	// Blocked: a permission prompt, needs-input or elicitation.
	Blocked
	// Unblocked: the idle-prompt notification; clears blocked.
	Unblocked
	// ToolStart and ToolEnd move the in-flight tool counter.
	ToolStart
	ToolEnd
	// SessionStart: the agent's session (re)started; Source says why
	// ("startup", "resume", "clear", "compact"). After "compact" the
	// runner sends the context re-brief.
	SessionStart
	// ApprovalWait and ApprovalDone bracket the wait for a person's
	// decision on an approval: the agent is blocked in between. The runner
	// raises them itself (approval.go); adapters never send them.
	ApprovalWait
	ApprovalDone
)

// Event is one normalized agent event.
type Event struct {
	Kind EventKind
	// Source is SessionStart's reason.
	Source string
	// Tool, ToolInput and ToolResult describe ToolStart/ToolEnd; ToolEnd
	// with a result is uploaded as a redacted tool_action.
	Tool       string
	ToolInput  json.RawMessage
	ToolResult json.RawMessage
	// ToolUseID is the agent's id of the tool call ("" when the agent
	// gives none): a denied approval closes the in-flight count of that
	// call, and only once.
	ToolUseID string
	// Failed marks a TurnEnd of a turn that ended with an error (Codex's
	// interrupted or failed turn, Claude Code's error result): while the
	// runner stops, such a turn is handed back rather than acknowledged.
	Failed bool
}
