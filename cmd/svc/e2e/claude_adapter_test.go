package e2e

// The Claude Code adapter of `svc runner` (cmd/internal/runner/claude.go,
// docs/RUNNER-CLAUDE.md) against the real Claude Code under a scripted stub
// model, without a broker: the test plays the runner. It builds the agent's
// command with the adapter, starts it, attaches, listens on the runner's
// relay socket and delivers turns. The "svc" the agent is given is this test
// binary in a child mode (ccaChildEnv): `svc hook` reports its payload on
// the relay socket as the real one does, `svc mcp` serves one tool (echo)
// over stdio with the MCP Go SDK.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"svc/cmd/internal/relay"
	"svc/cmd/internal/runner"
	"svc/cmd/internal/toolbox"
	"svc/cmd/svc/internal/agenttest"
	"svc/cmd/svc/internal/npmcache"
)

const (
	// ccaChildEnv makes this test binary act as `svc hook` / `svc mcp`.
	ccaChildEnv = "SVC_CCA_CHILD"
	// ccaMarkEnv is set in the MCP server's environment (Setup.MCPEnv);
	// its echo tool repeats it, which shows mcp.json's env reached it.
	ccaMarkEnv = "SVC_CCA_MARK"
	// ccaWait bounds one wait for the agent (a turn, a hook, an event).
	ccaWait = 60 * time.Second
)

func init() {
	if os.Getenv(ccaChildEnv) != "1" || len(os.Args) < 2 {
		return
	}
	switch os.Args[1] {
	case "hook":
		os.Exit(ccaHook())
	case "mcp":
		os.Exit(ccaMCP())
	}
	fmt.Fprintf(os.Stderr, "cca child: unknown command %q\n", os.Args[1])
	os.Exit(1)
}

// ccaHook is `svc hook`: the payload on stdin goes to the runner's socket.
// Nothing is printed on stdout (Claude Code would take it as context), and
// a failure exits 1, never 2 (which would block the prompt or the tool).
func ccaHook() int {
	payload, err := io.ReadAll(io.LimitReader(os.Stdin, relay.MaxLine))
	if err != nil {
		fmt.Fprintln(os.Stderr, "svc hook:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	if err := relay.SendHook(ctx, os.Getenv(relay.Env), payload); err != nil {
		fmt.Fprintln(os.Stderr, "svc hook:", err)
		return 1
	}
	return 0
}

type ccaEchoIn struct {
	Text string `json:"text" jsonschema:"the text to echo"`
}

// ccaMCP is `svc mcp` with one tool: echo; `svc mcp --approval-prompt` is
// the real permission-prompt server, asking the test's relay socket.
func ccaMCP() int {
	if slices.Contains(os.Args[2:], "--approval-prompt") {
		if err := toolbox.ServeApprovalPrompt(context.Background(), os.Stdin, os.Stdout, os.Getenv(relay.Env), "test"); err != nil {
			fmt.Fprintln(os.Stderr, "svc mcp --approval-prompt:", err)
			return 1
		}
		return 0
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "svc", Version: "test"}, nil)
	mark := os.Getenv(ccaMarkEnv)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo the text back."},
		func(_ context.Context, _ *mcp.CallToolRequest, in ccaEchoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ECHO:" + in.Text + " " + mark}}}, nil, nil
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "svc mcp:", err)
		return 1
	}
	return 0
}

// ccaHookRecord is one hook the runner's socket received.
type ccaHookRecord struct {
	Name    string
	Payload json.RawMessage
	Events  []runner.Event
}

// ccaRun is one agent under the adapter.
type ccaRun struct {
	t       *testing.T
	agent   runner.Agent
	model   *agenttest.Model
	argv    []string
	env     []string
	setup   runner.Setup
	session runner.Session
	cmd     *exec.Cmd
	stdin   io.Writer // the agent's stdin, for lines the adapter would not write
	stderr  *bytes.Buffer
	log     *syncBuffer

	mu        sync.Mutex
	hooks     []ccaHookRecord
	events    []runner.Event
	approvals []relay.ApprovalRequest // what the permission prompt asked; each is denied
	notify    chan struct{}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type ccaOpts struct {
	args    []string // the user's flags after the binary
	capture bool
	prompt  string
	dir     string // the working directory; default a fresh one
}

// ccaStart builds the command with the adapter and starts the agent,
// attached, with the relay socket listening.
func ccaStart(t *testing.T, bin string, m *agenttest.Model, o ccaOpts) *ccaRun {
	t.Helper()
	r := &ccaRun{t: t, agent: runner.NewClaude(), model: m, notify: make(chan struct{}, 1), log: &syncBuffer{}}
	srv, err := relay.Listen("", func(payload json.RawMessage) {
		var h struct {
			Name string `json:"hook_event_name"`
		}
		_ = json.Unmarshal(payload, &h)
		evs := r.agent.ParseHook(payload)
		r.mu.Lock()
		r.hooks = append(r.hooks, ccaHookRecord{Name: h.Name, Payload: append(json.RawMessage(nil), payload...), Events: evs})
		r.mu.Unlock()
		r.poke()
	})
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	// The test's runner asks no person: every permission prompt is denied.
	srv.SetApprover(func(_ context.Context, req relay.ApprovalRequest) relay.ApprovalAnswer {
		r.mu.Lock()
		r.approvals = append(r.approvals, req)
		r.mu.Unlock()
		return relay.ApprovalAnswer{Reason: "Denied by the test's runner."}
	})

	exe, err := os.Executable()
	require.NoError(t, err)
	bindir := t.TempDir()
	svc := filepath.Join(bindir, "svc")
	script := fmt.Sprintf("#!/bin/sh\n%s=1 GORACE=atexit_sleep_ms=0 exec '%s' \"$@\"\n", ccaChildEnv, exe)
	require.NoError(t, os.WriteFile(svc, []byte(script), 0o700))

	dir := filepath.Join(srv.Dir(), "agent")
	require.NoError(t, os.Mkdir(dir, 0o700))
	r.setup = runner.Setup{
		Argv:         append([]string{bin}, o.args...),
		Dir:          dir,
		Svc:          svc,
		MCPEnv:       map[string]string{ccaMarkEnv: "MCPENV-OK", relay.Env: srv.Path()},
		Env:          map[string]string{relay.Env: srv.Path()},
		SystemPrompt: o.prompt,
		Capture:      o.capture,
	}
	r.argv, r.env, err = r.agent.Command(r.setup)
	require.NoError(t, err)
	t.Logf("argv: %q env: %q", r.argv[1:], r.env)

	home, tmp := t.TempDir(), t.TempDir()
	env := map[string]string{
		"PATH": os.Getenv("PATH"), "HOME": home, "USER": "agenttest", "TMPDIR": tmp,
		"CLAUDE_CODE_TMPDIR": tmp, "LANG": "C.UTF-8", "TERM": "dumb", "NO_COLOR": "1",
		"XDG_CONFIG_HOME": filepath.Join(home, ".config"), "XDG_CACHE_HOME": filepath.Join(home, ".cache"),
		"CLAUDE_CONFIG_DIR":  filepath.Join(home, ".claude"),
		"ANTHROPIC_BASE_URL": m.URL(), "ANTHROPIC_API_KEY": agenttest.DummyAPIKey,
		"DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "ENABLE_TOOL_SEARCH": "false",
	}
	for k, v := range r.setup.Env {
		env[k] = v
	}
	for _, kv := range r.env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, r.argv[0], r.argv[1:]...)
	cmd.Dir = o.dir
	if cmd.Dir == "" {
		cmd.Dir = t.TempDir()
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	sort.Strings(cmd.Env)
	r.stderr = &bytes.Buffer{}
	cmd.Stderr = r.stderr
	npmcache.KillGroupOnCancel(cmd)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	r.cmd = cmd
	pgid := cmd.Process.Pid
	waited := make(chan struct{})
	events := make(chan runner.Event)
	go func() {
		for ev := range events {
			r.mu.Lock()
			r.events = append(r.events, ev)
			r.mu.Unlock()
			r.poke()
		}
	}()
	// Attach reads stdout; Wait must come after its reads, so it runs once
	// the test is done with the agent.
	r.stdin = stdin
	r.session = r.agent.Attach(stdin, stdout, events, r.log)
	t.Cleanup(func() {
		_ = r.session.Close()
		go func() { _ = cmd.Wait(); close(waited) }()
		select {
		case <-waited:
		case <-time.After(10 * time.Second):
			t.Errorf("claude did not exit within 10 s of its stdin closing")
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-waited
		if t.Failed() {
			t.Logf("stderr:\n%s\nadapter log:\n%s", npmcache.Tail(r.stderr.String(), 4000), r.log.String())
		}
	})
	return r
}

func (r *ccaRun) poke() {
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

func (r *ccaRun) deliver(text string) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(r.t, r.session.Deliver(ctx, runner.Turn{Text: text}))
}

// waitFor waits until cond holds over the hooks and events seen so far.
func (r *ccaRun) waitFor(what string, cond func(hooks []ccaHookRecord, events []runner.Event) bool) {
	r.t.Helper()
	deadline := time.After(ccaWait)
	for {
		r.mu.Lock()
		ok := cond(r.hooks, r.events)
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-r.notify:
		case <-time.After(200 * time.Millisecond):
		case <-deadline:
			r.mu.Lock()
			defer r.mu.Unlock()
			r.t.Fatalf("no %s within %s; hooks %v, events %+v\nlog:\n%s", what, ccaWait, ccaNames(r.hooks), r.events, r.log.String())
		}
	}
}

func (r *ccaRun) snapshot() ([]ccaHookRecord, []runner.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.hooks), slices.Clone(r.events)
}

func ccaNames(hooks []ccaHookRecord) []string {
	var out []string
	for _, h := range hooks {
		out = append(out, h.Name)
	}
	return out
}

func ccaCount(events []runner.Event, k runner.EventKind) int {
	n := 0
	for _, e := range events {
		if e.Kind == k {
			n++
		}
	}
	return n
}

// hooksNamed returns the recorded hooks of one event.
func ccaHooksNamed(hooks []ccaHookRecord, name string) []ccaHookRecord {
	var out []ccaHookRecord
	for _, h := range hooks {
		if h.Name == name {
			out = append(out, h)
		}
	}
	return out
}

// ccaSystem is the text of a request's system prompt.
func ccaSystem(t *testing.T, q agenttest.Request) string {
	var blocks []agenttest.ContentBlock
	if err := json.Unmarshal(q.Messages.System, &blocks); err != nil {
		var s string
		require.NoError(t, json.Unmarshal(q.Messages.System, &s))
		return s
	}
	var parts []string
	for _, b := range blocks {
		parts = append(parts, b.Text)
	}
	return strings.Join(parts, "\n")
}

// TestClaudeAdapterTurns: under --no-capture, two delivered turns are two
// turns at the model with the briefing in the system prompt, each ended by
// a result line (TurnEnd) and by the Stop hook; the session's hooks are
// SessionStart, UserPromptSubmit and Stop, never a tool hook; a message
// that starts with "/" or "!" reaches the model instead of running a slash
// command or a shell, and a real /compact fires SessionStart with source
// compact.
func TestClaudeAdapterTurns(t *testing.T) {
	t.Parallel()
	bin := agenttest.Claude(t)
	m := agenttest.NewModel(t)
	wd := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(wd, "note.txt"), []byte("the sky is green\n"), 0o600))
	briefing := fmt.Sprintf("CCA-BRIEFING-%d: you are bob on the team.", time.Now().UnixNano())
	m.ReplyOn("CCA-TURN-ONE", "first answer").
		CallToolOn("CCA-TURN-TWO", "Read", `{"file_path":"`+filepath.Join(wd, "note.txt")+`"}`).Reply("second answer").
		ReplyOn("CCA-SLASH", "not a command").
		ReplyOn("CCA-BANG", "not a shell")
	r := ccaStart(t, bin, m, ccaOpts{prompt: briefing, dir: wd})
	require.Equal(t, []string{"CLAUDE_CODE_ENABLE_TELEMETRY=0"}, r.env)

	turnEnds := func(n int) func([]ccaHookRecord, []runner.Event) bool {
		return func(hooks []ccaHookRecord, ev []runner.Event) bool {
			return ccaCount(ev, runner.TurnEnd) >= n && len(ccaHooksNamed(hooks, "Stop")) >= n
		}
	}
	r.deliver("[dm from alice] hello CCA-TURN-ONE")
	r.waitFor("end of turn 1", turnEnds(1))
	r.deliver("[dm from alice] read note.txt CCA-TURN-TWO")
	r.waitFor("end of turn 2", turnEnds(2))

	turns := m.AgentTurns()
	require.Len(t, turns, 3, "turn one, turn two and its tool result")
	require.True(t, turns[0].HasMarker("CCA-TURN-ONE") && turns[0].Scripted)
	require.True(t, turns[1].HasMarker("CCA-TURN-TWO") && turns[1].Scripted)
	require.Contains(t, turns[2].LastUserText(), "the sky is green")
	for _, q := range turns {
		require.Contains(t, ccaSystem(t, q), briefing)
	}

	hooks, events := r.snapshot()
	require.Equal(t, []string{"SessionStart", "UserPromptSubmit", "Stop", "UserPromptSubmit", "Stop"}, ccaNames(hooks),
		"no tool hooks without capture, though the agent ran Read")
	want := [][]runner.Event{
		{{Kind: runner.SessionStart, Source: "startup"}},
		{{Kind: runner.TurnStart}}, {{Kind: runner.TurnEnd}},
		{{Kind: runner.TurnStart}}, {{Kind: runner.TurnEnd}},
	}
	for i, h := range hooks {
		require.Equal(t, want[i], h.Events, "hook %d %s", i, h.Name)
	}
	require.Equal(t, []runner.Event{{Kind: runner.TurnEnd}, {Kind: runner.TurnEnd}}, events)

	// A message starting with "/" is text for the model.
	r.deliver("/compact CCA-SLASH")
	r.waitFor("end of the slash turn", turnEnds(3))
	require.Equal(t, 1, m.Pending(), "the slash turn did not reach the model")
	hooks, _ = r.snapshot()
	require.Empty(t, ccaHooksNamed(hooks, "SessionStart")[1:], "the message ran a slash command")
	// Nor is "!" a shell escape.
	r.deliver("!touch bang.txt CCA-BANG")
	r.waitFor("end of the bang turn", turnEnds(4))
	require.Zero(t, m.Pending())
	_, err := os.Stat(filepath.Join(wd, "bang.txt"))
	require.True(t, os.IsNotExist(err), "the message ran a shell: %v", err)

	// The real /compact (written past the adapter): SessionStart compact,
	// no UserPromptSubmit nor Stop, and a result line ends it.
	hooks, _ = r.snapshot()
	before := len(hooks)
	_, err = io.WriteString(r.stdin, `{"type":"user","message":{"role":"user","content":"/compact"}}`+"\n")
	require.NoError(t, err)
	r.waitFor("the compaction", func(hooks []ccaHookRecord, ev []runner.Event) bool {
		return len(ccaHooksNamed(hooks, "SessionStart")) == 2 && ccaCount(ev, runner.TurnEnd) == 5
	})
	hooks, _ = r.snapshot()
	require.Equal(t, []string{"SessionStart"}, ccaNames(hooks[before:]))
	require.Equal(t, []runner.Event{{Kind: runner.SessionStart, Source: "compact"}}, hooks[before].Events)
}

// TestClaudeAdapterTools: with capture, the user's own --allowedTools,
// --settings hook and --append-system-prompt are kept beside the
// adapter's; a stub tool_use of mcp__svc__echo reaches the MCP server of
// mcp.json (with its env) without a permission prompt and its result goes
// back to the model; every tool the agent starts ends, through
// PostToolUse, PostToolUseFailure or, for a tool the permission rules
// refuse, the permission_denied output line. No Notification hook fires:
// headless, a tool needing permission is refused, not asked about.
func TestClaudeAdapterTools(t *testing.T) {
	t.Parallel()
	bin := agenttest.Claude(t)
	m := agenttest.NewModel(t)
	wd := t.TempDir()
	userHook := filepath.Join(wd, "user-hook-ran")
	userSettings, err := json.Marshal(map[string]any{"hooks": map[string]any{"Stop": []any{map[string]any{
		"hooks": []any{map[string]any{"type": "command", "command": "touch '" + userHook + "'"}}}}}})
	require.NoError(t, err)
	missing := filepath.Join(wd, "missing.txt")
	m.CallToolOn("CCA-TOOLS", "mcp__svc__echo", `{"text":"hi"}`).
		CallTool("Read", `{"file_path":"`+missing+`"}`).
		CallTool("Write", `{"file_path":"`+filepath.Join(wd, "w.txt")+`","content":"x"}`).
		Reply("tools done")
	r := ccaStart(t, bin, m, ccaOpts{capture: true, dir: wd, prompt: "CCA-BRIEFING",
		args: []string{"--allowedTools", "Read", "--settings", string(userSettings), "--append-system-prompt", "CCA-USER-APPEND"}})
	require.Equal(t, []string{"CLAUDE_CODE_ENABLE_TELEMETRY=1"}, r.env)

	r.deliver("[dm from alice] use your tools CCA-TOOLS")
	r.waitFor("end of the turn", func(hooks []ccaHookRecord, ev []runner.Event) bool {
		return ccaCount(ev, runner.TurnEnd) == 1 && len(ccaHooksNamed(hooks, "Stop")) == 1
	})
	require.Zero(t, m.Pending())
	turns := m.AgentTurns()
	require.Len(t, turns, 4)
	sys := ccaSystem(t, turns[0])
	require.Contains(t, sys, "CCA-USER-APPEND")
	require.Contains(t, sys, "CCA-BRIEFING")
	res := turns[1].ToolResults()
	require.Len(t, res, 1)
	require.False(t, res[0].IsError)
	require.Equal(t, "ECHO:hi MCPENV-OK", res[0].ResultText())
	_, err = os.Stat(userHook)
	require.NoError(t, err, "the user's own Stop hook did not run")

	hooks, events := r.snapshot()
	require.Equal(t, []string{"SessionStart", "UserPromptSubmit",
		"PreToolUse", "PostToolUse", // echo
		"PreToolUse", "PostToolUseFailure", // Read of a missing file
		"PreToolUse", // Write, not allowed: a person is asked (here: denied), no post hook
		"Stop"}, ccaNames(hooks))
	for _, h := range hooks {
		require.Len(t, h.Events, 1, h.Name)
	}
	// Each tool event names its call; the pre and post hooks of a call
	// name the same one.
	ids := map[int]string{}
	ev := func(i int) runner.Event {
		e := hooks[i].Events[0]
		if e.Kind == runner.ToolStart || e.Kind == runner.ToolEnd {
			require.NotEmpty(t, e.ToolUseID, "hook %d %s", i, hooks[i].Name)
			ids[i] = e.ToolUseID
			e.ToolUseID = ""
		}
		return e
	}
	require.Equal(t, runner.Event{Kind: runner.ToolStart, Tool: "mcp__svc__echo", ToolInput: json.RawMessage(`{"text":"hi"}`)}, ev(2))
	require.Equal(t, runner.ToolEnd, ev(3).Kind)
	require.Equal(t, "mcp__svc__echo", ev(3).Tool)
	require.JSONEq(t, `[{"type":"text","text":"ECHO:hi MCPENV-OK"}]`, string(ev(3).ToolResult))
	require.Equal(t, runner.Event{Kind: runner.ToolStart, Tool: "Read", ToolInput: json.RawMessage(`{"file_path":"` + missing + `"}`)}, ev(4))
	require.Equal(t, runner.ToolEnd, ev(5).Kind)
	require.Equal(t, "Read", ev(5).Tool)
	var failure struct {
		Error string `json:"error"`
	}
	require.NoError(t, json.Unmarshal(ev(5).ToolResult, &failure))
	require.Contains(t, failure.Error, "does not exist")
	require.Equal(t, runner.ToolStart, ev(6).Kind)
	require.Equal(t, "Write", ev(6).Tool)
	require.Equal(t, ids[2], ids[3], "echo's start and end name one call")
	require.Equal(t, ids[4], ids[5], "Read's start and end name one call")
	require.Equal(t, []runner.Event{{Kind: runner.TurnEnd}}, events, "a prompt's denial prints no permission_denied line")
	_, err = os.Stat(filepath.Join(wd, "w.txt"))
	require.True(t, os.IsNotExist(err), "the refused Write ran: %v", err)

	// The Write went to the runner's permission prompt (echo and Read were
	// allowed), naming the call the pre-tool hook started: that id is how
	// the runner closes the denied call's in-flight count, as no post hook
	// comes. The model read the runner's refusal.
	r.mu.Lock()
	asked := slices.Clone(r.approvals)
	r.mu.Unlock()
	require.Len(t, asked, 1, "%+v", asked)
	require.Equal(t, "Write", asked[0].Tool)
	require.Equal(t, ids[6], asked[0].ToolUseID)
	require.JSONEq(t, `{"file_path":"`+filepath.Join(wd, "w.txt")+`","content":"x"}`, string(asked[0].Input))
	refused := turns[3].ToolResults()
	require.Len(t, refused, 1)
	require.True(t, refused[0].IsError)
	require.Contains(t, refused[0].ResultText(), "Denied by the test's runner.")
}
