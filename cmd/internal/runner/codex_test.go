package runner

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/cmd/internal/relay"
)

func TestScanCodexArgs(t *testing.T) {
	cases := []struct {
		name     string
		argv     []string
		config   []string
		features []string
		approval string
		sandbox  string
		wantErr  string
	}{
		{name: "bare", argv: []string{"codex"}},
		{name: "app-server given", argv: []string{"codex", "app-server", "-c", "a=1"}, config: []string{"a=1"}},
		{name: "config forms", argv: []string{"codex", "-c", `model="o3"`, "--config=x.y=2"}, config: []string{`model="o3"`, "x.y=2"}},
		{name: "model", argv: []string{"codex", "-m", "gpt-5"}, config: []string{`model="gpt-5"`}},
		{name: "profile refused", argv: []string{"codex", "--profile=work"}, wantErr: "-p/--profile does not apply"},
		{name: "features", argv: []string{"codex", "--enable", "a", "--disable=b"}, features: []string{"--enable", "a", "--disable", "b"}},
		{name: "approval and sandbox", argv: []string{"codex", "-a", "on-request", "-s", "workspace-write"}, approval: "on-request", sandbox: "workspace-write"},
		{name: "on-failure is on-request", argv: []string{"codex", "-a", "on-failure"}, approval: "on-request"},
		{name: "full auto", argv: []string{"codex", "--full-auto"}, sandbox: "workspace-write"},
		{name: "yolo", argv: []string{"codex", "--yolo"}, approval: "never", sandbox: "danger-full-access"},
		{name: "bad approval", argv: []string{"codex", "-a", "sometimes"}, wantErr: "--ask-for-approval"},
		{name: "bad sandbox", argv: []string{"codex", "-s", "open"}, wantErr: "--sandbox"},
		{name: "missing value", argv: []string{"codex", "-c"}, wantErr: "codex: -c needs a value"},
		{name: "bad -c", argv: []string{"codex", "-c", "novalue"}, wantErr: "key=value"},
		{name: "prompt refused", argv: []string{"codex", "fix the bug"}, wantErr: "leave out subcommands and prompts"},
		{name: "subcommand refused", argv: []string{"codex", "exec"}, wantErr: "leave out subcommands"},
		{name: "unknown flag refused", argv: []string{"codex", "--search"}, wantErr: "does not apply"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ca, err := scanCodexArgs(tc.argv)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.config, ca.config)
			require.Equal(t, tc.features, ca.features)
			require.Equal(t, tc.approval, ca.approval)
			require.Equal(t, tc.sandbox, ca.sandbox)
		})
	}
}

func codexSetup(t *testing.T) Setup {
	return Setup{
		Argv: []string{"/opt/codex", "-m", "gpt-5", "-C", "/work"}, Dir: t.TempDir(), Svc: "/usr/bin/svc",
		MCPEnv: map[string]string{"SVC_URL": "http://127.0.0.1:7/", "SVC_RUNNER_TICKET": "0123abcd", "SVC_RUNNER_SOCKET": "/run/s.sock"},
		Env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9/otlp",
			"OTEL_EXPORTER_OTLP_HEADERS": "X-Svc-Relay-Key=feedc0de"},
		SystemPrompt: "You are codex1.",
	}
}

func TestCodexCommand(t *testing.T) {
	t.Setenv("SVC_E2E_X", "1")
	t.Setenv("SVC_TOKEN", "svc_runner_own")
	cases := []struct {
		name     string
		capture  bool
		infer    bool
		has      []string
		hasNot   []string
		provider string
	}{
		{name: "capture", capture: true, has: []string{
			// The runner's OTLP relay, not the broker: the relay adds the bearer.
			`otel.exporter={otlp-http={endpoint="http://127.0.0.1:9/otlp/v1/logs", protocol="binary"}}`,
		}, hasNot: []string{`otel.exporter="none"`, "model_provider="}},
		{name: "no capture", has: []string{`otel.exporter="none"`}, hasNot: []string{"otlp-http", "model_provider="}},
		{name: "inferences through the proxy", capture: true, infer: true, provider: "http://127.0.0.1:"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			t.Setenv("CODEX_HOME", home)
			require.NoError(t, os.WriteFile(filepath.Join(home, "config.toml"), []byte("[shell_environment_policy]\nexclude = [\"MY_*\", \"SVC_TOKEN\"]\n"), 0o600))
			s := codexSetup(t)
			s.Capture = tc.capture
			if tc.infer {
				s.Inferences = func(Inference) {}
			}
			a := NewCodex().(*codex)
			argv, env, err := a.Command(s)
			require.NoError(t, err)
			if a.proxy != nil {
				t.Cleanup(func() { a.proxy.Close() })
			}
			require.Equal(t, []string{"/opt/codex", "app-server", "-c", `model="gpt-5"`}, argv[:4])
			joined := strings.Join(argv, "\n")
			for _, h := range append([]string{
				`mcp_servers.svc.command="/usr/bin/svc"`, `mcp_servers.svc.args=["mcp"]`,
				`mcp_servers.svc.env_vars=["SVC_E2E_X", "SVC_RUNNER_SOCKET", "SVC_RUNNER_TICKET", "SVC_URL"]`,
				`mcp_servers.svc.default_tools_approval_mode="approve"`,
				`shell_environment_policy.exclude=["SVC_TOKEN", "SVC_RUNNER_TICKET", "OTEL_EXPORTER_OTLP_HEADERS", "SVC_CAPTURE_KEY", "MY_*"]`,
			}, tc.has...) {
				require.Contains(t, argv, h)
			}
			for _, h := range tc.hasNot {
				require.NotContains(t, joined, h)
			}
			require.NotContains(t, joined, "0123abcd", "no ticket on the command line")
			require.NotContains(t, joined, "feedc0de", "no relay key on the command line")
			require.NotContains(t, joined, "svc_runner_own")
			require.NotContains(t, joined, "You are codex1", "the briefing goes over stdin")
			wantEnv := []string{"SVC_URL=http://127.0.0.1:7/", "SVC_RUNNER_TICKET=0123abcd", "SVC_RUNNER_SOCKET=/run/s.sock"}
			if tc.infer {
				// The proxy's key travels in the environment, sent by Codex
				// as a header; never on the command line.
				require.Len(t, env, len(wantEnv)+1)
				key, ok := strings.CutPrefix(env[len(env)-1], "SVC_CAPTURE_KEY=")
				require.True(t, ok, env)
				require.Len(t, key, 32)
				require.NotContains(t, joined, key)
				require.Contains(t, argv, `model_providers.svc_capture.env_http_headers={"X-Svc-Capture-Key" = "SVC_CAPTURE_KEY"}`)
				env = env[:len(env)-1]
			}
			require.ElementsMatch(t, wantEnv, env)
			require.Equal(t, map[string]any{"approvalPolicy": "never", "cwd": "/work", "developerInstructions": "You are codex1."}, a.threadParams)
			if tc.provider != "" {
				require.Contains(t, argv, `model_provider="svc_capture"`)
				var base string
				for _, x := range argv {
					if v, ok := strings.CutPrefix(x, "model_providers.svc_capture.base_url="); ok {
						base = v
					}
				}
				require.True(t, strings.HasPrefix(base, `"`+tc.provider), base)
				require.True(t, strings.HasSuffix(base, `/v1"`), base)
				require.Contains(t, argv, "model_providers.svc_capture.requires_openai_auth=true", "the built-in openai provider's fields are copied")
			}
		})
	}
}

func TestCodexCommandErrors(t *testing.T) {
	s := codexSetup(t)
	s.Svc = "svc"
	_, _, err := NewCodex().Command(s)
	require.ErrorContains(t, err, "not absolute")
	s = codexSetup(t)
	s.Argv = []string{"codex", "exec", "hi"}
	_, _, err = NewCodex().Command(s)
	require.ErrorContains(t, err, "subcommands")
	s = codexSetup(t)
	s.Inferences = func(Inference) {}
	home := t.TempDir()
	t.Setenv("CODEX_HOME", home)
	require.NoError(t, os.WriteFile(filepath.Join(home, "config.toml"), []byte(`model_provider = "gone"`), 0o600))
	_, _, err = NewCodex().Command(s)
	require.ErrorContains(t, err, `"gone"`)
}

// fakeAppServer plays Codex's side of the app-server protocol over pipes.
type fakeAppServer struct {
	t      *testing.T
	in     *bufio.Reader // what the session wrote
	out    io.WriteCloser
	events chan Event
	sess   Session
	log    *syncBuf
	omu    sync.Mutex
}

type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func newFakeAppServer(t *testing.T, params map[string]any) *fakeAppServer {
	return newFakeAppServerApproving(t, params, nil)
}

func newFakeAppServerApproving(t *testing.T, params map[string]any, approve func(context.Context, relay.ApprovalRequest) relay.ApprovalAnswer) *fakeAppServer {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	f := &fakeAppServer{t: t, in: bufio.NewReader(inR), out: outW, events: make(chan Event, 64), log: &syncBuf{}}
	a := &codex{threadParams: params, approve: approve}
	f.sess = a.Attach(inW, outR, f.events, f.log)
	t.Cleanup(func() { outW.Close(); inR.Close() })
	return f
}

// next reads the session's next message.
func (f *fakeAppServer) next() map[string]any {
	f.t.Helper()
	type res struct {
		line string
		err  error
	}
	ch := make(chan res, 1)
	go func() { l, err := f.in.ReadString('\n'); ch <- res{l, err} }()
	select {
	case r := <-ch:
		require.NoError(f.t, r.err)
		var m map[string]any
		require.NoError(f.t, json.Unmarshal([]byte(r.line), &m), r.line)
		return m
	case <-time.After(5 * time.Second):
		f.t.Fatal("the session wrote nothing")
		return nil
	}
}

func (f *fakeAppServer) send(v any) {
	f.t.Helper()
	b, err := json.Marshal(v)
	require.NoError(f.t, err)
	f.sendRaw(string(b))
}

func (f *fakeAppServer) sendRaw(line string) {
	f.omu.Lock()
	defer f.omu.Unlock()
	_, err := io.WriteString(f.out, line+"\n")
	require.NoError(f.t, err)
}

func (f *fakeAppServer) event() Event {
	f.t.Helper()
	select {
	case e := <-f.events:
		return e
	case <-time.After(5 * time.Second):
		f.t.Fatal("no event")
		return Event{}
	}
}

func (f *fakeAppServer) noEvent() {
	f.t.Helper()
	select {
	case e := <-f.events:
		f.t.Fatalf("unexpected event %+v", e)
	case <-time.After(50 * time.Millisecond):
	}
}

// handshake answers initialize and thread/start and makes the toolbox
// ready.
func (f *fakeAppServer) handshake() {
	f.t.Helper()
	m := f.next()
	require.Equal(f.t, "initialize", m["method"])
	f.send(map[string]any{"id": m["id"], "result": map[string]any{"userAgent": "codex"}})
	require.Equal(f.t, "initialized", f.next()["method"])
	m = f.next()
	require.Equal(f.t, "thread/start", m["method"])
	require.Equal(f.t, "You are codex1.", m["params"].(map[string]any)["developerInstructions"])
	f.send(map[string]any{"method": "mcpServer/startupStatus/updated", "params": map[string]any{"name": "svc", "status": "starting"}})
	f.send(map[string]any{"id": m["id"], "result": map[string]any{"thread": map[string]any{"id": "thr_1"}}})
	require.Equal(f.t, Event{Kind: SessionStart, Source: "startup"}, f.event())
}

func (f *fakeAppServer) deliver(text string) chan error {
	done := make(chan error, 1)
	go func() { done <- f.sess.Deliver(context.Background(), Turn{Text: text}) }()
	return done
}

func TestCodexSessionTurn(t *testing.T) {
	f := newFakeAppServer(t, map[string]any{"developerInstructions": "You are codex1.", "approvalPolicy": "never"})
	f.handshake()

	// The first turn waits for the toolbox.
	done := f.deliver("hello")
	select {
	case err := <-done:
		t.Fatalf("delivered before the toolbox was up: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	f.send(map[string]any{"method": "mcpServer/startupStatus/updated", "params": map[string]any{"name": "other", "status": "ready"}})
	f.send(map[string]any{"method": "mcpServer/startupStatus/updated", "params": map[string]any{"name": "svc", "status": "ready"}})
	m := f.next()
	require.Equal(t, "turn/start", m["method"])
	p := m["params"].(map[string]any)
	require.Equal(t, "thr_1", p["threadId"])
	require.Equal(t, []any{map[string]any{"type": "text", "text": "hello"}}, p["input"])
	f.send(map[string]any{"method": "turn/started", "params": map[string]any{"turn": map[string]any{"id": "t1"}}})
	f.send(map[string]any{"id": m["id"], "result": map[string]any{"turn": map[string]any{"id": "t1"}}})
	require.NoError(t, <-done)
	require.Equal(t, TurnStart, f.event().Kind)

	tool := map[string]any{"type": "mcpToolCall", "id": "call_1", "server": "svc", "tool": "send", "arguments": map[string]any{"to": "alice"}}
	f.send(map[string]any{"method": "item/started", "params": map[string]any{"item": tool, "turnId": "t1"}})
	ev := f.event()
	require.Equal(t, ToolStart, ev.Kind)
	require.Equal(t, "mcp__svc__send", ev.Tool)
	require.JSONEq(t, `{"to":"alice"}`, string(ev.ToolInput))
	tool["status"] = "completed"
	tool["result"] = map[string]any{"content": []any{map[string]any{"type": "text", "text": "sent m1"}}}
	f.send(map[string]any{"method": "item/completed", "params": map[string]any{"item": tool, "turnId": "t1"}})
	ev = f.event()
	require.Equal(t, ToolEnd, ev.Kind)
	require.Contains(t, string(ev.ToolResult), "sent m1")
	// A completion with no start moves nothing.
	f.send(map[string]any{"method": "item/completed", "params": map[string]any{"item": map[string]any{"type": "commandExecution", "id": "x9", "command": "ls"}}})
	f.noEvent()

	// A command left running when the turn ends is ended with it.
	f.send(map[string]any{"method": "item/started", "params": map[string]any{"item": map[string]any{"type": "commandExecution", "id": "c1", "command": "sleep 9", "cwd": "/w"}}})
	ev = f.event()
	require.Equal(t, Event{Kind: ToolStart, Tool: "exec_command", ToolInput: json.RawMessage(`{"command":"sleep 9","cwd":"/w"}`), ToolUseID: "c1"}, ev)
	f.send(map[string]any{"method": "item/completed", "params": map[string]any{"item": map[string]any{"type": "agentMessage", "id": "m1", "text": "Replied to alice."}}})
	f.send(map[string]any{"method": "turn/completed", "params": map[string]any{"turn": map[string]any{"id": "t1", "status": "interrupted"}}})
	require.Equal(t, ToolEnd, f.event().Kind)
	require.Equal(t, TurnEnd, f.event().Kind)
	require.Eventually(t, func() bool { return strings.Contains(f.log.String(), "codex: Replied to alice.") }, 5*time.Second, 10*time.Millisecond)
	require.Contains(t, f.log.String(), "turn interrupted")

	// A refused turn/start is an error: the runner retries.
	done = f.deliver("again")
	m = f.next()
	f.send(map[string]any{"id": m["id"], "error": map[string]any{"code": -32600, "message": "busy"}})
	require.ErrorContains(t, <-done, "busy")
}

// A thread/start Codex refuses (e.g. a config it cannot load) stops the
// agent: its input is closed, so Codex exits and the runner with it,
// instead of a runner that looks online while no turn can be delivered.
func TestCodexSessionStartFailureEndsTheAgent(t *testing.T) {
	f := newFakeAppServer(t, map[string]any{"developerInstructions": "You are codex1."})
	m := f.next()
	f.send(map[string]any{"id": m["id"], "result": map[string]any{}})
	require.Equal(t, "initialized", f.next()["method"])
	m = f.next()
	require.Equal(t, "thread/start", m["method"])
	f.send(map[string]any{"id": m["id"], "error": map[string]any{"code": -32600, "message": "failed to load configuration"}})
	eof := make(chan error, 1)
	go func() { _, err := f.in.ReadString('\n'); eof <- err }()
	select {
	case err := <-eof:
		require.ErrorIs(t, err, io.EOF, "the agent's input is closed")
	case <-time.After(5 * time.Second):
		t.Fatal("the agent's input stayed open after thread/start failed")
	}
	require.Contains(t, f.log.String(), "failed to load configuration")
	require.ErrorContains(t, f.sess.Deliver(context.Background(), Turn{Text: "x"}), "thread/start")
}

// Turn and item notifications of another thread (a sub-agent's) do not
// move the runner's state: a sub-agent's turn/completed must not end the
// main turn.
func TestCodexSessionOtherThreadIgnored(t *testing.T) {
	f := newFakeAppServer(t, map[string]any{"developerInstructions": "You are codex1."})
	f.handshake()
	f.send(map[string]any{"method": "turn/started", "params": map[string]any{"threadId": "thr_1", "turn": map[string]any{"id": "t1"}}})
	require.Equal(t, TurnStart, f.event().Kind)
	f.send(map[string]any{"method": "turn/started", "params": map[string]any{"threadId": "thr_sub", "turn": map[string]any{"id": "s1"}}})
	f.send(map[string]any{"method": "item/started", "params": map[string]any{"threadId": "thr_sub", "item": map[string]any{"type": "commandExecution", "id": "c1", "command": "ls"}}})
	f.send(map[string]any{"method": "turn/completed", "params": map[string]any{"threadId": "thr_sub", "turn": map[string]any{"id": "s1", "status": "completed"}}})
	f.noEvent()
	f.send(map[string]any{"method": "turn/completed", "params": map[string]any{"threadId": "thr_1", "turn": map[string]any{"id": "t1", "status": "completed"}}})
	require.Equal(t, TurnEnd, f.event().Kind)
}

func TestCodexSessionServerRequests(t *testing.T) {
	f := newFakeAppServer(t, map[string]any{"developerInstructions": "You are codex1."})
	f.handshake()
	cases := []struct {
		method string
		answer string
	}{
		{"item/commandExecution/requestApproval", `{"decision":"decline"}`},
		{"item/fileChange/requestApproval", `{"decision":"decline"}`},
		{"item/permissions/requestApproval", `{"permissions":{},"scope":"turn"}`},
		{"item/tool/requestUserInput", `{"answers":{}}`},
		{"mcpServer/elicitation/request", `{"action":"decline","content":null,"_meta":null}`},
		{"execCommandApproval", `{"decision":{"denied":{"rejection":"svc runner: headless, no one can approve"}}}`},
	}
	for i, tc := range cases {
		t.Run(tc.method, func(t *testing.T) {
			f.t = t
			id := "req-" + tc.method
			if i%2 == 0 {
				f.send(map[string]any{"id": i + 100, "method": tc.method, "params": map[string]any{}})
			} else {
				f.send(map[string]any{"id": id, "method": tc.method, "params": map[string]any{}})
			}
			require.Equal(t, Blocked, f.event().Kind)
			m := f.next()
			if i%2 == 0 {
				require.Equal(t, float64(i+100), m["id"])
			} else {
				require.Equal(t, id, m["id"])
			}
			got, err := json.Marshal(m["result"])
			require.NoError(t, err)
			require.JSONEq(t, tc.answer, string(got))
			require.Equal(t, Unblocked, f.event().Kind)
		})
	}
	f.t = t
	// An unknown request gets an error and blocks nothing.
	f.send(map[string]any{"id": 7, "method": "account/chatgptAuthTokens/refresh", "params": map[string]any{}})
	m := f.next()
	require.Equal(t, float64(7), m["id"])
	require.Equal(t, float64(-32601), m["error"].(map[string]any)["code"])
	f.noEvent()
}

func TestCodexSessionHostileOutput(t *testing.T) {
	f := newFakeAppServer(t, map[string]any{"developerInstructions": "You are codex1."})
	f.handshake()
	f.sendRaw("not json")
	f.sendRaw(`{"method":"item/started","params":{"item":{"type":"mcpToolCall","id":"a","server":"s\u0000","tool":"t"}}}`)
	f.sendRaw(`{"method":"item/started","params":"nope"}`)
	f.sendRaw(`{"method":"unknown/thing","params":{}}`)
	f.sendRaw(`{"id":999,"result":{}}`)
	f.sendRaw(`{"method":"turn/started","params":{"junk":` + strings.Repeat(" ", codexMaxLine) + `}}`)
	// Compaction: the deprecated notification and the item of one turn are
	// one re-brief.
	f.send(map[string]any{"method": "thread/compacted", "params": map[string]any{"turnId": "t5"}})
	f.send(map[string]any{"method": "item/completed", "params": map[string]any{"turnId": "t5", "item": map[string]any{"type": "contextCompaction", "id": "cc"}}})
	require.Equal(t, Event{Kind: SessionStart, Source: "compact"}, f.event())
	f.noEvent()
	require.Contains(t, f.log.String(), "output: not json")
	require.Contains(t, f.log.String(), "skipped an output line")

	// The end of the output fails a waiting delivery rather than hanging it.
	f.send(map[string]any{"method": "mcpServer/startupStatus/updated", "params": map[string]any{"name": "svc", "status": "failed", "error": "boom"}})
	done := f.deliver("x")
	require.Equal(t, "turn/start", f.next()["method"])
	f.out.Close()
	select {
	case err := <-done:
		require.ErrorContains(t, err, "output ended")
	case <-time.After(5 * time.Second):
		t.Fatal("Deliver hangs after the agent's output ended")
	}
	require.True(t, slices.ContainsFunc(strings.Split(f.log.String(), "\n"), func(l string) bool { return strings.Contains(l, "failed: boom") }))
}

func TestCodexApprovalPolicyDefault(t *testing.T) {
	for _, tc := range []struct {
		name    string
		argv    []string
		approve bool
		want    string
	}{
		{"a person can answer: Codex's own default", []string{"codex"}, true, "on-request"},
		{"no one can answer: never", []string{"codex"}, false, "never"},
		{"the user's choice stands", []string{"codex", "-a", "never"}, true, "never"},
		{"untrusted", []string{"codex", "-a", "untrusted"}, true, "untrusted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := codexSetup(t)
			s.Argv = tc.argv
			if tc.approve {
				s.Approve = func(context.Context, relay.ApprovalRequest) relay.ApprovalAnswer { return relay.ApprovalAnswer{} }
			}
			a := &codex{}
			_, _, err := a.Command(s)
			require.NoError(t, err)
			require.Equal(t, tc.want, a.threadParams["approvalPolicy"])
		})
	}
}

func TestCodexApprovalsGoToAPerson(t *testing.T) {
	asked := make(chan relay.ApprovalRequest, 4)
	decide := make(chan relay.ApprovalAnswer, 4)
	f := newFakeAppServerApproving(t, map[string]any{"developerInstructions": "You are codex1."}, func(ctx context.Context, r relay.ApprovalRequest) relay.ApprovalAnswer {
		asked <- r
		select {
		case a := <-decide:
			return a
		case <-ctx.Done():
			return relay.ApprovalAnswer{Reason: "gone"}
		}
	})
	f.handshake()
	f.send(map[string]any{"method": "item/started", "params": map[string]any{"threadId": "thr_1", "turnId": "t1",
		"item": map[string]any{"type": "fileChange", "id": "fc1", "changes": []any{map[string]any{"path": "/w/a.txt", "kind": "add"}}}}})
	require.Equal(t, ToolStart, f.event().Kind)

	for _, tc := range []struct {
		name   string
		method string
		params map[string]any
		want   relay.ApprovalRequest
		answer relay.ApprovalAnswer
		result string
		steer  string // the refusal's text steered into the turn, "" for none
	}{
		{"command allowed", "item/commandExecution/requestApproval",
			map[string]any{"threadId": "thr_1", "turnId": "t1", "itemId": "c7", "command": "touch x", "cwd": "/w", "reason": "writes"},
			relay.ApprovalRequest{Tool: "exec_command", Input: json.RawMessage(`{"command":"touch x","cwd":"/w","reason":"writes"}`), ToolUseID: "c7"},
			relay.ApprovalAnswer{Allow: true}, `{"decision":"accept"}`, ""},
		{"file change denied, its reason steered into the turn", "item/fileChange/requestApproval",
			map[string]any{"threadId": "thr_1", "turnId": "t1", "itemId": "fc1"},
			relay.ApprovalRequest{Tool: "apply_patch", Input: json.RawMessage(`{"changes":[{"kind":"add","path":"/w/a.txt"}]}`), ToolUseID: "fc1"},
			relay.ApprovalAnswer{Reason: "Denied by alice: not now"}, `{"decision":"decline"}`, "[svc] apply_patch was not run: Denied by alice: not now"},
		{"legacy command denied with its rejection", "execCommandApproval",
			map[string]any{"conversationId": "thr_1", "callId": "call_3", "command": []any{"rm", "-rf", "/"}, "cwd": "/w"},
			relay.ApprovalRequest{Tool: "exec_command", Input: json.RawMessage(`{"command":["rm","-rf","/"],"cwd":"/w"}`), ToolUseID: "call_3"},
			relay.ApprovalAnswer{Reason: "Denied by bob."}, `{"decision":{"denied":{"rejection":"Denied by bob."}}}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.t = t
			f.send(map[string]any{"id": "r-" + tc.name, "method": tc.method, "params": tc.params})
			var got relay.ApprovalRequest
			select {
			case got = <-asked:
			case <-time.After(5 * time.Second):
				t.Fatal("no person asked")
			}
			require.Equal(t, tc.want.Tool, got.Tool)
			require.Equal(t, tc.want.ToolUseID, got.ToolUseID)
			require.JSONEq(t, string(tc.want.Input), string(got.Input))
			// The reader goes on while the person decides.
			f.send(map[string]any{"method": "turn/started", "params": map[string]any{"threadId": "thr_1", "turn": map[string]any{"id": "t1"}}})
			require.Equal(t, TurnStart, f.event().Kind)
			decide <- tc.answer
			m := f.next()
			require.Equal(t, "r-"+tc.name, m["id"])
			res, err := json.Marshal(m["result"])
			require.NoError(t, err)
			require.JSONEq(t, tc.result, string(res))
			if tc.steer != "" {
				st := f.next()
				require.Equal(t, "turn/steer", st["method"])
				p := st["params"].(map[string]any)
				require.Equal(t, "t1", p["expectedTurnId"])
				require.Equal(t, "thr_1", p["threadId"])
				require.Equal(t, tc.steer, p["input"].([]any)[0].(map[string]any)["text"])
				f.send(map[string]any{"id": st["id"], "result": map[string]any{"turnId": "t1"}})
			}
			f.noEvent() // the runner, not the adapter, marks the wait blocked
		})
	}
}

func FuzzCodexApprovalRequest(f *testing.F) {
	f.Add("item/commandExecution/requestApproval", []byte(`{"threadId":"t","turnId":"u","itemId":"c1","command":"rm -rf /","cwd":"/w","reason":"x"}`))
	f.Add("execCommandApproval", []byte(`{"callId":"call_1","command":["ls","-l"],"cwd":"/"}`))
	f.Add("item/fileChange/requestApproval", []byte(`{"itemId":"fc1","grantRoot":"/"}`))
	f.Add("applyPatchApproval", []byte(`{"callId":"c","fileChanges":{"/a":{"add":{"content":"x"}}}}`))
	f.Add("item/commandExecution/requestApproval", []byte(`{"itemId":"a\u0000b","command":{"x":[1,2]}}`))
	f.Add("x", []byte(`null`))
	f.Add("x", []byte{0xff})
	f.Fuzz(func(t *testing.T, method string, params []byte) {
		_, req := codexApprovalRequest(method, params, func(string) json.RawMessage { return json.RawMessage(`[{"path":"/a"}]`) })
		if req.Tool != "exec_command" && req.Tool != "apply_patch" {
			t.Fatalf("tool %q", req.Tool)
		}
		if len(req.ToolUseID) > 256 || !printableASCII(req.ToolUseID) {
			t.Fatalf("tool use id %q", req.ToolUseID)
		}
		if len(req.Input) > 0 && !json.Valid(req.Input) {
			t.Fatalf("input %q is not JSON", req.Input)
		}
	})
}
