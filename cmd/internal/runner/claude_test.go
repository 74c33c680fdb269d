package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// claudeFixture is a Setup with a private directory and an absolute svc.
func claudeFixture(t *testing.T, argv ...string) Setup {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "agent")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return Setup{
		Argv:         argv,
		Dir:          dir,
		Svc:          "/opt/svc/bin/svc",
		MCPEnv:       map[string]string{"SVC_URL": "http://127.0.0.1:7433", "SVC_RUNNER_TICKET": "0123abcd", "SVC_RUNNER_SOCKET": "/tmp/r/relay.sock"},
		Env:          map[string]string{"SVC_RUNNER_SOCKET": "/tmp/r/relay.sock"},
		SystemPrompt: "You are bob.",
		Capture:      true,
	}
}

// ours is the adapter's flags for fixture s, in order, with the prompt file.
func ours(s Setup, withPrompt bool) []string {
	out := []string{"-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
		"--mcp-config", filepath.Join(s.Dir, "mcp.json"), "--allowedTools", "mcp__svc__*",
		"--permission-prompt-tool", "mcp__svc_approvals__prompt",
		"--settings", filepath.Join(s.Dir, "settings.json")}
	if withPrompt {
		out = append(out, "--append-system-prompt-file", filepath.Join(s.Dir, "system-prompt.md"))
	}
	return out
}

func without(flags []string, drop ...string) []string {
	var out []string
	for i := 0; i < len(flags); i++ {
		f := flags[i]
		if slices.Contains(drop, f) {
			if f != "-p" && f != "--verbose" {
				i++ // its value
			}
			continue
		}
		out = append(out, f)
	}
	return out
}

func readPrivate(t *testing.T, path string) []byte {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s: mode %v, want 0600", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestClaudeCommandArgv(t *testing.T) {
	userSettings := filepath.Join(t.TempDir(), "user-settings.json")
	if err := os.WriteFile(userSettings, []byte(`{"model":"opus"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	userPrompt := filepath.Join(t.TempDir(), "user-prompt.md")
	if err := os.WriteFile(userPrompt, []byte("From the file."), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		argv    []string
		noBrief bool
		// want builds the expected argv from the fixture.
		want   func(s Setup) []string
		prompt string // the expected system-prompt.md ("" for none)
	}{
		{name: "bare command", argv: []string{"claude"},
			want:   func(s Setup) []string { return append([]string{"claude"}, ours(s, true)...) },
			prompt: "You are bob."},
		{name: "user flags kept before ours", argv: []string{"/usr/bin/claude", "--model", "x", "--add-dir", "a", "b"},
			want: func(s Setup) []string {
				return append([]string{"/usr/bin/claude", "--model", "x", "--add-dir", "a", "b"}, ours(s, true)...)
			},
			prompt: "You are bob."},
		{name: "flags already given are not repeated",
			argv: []string{"claude", "-p", "--verbose", "--output-format", "stream-json", "--input-format=stream-json"},
			want: func(s Setup) []string {
				return append([]string{"claude", "-p", "--verbose", "--output-format", "stream-json", "--input-format=stream-json"},
					without(ours(s, true), "-p", "--verbose", "--output-format", "--input-format")...)
			},
			prompt: "You are bob."},
		{name: "--print counts as -p", argv: []string{"claude", "--print"},
			want:   func(s Setup) []string { return append([]string{"claude", "--print"}, without(ours(s, true), "-p")...) },
			prompt: "You are bob."},
		{name: "toolbox already allowed", argv: []string{"claude", "--allowedTools", "Read", "mcp__svc__*"},
			want: func(s Setup) []string {
				return append([]string{"claude", "--allowedTools", "Read", "mcp__svc__*"}, without(ours(s, true), "--allowedTools")...)
			},
			prompt: "You are bob."},
		{name: "toolbox allowed in a comma list", argv: []string{"claude", "--allowed-tools=Read,mcp__svc__*"},
			want: func(s Setup) []string {
				return append([]string{"claude", "--allowed-tools=Read,mcp__svc__*"}, without(ours(s, true), "--allowedTools")...)
			},
			prompt: "You are bob."},
		{name: "other allowed tools: ours added", argv: []string{"claude", "--allowedTools", "Read,Bash(git *)"},
			want: func(s Setup) []string {
				return append([]string{"claude", "--allowedTools", "Read,Bash(git *)"}, ours(s, true)...)
			},
			prompt: "You are bob."},
		{name: "the user's own permission-prompt tool is kept", argv: []string{"claude", "--permission-prompt-tool", "mcp__mine__ask"},
			want: func(s Setup) []string {
				return append([]string{"claude", "--permission-prompt-tool", "mcp__mine__ask"}, without(ours(s, true), "--permission-prompt-tool")...)
			},
			prompt: "You are bob."},
		{name: "a double dash stays last", argv: []string{"claude", "--model", "x", "--", "-p"},
			want: func(s Setup) []string {
				return append(append([]string{"claude", "--model", "x"}, ours(s, true)...), "--", "-p")
			},
			prompt: "You are bob."},
		{name: "user's appended prompt merged into the file", argv: []string{"claude", "--append-system-prompt", "Be terse.", "--model", "x"},
			want: func(s Setup) []string {
				return append([]string{"claude", "--model", "x"}, ours(s, true)...)
			},
			prompt: "Be terse.\n\nYou are bob."},
		{name: "user's prompt file merged", argv: []string{"claude", "--append-system-prompt-file=" + userPrompt, "--append-system-prompt=Be terse."},
			want:   func(s Setup) []string { return append([]string{"claude"}, ours(s, true)...) },
			prompt: "From the file.\n\nBe terse.\n\nYou are bob."},
		{name: "user's settings file replaced by the merged one", argv: []string{"claude", "--settings", userSettings},
			want:   func(s Setup) []string { return append([]string{"claude"}, ours(s, true)...) },
			prompt: "You are bob."},
		{name: "no briefing, no prompt file", argv: []string{"claude"}, noBrief: true,
			want: func(s Setup) []string { return append([]string{"claude"}, ours(s, false)...) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := claudeFixture(t, tc.argv...)
			if tc.noBrief {
				s.SystemPrompt = ""
			}
			argv, env, err := NewClaude().Command(s)
			if err != nil {
				t.Fatal(err)
			}
			if want := tc.want(s); !slices.Equal(argv, want) {
				t.Errorf("argv\n got %q\nwant %q", argv, want)
			}
			if !slices.Equal(env, []string{"CLAUDE_CODE_ENABLE_TELEMETRY=1"}) {
				t.Errorf("env %q", env)
			}
			pf := filepath.Join(s.Dir, "system-prompt.md")
			if tc.prompt == "" {
				if _, err := os.Stat(pf); !os.IsNotExist(err) {
					t.Errorf("prompt file written: %v", err)
				}
			} else if got := string(readPrivate(t, pf)); got != tc.prompt {
				t.Errorf("prompt file %q, want %q", got, tc.prompt)
			}
			// The ticket of the MCP env is in the 0600 file only.
			if strings.Contains(strings.Join(argv, " "), "0123abcd") {
				t.Error("the ticket is on the command line")
			}
		})
	}
}

func TestClaudeCommandErrors(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(s *Setup)
		argv  []string
		inErr string
	}{
		{name: "no command", argv: []string{}, inErr: "no agent command"},
		{name: "relative dir", argv: []string{"claude"}, edit: func(s *Setup) { s.Dir = "agent" }, inErr: "not absolute"},
		{name: "relative svc", argv: []string{"claude"}, edit: func(s *Setup) { s.Svc = "svc" }, inErr: "not absolute"},
		{name: "json output", argv: []string{"claude", "--output-format", "json"}, inErr: "--output-format json"},
		{name: "text input", argv: []string{"claude", "--input-format=text"}, inErr: "--input-format text"},
		{name: "settings without value", argv: []string{"claude", "--settings"}, inErr: "needs a value"},
		{name: "settings twice", argv: []string{"claude", "--settings", "{}", "--settings", "{}"}, inErr: "twice"},
		{name: "settings not an object", argv: []string{"claude", "--settings", "[1]"}, inErr: "not a JSON object"},
		{name: "settings bad JSON", argv: []string{"claude", "--settings", "{nope"}, inErr: "not a JSON object"},
		{name: "settings file missing", argv: []string{"claude", "--settings", "/nonexistent/s.json"}, inErr: "--settings"},
		{name: "hooks not an object", argv: []string{"claude", "--settings", `{"hooks":[]}`}, inErr: "hooks is not an object"},
		{name: "hook list not a list", argv: []string{"claude", "--settings", `{"hooks":{"Stop":{}}}`}, inErr: "hooks.Stop is not a list"},
		{name: "allowedTools without value", argv: []string{"claude", "--allowedTools", "--verbose"}, inErr: "needs a value"},
		{name: "prompt file missing", argv: []string{"claude", "--append-system-prompt-file", "/nonexistent/p"}, inErr: "--append-system-prompt-file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := claudeFixture(t, tc.argv...)
			if tc.edit != nil {
				tc.edit(&s)
			}
			_, _, err := NewClaude().Command(s)
			if err == nil || !strings.Contains(err.Error(), tc.inErr) {
				t.Fatalf("err %v, want one containing %q", err, tc.inErr)
			}
		})
	}
}

type hookGroup struct {
	Matcher string `json:"matcher"`
	Hooks   []struct {
		Type    string `json:"type"`
		Command string `json:"command"`
		Timeout int    `json:"timeout"`
	} `json:"hooks"`
}

func TestClaudeCommandFiles(t *testing.T) {
	tests := []struct {
		name     string
		capture  bool
		svc      string
		settings string // the user's --settings, "" for none
		events   []string
		env      string
		command  string
		// user is the user's hook groups expected before ours, per event.
		user map[string]int
		keep map[string]any // other settings kept
	}{
		{name: "capture", capture: true, svc: "/opt/svc/bin/svc",
			events:  []string{"SessionStart", "UserPromptSubmit", "Notification", "Stop", "PreToolUse", "PostToolUse", "PostToolUseFailure"},
			env:     "CLAUDE_CODE_ENABLE_TELEMETRY=1",
			command: `'/opt/svc/bin/svc' hook`},
		{name: "no capture: no tool hooks, telemetry off", capture: false, svc: "/opt/svc/bin/svc",
			events:  []string{"SessionStart", "UserPromptSubmit", "Notification", "Stop"},
			env:     "CLAUDE_CODE_ENABLE_TELEMETRY=0",
			command: `'/opt/svc/bin/svc' hook`},
		{name: "a path the shell must not split", capture: true, svc: "/home/o'brien/my svc/svc",
			events:  []string{"SessionStart", "UserPromptSubmit", "Notification", "Stop", "PreToolUse", "PostToolUse", "PostToolUseFailure"},
			env:     "CLAUDE_CODE_ENABLE_TELEMETRY=1",
			command: `'/home/o'\''brien/my svc/svc' hook`},
		{name: "user settings merged", capture: true, svc: "/opt/svc/bin/svc",
			settings: `{"model":"opus","hooks":{"Stop":[{"hooks":[{"type":"command","command":"notify-send done"}]}],"Custom":[]}}`,
			events:   []string{"SessionStart", "UserPromptSubmit", "Notification", "Stop", "PreToolUse", "PostToolUse", "PostToolUseFailure"},
			env:      "CLAUDE_CODE_ENABLE_TELEMETRY=1",
			command:  `'/opt/svc/bin/svc' hook`,
			user:     map[string]int{"Stop": 1},
			keep:     map[string]any{"model": "opus"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := claudeFixture(t, "claude")
			s.Capture, s.Svc = tc.capture, tc.svc
			if tc.settings != "" {
				s.Argv = append(s.Argv, "--settings", tc.settings)
			}
			// Twice: the files are replaced whole and stay private.
			var env []string
			for range 2 {
				var err error
				if _, env, err = NewClaude().Command(s); err != nil {
					t.Fatal(err)
				}
			}
			if !slices.Equal(env, []string{tc.env}) {
				t.Errorf("env %q, want %q", env, tc.env)
			}
			var mcp map[string]map[string]struct {
				Command string            `json:"command"`
				Args    []string          `json:"args"`
				Env     map[string]string `json:"env"`
				Timeout int64             `json:"timeout"`
			}
			if err := json.Unmarshal(readPrivate(t, filepath.Join(s.Dir, "mcp.json")), &mcp); err != nil {
				t.Fatal(err)
			}
			srv, ok := mcp["mcpServers"]["svc"]
			if !ok || len(mcp) != 1 || len(mcp["mcpServers"]) != 2 {
				t.Fatalf("mcp.json: %+v", mcp)
			}
			if srv.Command != tc.svc || !slices.Equal(srv.Args, []string{"mcp"}) || len(srv.Env) != 3 || srv.Env["SVC_RUNNER_TICKET"] != "0123abcd" || srv.Timeout != 0 {
				t.Errorf("mcp server %+v", srv)
			}
			// The permission-prompt tool: a server of its own that needs
			// the runner's socket and nothing else (no token).
			ap := mcp["mcpServers"]["svc_approvals"]
			if ap.Command != tc.svc || !slices.Equal(ap.Args, []string{"mcp", "--approval-prompt"}) || len(ap.Env) != 1 || ap.Env["SVC_RUNNER_SOCKET"] != "/tmp/r/relay.sock" {
				t.Errorf("approvals server %+v", ap)
			}
			if ap.Timeout < int64(24*time.Hour/time.Millisecond) || ap.Timeout > 1<<31-1 {
				t.Errorf("tool-call timeout %d ms: a permission prompt may wait a day", ap.Timeout)
			}

			var settings map[string]json.RawMessage
			if err := json.Unmarshal(readPrivate(t, filepath.Join(s.Dir, "settings.json")), &settings); err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.keep {
				var got any
				_ = json.Unmarshal(settings[k], &got)
				if got != v {
					t.Errorf("settings %s = %v, want %v", k, got, v)
				}
			}
			var hooks map[string][]hookGroup
			if err := json.Unmarshal(settings["hooks"], &hooks); err != nil {
				t.Fatal(err)
			}
			for _, ev := range tc.events {
				groups := hooks[ev]
				if len(groups) != tc.user[ev]+1 {
					t.Errorf("%s: %d groups, want %d", ev, len(groups), tc.user[ev]+1)
					continue
				}
				g := groups[len(groups)-1]
				wantMatcher := ""
				if strings.Contains(ev, "ToolUse") {
					wantMatcher = "*"
				}
				if g.Matcher != wantMatcher || len(g.Hooks) != 1 || g.Hooks[0].Type != "command" ||
					g.Hooks[0].Command != tc.command || g.Hooks[0].Timeout != claudeHookTimeout {
					t.Errorf("%s: %+v", ev, g)
				}
			}
			for ev, groups := range hooks {
				if !slices.Contains(tc.events, ev) && len(groups) > 0 {
					t.Errorf("unexpected hook %s: %+v", ev, groups)
				}
			}
			left, _ := filepath.Glob(filepath.Join(s.Dir, ".*tmp*"))
			if len(left) > 0 {
				t.Errorf("temporary files left: %v", left)
			}
		})
	}
}

func TestClaudeParseHook(t *testing.T) {
	big := `{"hook_event_name":"UserPromptSubmit","prompt":"` + strings.Repeat("x", maxHookPayload) + `"}`
	tests := []struct {
		name    string
		payload string
		want    []Event
	}{
		{"prompt submitted", `{"hook_event_name":"UserPromptSubmit","prompt":"hi","session_id":"s"}`, []Event{{Kind: TurnStart}}},
		{"stop", `{"hook_event_name":"Stop","stop_hook_active":false}`, []Event{{Kind: TurnEnd}}},
		{"permission prompt", `{"hook_event_name":"Notification","notification_type":"permission_prompt","message":"x"}`, []Event{{Kind: Blocked}}},
		{"elicitation", `{"hook_event_name":"Notification","notification_type":"elicitation_dialog"}`, []Event{{Kind: Blocked}}},
		{"idle prompt", `{"hook_event_name":"Notification","notification_type":"idle_prompt"}`, []Event{{Kind: Unblocked}}},
		{"other notification", `{"hook_event_name":"Notification","notification_type":"auth_success"}`, nil},
		{"old permission message", `{"hook_event_name":"Notification","message":"Claude needs your permission to use Bash"}`, []Event{{Kind: Blocked}}},
		{"old idle message", `{"hook_event_name":"Notification","message":"Claude is waiting for your input"}`, []Event{{Kind: Unblocked}}},
		{"old other message", `{"hook_event_name":"Notification","message":"hello"}`, nil},
		{"tool start", `{"hook_event_name":"PreToolUse","tool_name":"mcp__svc__send","tool_input":{"to":"alice"}}`,
			[]Event{{Kind: ToolStart, Tool: "mcp__svc__send", ToolInput: json.RawMessage(`{"to":"alice"}`)}}},
		{"tool end", `{"hook_event_name":"PostToolUse","tool_name":"Bash","tool_input":{"command":"ls"},"tool_response":{"stdout":"a"}}`,
			[]Event{{Kind: ToolEnd, Tool: "Bash", ToolInput: json.RawMessage(`{"command":"ls"}`), ToolResult: json.RawMessage(`{"stdout":"a"}`)}}},
		{"tool end, null result", `{"hook_event_name":"PostToolUse","tool_name":"Bash","tool_input":null,"tool_response":null}`,
			[]Event{{Kind: ToolEnd, Tool: "Bash"}}},
		{"tool failure", `{"hook_event_name":"PostToolUseFailure","tool_name":"Read","tool_input":{"file_path":"/x"},"error":"File does not exist."}`,
			[]Event{{Kind: ToolEnd, Tool: "Read", ToolInput: json.RawMessage(`{"file_path":"/x"}`), ToolResult: json.RawMessage(`{"error":"File does not exist."}`)}}},
		{"tool failure without error", `{"hook_event_name":"PostToolUseFailure","tool_name":"Read"}`, []Event{{Kind: ToolEnd, Tool: "Read"}}},
		{"tool without name", `{"hook_event_name":"PreToolUse","tool_input":{}}`, nil},
		{"tool name with a newline", `{"hook_event_name":"PreToolUse","tool_name":"a\nb"}`, nil},
		{"tool name too long", `{"hook_event_name":"PreToolUse","tool_name":"` + strings.Repeat("a", maxHookToolName+1) + `"}`, nil},
		{"tool name not a string", `{"hook_event_name":"PreToolUse","tool_name":7}`, nil},
		{"session startup", `{"hook_event_name":"SessionStart","source":"startup"}`, []Event{{Kind: SessionStart, Source: "startup"}}},
		{"session compact", `{"hook_event_name":"SessionStart","source":"compact"}`, []Event{{Kind: SessionStart, Source: "compact"}}},
		{"session resume", `{"hook_event_name":"SessionStart","source":"resume"}`, []Event{{Kind: SessionStart, Source: "resume"}}},
		{"session without source", `{"hook_event_name":"SessionStart"}`, []Event{{Kind: SessionStart, Source: "startup"}}},
		{"session odd source", `{"hook_event_name":"SessionStart","source":"com pact\u0000"}`, []Event{{Kind: SessionStart, Source: "startup"}}},
		{"unknown event", `{"hook_event_name":"SubagentStop"}`, nil},
		{"no event", `{"prompt":"hi"}`, nil},
		{"not JSON", `hook`, nil},
		{"JSON array", `[1,2]`, nil},
		{"empty", ``, nil},
		{"too big", big, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := NewClaude().ParseHook(json.RawMessage(tc.payload))
			if len(got) != len(tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for i := range got {
				g, w := got[i], tc.want[i]
				if g.Kind != w.Kind || g.Source != w.Source || g.Tool != w.Tool ||
					!bytes.Equal(g.ToolInput, w.ToolInput) || !bytes.Equal(g.ToolResult, w.ToolResult) {
					t.Errorf("event %d: got %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

// stdinRecorder is an agent stdin that records what it got, or fails.
type stdinRecorder struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	n      int   // with err: bytes accepted before failing
	err    error // returned by Write
	closed bool
}

func (w *stdinRecorder) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		n := min(w.n, len(p))
		w.buf.Write(p[:n])
		return n, w.err
	}
	return w.buf.Write(p)
}

func (w *stdinRecorder) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	return nil
}

func TestClaudeDeliver(t *testing.T) {
	long := strings.Repeat("é", claudeMaxTurn) // 2 bytes a rune
	tests := []struct {
		name    string
		text    string
		content func(string) bool
	}{
		{"plain", "[dm from alice] hi", func(c string) bool { return c == "[dm from alice] hi" }},
		{"multi-line and quotes", "a\n\"b\"\n", func(c string) bool { return c == "a\n\"b\"\n" }},
		{"a leading slash is not a command", "/compact now", func(c string) bool { return c == " /compact now" }},
		{"a slash later is kept", "see /tmp/x", func(c string) bool { return c == "see /tmp/x" }},
		{"long text cut on a rune", long, func(c string) bool {
			return len(c) <= claudeMaxTurn && utf8Valid(c) && strings.HasSuffix(c, "bytes]") && strings.HasPrefix(c, "éé")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := &stdinRecorder{}
			s := NewClaude().Attach(w, strings.NewReader(""), make(chan Event, 1), io.Discard)
			if err := s.Deliver(context.Background(), Turn{Text: tc.text, MessageID: "m1"}); err != nil {
				t.Fatal(err)
			}
			out := w.buf.String()
			if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
				t.Fatalf("not one line: %q", out)
			}
			var l struct {
				Type    string `json:"type"`
				Message struct {
					Role    string `json:"role"`
					Content string `json:"content"`
				} `json:"message"`
			}
			if err := json.Unmarshal([]byte(out), &l); err != nil {
				t.Fatal(err)
			}
			if l.Type != "user" || l.Message.Role != "user" || !tc.content(l.Message.Content) {
				t.Errorf("line %.300q", out)
			}
			if err := s.Close(); err != nil || !w.closed {
				t.Errorf("close: %v, closed %v", err, w.closed)
			}
		})
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

func TestClaudeDeliverErrors(t *testing.T) {
	t.Run("nothing written: retry works", func(t *testing.T) {
		w := &stdinRecorder{err: errors.New("broken pipe")}
		s := NewClaude().Attach(w, strings.NewReader(""), make(chan Event, 1), io.Discard)
		if err := s.Deliver(context.Background(), Turn{Text: "a"}); err == nil {
			t.Fatal("no error")
		}
		w.err = nil
		if err := s.Deliver(context.Background(), Turn{Text: "a"}); err != nil {
			t.Fatalf("retry: %v", err)
		}
	})
	t.Run("cut mid-line: every later turn refused", func(t *testing.T) {
		w := &stdinRecorder{err: errors.New("short write"), n: 5}
		s := NewClaude().Attach(w, strings.NewReader(""), make(chan Event, 1), io.Discard)
		err := s.Deliver(context.Background(), Turn{Text: "a"})
		if err == nil || !strings.Contains(err.Error(), "cut mid-line") {
			t.Fatalf("err %v", err)
		}
		w.err = nil
		if err2 := s.Deliver(context.Background(), Turn{Text: "b"}); err2 == nil || !strings.Contains(err2.Error(), "cut mid-line") {
			t.Fatalf("later turn: %v", err2)
		}
	})
	t.Run("cancelled context", func(t *testing.T) {
		w := &stdinRecorder{}
		s := NewClaude().Attach(w, strings.NewReader(""), make(chan Event, 1), io.Discard)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := s.Deliver(ctx, Turn{Text: "a"}); !errors.Is(err, context.Canceled) || w.buf.Len() != 0 {
			t.Fatalf("err %v, wrote %q", err, w.buf.String())
		}
	})
	t.Run("agent not reading: the deadline ends the write", func(t *testing.T) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		defer w.Close()
		s := NewClaude().Attach(w, strings.NewReader(""), make(chan Event, 1), io.Discard)
		// Fill the pipe so nothing more fits.
		if err := w.SetWriteDeadline(time.Now().Add(200 * time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		filled := 0
		for {
			n, err := w.Write(make([]byte, 4096))
			filled += n
			if err != nil {
				break
			}
		}
		_ = w.SetWriteDeadline(time.Time{})
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		if err := s.Deliver(ctx, Turn{Text: "hello"}); err == nil {
			t.Fatal("delivered into a full pipe")
		} else if strings.Contains(err.Error(), "cut mid-line") {
			t.Fatalf("nothing was written, yet: %v", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("Deliver took %s", d)
		}
		// Once the agent reads again, the turn goes through.
		go func() { _, _ = io.CopyN(io.Discard, r, int64(filled)) }()
		ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel2()
		if err := s.Deliver(ctx2, Turn{Text: "hello"}); err != nil {
			t.Fatalf("after draining: %v", err)
		}
	})
}

// syncLog is a log that tests read while the session writes it.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestClaudeOutput(t *testing.T) {
	result := `{"type":"result","subtype":"success","is_error":false,"result":"done"}`
	tests := []struct {
		name      string
		delivered int // turns delivered before the output is read
		out       string
		want      []Event
		logHas    []string
		logHasNot []string
	}{
		{name: "result ends the turn", delivered: 1,
			out:  `{"type":"system","subtype":"init","session_id":"s"}` + "\n" + result + "\n",
			want: []Event{{Kind: TurnEnd}}},
		{name: "no turn pending: result still ends it", delivered: 0, out: result + "\n", want: []Event{{Kind: TurnEnd}}},
		{name: "a later turn pending: only its result ends", delivered: 2,
			out: result + "\n" + result + "\n", want: []Event{{Kind: TurnEnd}}},
		{name: "error result logged", delivered: 1,
			out:    `{"type":"result","subtype":"error_max_turns","is_error":true}` + "\n",
			want:   []Event{{Kind: TurnEnd}},
			logHas: []string{"turn ended with an error (error_max_turns)"}},
		{name: "refused tool ends", delivered: 1,
			out:  `{"type":"system","subtype":"permission_denied","tool_name":"Write","tool_use_id":"t1","message":"denied"}` + "\n",
			want: []Event{{Kind: ToolEnd, Tool: "Write"}}, logHas: []string{"tool Write refused"}},
		{name: "refused tool with a bad name", delivered: 1,
			out: `{"type":"system","subtype":"permission_denied","tool_name":"a\u0007b"}` + "\n"},
		{name: "assistant text and tool calls logged short", delivered: 1,
			out:    `{"type":"assistant","message":{"content":[{"type":"text","text":"` + strings.Repeat("word ", 100) + `"},{"type":"tool_use","name":"mcp__svc__send","input":{}}]}}` + "\n",
			logHas: []string{"claude: word word", "…\n", "claude: tool mcp__svc__send\n"}},
		{name: "assistant with an odd message", delivered: 1, out: `{"type":"assistant","message":"text"}` + "\n"},
		{name: "not JSON is logged, reading goes on", delivered: 1,
			out:    "Error: something\n\n" + result + "\n",
			want:   []Event{{Kind: TurnEnd}},
			logHas: []string{"claude: output: Error: something\n"}},
		{name: "an over-long line is skipped", delivered: 1,
			out:       `{"type":"assistant","message":{"content":[{"type":"text","text":"` + strings.Repeat("x", claudeMaxLine) + `"}]}}` + "\n" + result + "\n",
			want:      []Event{{Kind: TurnEnd}},
			logHas:    []string{"skipped an output line of over"},
			logHasNot: []string{"xxxxxxxxxx"}},
		{name: "last line without newline", delivered: 1, out: result, want: []Event{{Kind: TurnEnd}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pr, pw := io.Pipe()
			events := make(chan Event, 16)
			log := &syncLog{}
			s := NewClaude().Attach(&stdinRecorder{}, pr, events, log)
			for range tc.delivered {
				if err := s.Deliver(context.Background(), Turn{Text: "t"}); err != nil {
					t.Fatal(err)
				}
			}
			go func() {
				_, _ = io.WriteString(pw, tc.out)
				pw.Close()
			}()
			select {
			case <-s.(*claudeSession).readDone:
			case <-time.After(30 * time.Second):
				t.Fatal("stdout not read to its end")
			}
			var got []Event
			for len(events) > 0 {
				got = append(got, <-events)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("events %+v, want %+v\nlog: %s", got, tc.want, log.String())
			}
			for i := range got {
				if got[i].Kind != tc.want[i].Kind || got[i].Tool != tc.want[i].Tool {
					t.Errorf("event %d: %+v, want %+v", i, got[i], tc.want[i])
				}
			}
			l := log.String()
			for _, s := range tc.logHas {
				if !strings.Contains(l, s) {
					t.Errorf("log lacks %q:\n%s", s, l)
				}
			}
			for _, s := range tc.logHasNot {
				if strings.Contains(l, s) {
					t.Errorf("log has %q", s)
				}
			}
			for _, line := range strings.Split(strings.TrimSpace(l), "\n") {
				if len(line) > claudeLogText+64 {
					t.Errorf("log line of %d bytes", len(line))
				}
			}
		})
	}
}

func TestClaudeName(t *testing.T) {
	if n := NewClaude().Name(); n != "claude" {
		t.Fatalf("name %q", n)
	}
}

func TestClaudeUserPromptToolKeepsOursOut(t *testing.T) {
	s := claudeFixture(t, "claude", "--permission-prompt-tool", "mcp__mine__ask")
	argv, _, err := NewClaude().Command(s)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(strings.Join(argv, " "), "--permission-prompt-tool"); n != 1 {
		t.Errorf("%d prompt tools: %q", n, argv)
	}
	var mcp struct {
		MCPServers map[string]json.RawMessage `json:"mcpServers"`
	}
	if err := json.Unmarshal(readPrivate(t, filepath.Join(s.Dir, "mcp.json")), &mcp); err != nil {
		t.Fatal(err)
	}
	if _, ok := mcp.MCPServers["svc"]; !ok || len(mcp.MCPServers) != 1 {
		t.Errorf("no approvals server when the user names their own prompt tool: %v", mcp.MCPServers)
	}
}
