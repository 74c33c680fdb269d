package runner

// The Claude Code adapter (docs/RUNNER-CLAUDE.md): the agent runs headless
// in its streaming mode, one session for the runner's whole life, a turn
// per user line written to its stdin; the toolbox is `svc mcp` named in a
// private MCP config, and hooks in a private settings file report to the
// runner through `svc hook`.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"svc/cmd/internal/capture"
	"svc/cmd/internal/relay"
	"svc/cmd/internal/toolbox"
)

const (
	// claudeMCPServer is the toolbox's server name: its tools reach the
	// model as mcp__svc__<tool>.
	claudeMCPServer = "svc"
	// claudeAllowTools lets every toolbox call through without a
	// permission prompt, which would stall a headless agent.
	claudeAllowTools = "mcp__" + claudeMCPServer + "__*"

	// claudePromptTool is the permission-prompt tool as Claude Code names
	// it: `svc mcp --approval-prompt`, a server entry of its own
	// (docs/APPROVALS.md).
	claudePromptTool = "mcp__" + toolbox.ApprovalPromptServer + "__" + toolbox.ApprovalPromptTool
	// claudePromptTimeout is that server's tool-call timeout (ms): the
	// prompt waits as long as a person may take, up to the broker's longest
	// approval expiry, so it must outlast that.
	claudePromptTimeout = int64((maxApprovalWait + 10*time.Minute) / time.Millisecond)

	claudeMCPFile    = "mcp.json"
	claudeSettings   = "settings.json"
	claudePromptFile = "system-prompt.md"

	// claudeHookTimeout is the hooks' timeout in seconds: `svc hook`
	// returns once the runner applied the event, normally at once.
	claudeHookTimeout = 10

	// claudeMaxFile bounds a settings file or system prompt file the user
	// names on the command line, which the adapter reads to merge.
	claudeMaxFile = 1 << 20
	// claudeMaxTurn bounds the text of one delivered turn; longer text is
	// cut and says so.
	claudeMaxTurn = 512 << 10
	// claudeMaxLine bounds one line of the agent's stdout; a longer line
	// is skipped (and logged).
	claudeMaxLine = 16 << 20
	// claudeWriteTimeout bounds one write to the agent's stdin when the
	// caller's context has no sooner deadline. The agent reads its input
	// continuously, so a write that takes this long means it hangs.
	claudeWriteTimeout = 30 * time.Second
	// claudeLogText bounds the agent text and bad lines echoed to the log.
	claudeLogText = 200
)

// claudeStateHooks and claudeToolHooks are the Claude Code hook events the
// settings register.
// The tool events are left out under --no-capture: they only count tools
// in flight and carry tool results to upload, both activity.
var (
	claudeStateHooks = []string{"SessionStart", "UserPromptSubmit", "Notification", "Stop"}
	claudeToolHooks  = []string{"PreToolUse", "PostToolUse", "PostToolUseFailure"}
)

// NewClaude returns the adapter for the Claude Code CLI.
func NewClaude() Agent { return &claude{} }

// claude keeps what Command started for Attach: the runner calls Command
// once, then Attach once.
type claude struct {
	proxy *capture.Proxy // the capturing proxy in front of the model API
}

func (*claude) Name() string { return "claude" }

// startsToolbox: Claude Code starts `svc mcp` from the MCP config.
func (*claude) startsToolbox() bool { return true }

// claudeArgs is what the adapter learned from the user's command line.
type claudeArgs struct {
	print, verbose   bool
	inputFormat      string // "" when not given
	outputFormat     string
	allowsToolbox    bool   // --allowedTools already names mcp__svc__*
	promptTool       bool   // the user named their own --permission-prompt-tool
	settings         string // the user's --settings value, "" when not given
	appendPrompt     string // the user's --append-system-prompt text
	appendPromptFile string // the user's --append-system-prompt-file
	// drop holds the indexes of argv entries the adapter replaces
	// (--settings and --append-system-prompt[-file] with their values).
	drop map[int]bool
	// end is where the options end: the index of a "--" or len(argv).
	end int
}

// optValue returns the value of the option at argv[i] named one of names,
// given as "--name value" or "--name=value", and how many entries it used
// (0 when argv[i] is not that option).
func optValue(argv []string, i int, names ...string) (val string, used int, err error) {
	a := argv[i]
	for _, n := range names {
		if a == n {
			if i+1 >= len(argv) {
				return "", 0, fmt.Errorf("claude: %s needs a value", n)
			}
			return argv[i+1], 2, nil
		}
		if v, ok := strings.CutPrefix(a, n+"="); ok {
			return v, 1, nil
		}
	}
	return "", 0, nil
}

// scanClaudeArgs reads the options of the user's command (argv[0] is the
// binary) the adapter adds or must agree with.
func scanClaudeArgs(argv []string) (claudeArgs, error) {
	ca := claudeArgs{drop: map[int]bool{}, end: len(argv)}
	for i := 1; i < len(argv); {
		a := argv[i]
		if a == "--" {
			ca.end = i
			break
		}
		switch a {
		case "-p", "--print":
			ca.print = true
			i++
			continue
		case "--verbose":
			ca.verbose = true
			i++
			continue
		}
		type opt struct {
			names []string
			apply func(v string, at, used int) error
		}
		opts := []opt{
			{[]string{"--input-format"}, func(v string, _, _ int) error {
				ca.inputFormat = v
				return nil
			}},
			{[]string{"--output-format"}, func(v string, _, _ int) error {
				ca.outputFormat = v
				return nil
			}},
			{[]string{"--permission-prompt-tool"}, func(string, int, int) error {
				ca.promptTool = true
				return nil
			}},
			{[]string{"--settings"}, func(v string, at, used int) error {
				if ca.settings != "" {
					return errors.New("claude: --settings given twice")
				}
				ca.settings = v
				for k := range used {
					ca.drop[at+k] = true
				}
				return nil
			}},
			{[]string{"--append-system-prompt"}, func(v string, at, used int) error {
				ca.appendPrompt = joinText(ca.appendPrompt, v)
				for k := range used {
					ca.drop[at+k] = true
				}
				return nil
			}},
			{[]string{"--append-system-prompt-file"}, func(v string, at, used int) error {
				if ca.appendPromptFile != "" {
					return errors.New("claude: --append-system-prompt-file given twice")
				}
				ca.appendPromptFile = v
				for k := range used {
					ca.drop[at+k] = true
				}
				return nil
			}},
		}
		matched := false
		for _, o := range opts {
			v, used, err := optValue(argv, i, o.names...)
			if err != nil {
				return ca, err
			}
			if used == 0 {
				continue
			}
			if err := o.apply(v, i, used); err != nil {
				return ca, err
			}
			i += used
			matched = true
			break
		}
		if matched {
			continue
		}
		// --allowedTools takes one or more values (comma or space
		// separated), up to the next option.
		if name, v, ok := allowedToolsOpt(a); ok {
			vals := []string{}
			if v != "" {
				vals = append(vals, v)
			}
			i++
			if v == "" {
				for i < ca.end && i < len(argv) && !strings.HasPrefix(argv[i], "-") {
					vals = append(vals, argv[i])
					i++
				}
				if len(vals) == 0 {
					return ca, fmt.Errorf("claude: %s needs a value", name)
				}
			}
			for _, tv := range vals {
				for _, tool := range strings.FieldsFunc(tv, func(r rune) bool { return r == ',' || r == ' ' }) {
					if tool == claudeAllowTools || tool == "mcp__"+claudeMCPServer {
						ca.allowsToolbox = true
					}
				}
			}
			continue
		}
		i++
	}
	for _, f := range []struct{ name, val string }{{"--input-format", ca.inputFormat}, {"--output-format", ca.outputFormat}} {
		if f.val != "" && f.val != "stream-json" {
			return ca, fmt.Errorf("claude: %s %s: the runner drives Claude Code in stream-json; leave the flag out", f.name, f.val)
		}
	}
	return ca, nil
}

// allowedToolsOpt recognizes --allowedTools / --allowed-tools, with its
// value when given as name=value.
func allowedToolsOpt(a string) (name, val string, ok bool) {
	for _, n := range []string{"--allowedTools", "--allowed-tools"} {
		if a == n {
			return n, "", true
		}
		if v, found := strings.CutPrefix(a, n+"="); found {
			return n, v, true
		}
	}
	return "", "", false
}

func joinText(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "\n\n" + b
}

// Command builds `claude -p --input-format stream-json --output-format
// stream-json --verbose --mcp-config … --allowedTools mcp__svc__* --settings
// … --append-system-prompt-file …` from the user's command, adding only what
// it does not already say. The briefing goes in a file rather than on the
// command line: it can be longer than one argument may be, and a command
// line is readable by every local user.
func (c *claude) Command(s Setup) ([]string, []string, error) {
	if len(s.Argv) == 0 || s.Argv[0] == "" {
		return nil, nil, errors.New("claude: no agent command")
	}
	if s.Dir == "" || !filepath.IsAbs(s.Dir) {
		return nil, nil, fmt.Errorf("claude: private directory %q is not absolute", s.Dir)
	}
	if s.Svc == "" || !filepath.IsAbs(s.Svc) {
		return nil, nil, fmt.Errorf("claude: svc binary path %q is not absolute", s.Svc)
	}
	ca, err := scanClaudeArgs(s.Argv)
	if err != nil {
		return nil, nil, err
	}

	mcpPath := filepath.Join(s.Dir, claudeMCPFile)
	mcpEnv := s.MCPEnv
	if mcpEnv == nil {
		mcpEnv = map[string]string{}
	}
	servers := map[string]any{
		claudeMCPServer: map[string]any{"command": s.Svc, "args": []string{"mcp"}, "env": mcpEnv},
	}
	if !ca.promptTool {
		// The permission-prompt tool, alone in a server that asks the
		// runner and needs no credential: Claude Code ends its session
		// when it cannot find the tool (measured with 2.1.328), so it
		// must not hang on the toolbox reaching the broker at start.
		servers[toolbox.ApprovalPromptServer] = map[string]any{
			"command": s.Svc, "args": []string{"mcp", "--approval-prompt"},
			"env": map[string]string{relay.Env: mcpEnv[relay.Env]}, "timeout": claudePromptTimeout,
		}
	}
	mcp, err := json.MarshalIndent(map[string]any{"mcpServers": servers}, "", "  ")
	if err != nil {
		return nil, nil, err
	}
	if err := writePrivate(mcpPath, mcp); err != nil {
		return nil, nil, err
	}

	settings, err := claudeSettingsJSON(ca.settings, s.Svc, s.Capture)
	if err != nil {
		return nil, nil, err
	}
	settingsPath := filepath.Join(s.Dir, claudeSettings)
	if err := writePrivate(settingsPath, settings); err != nil {
		return nil, nil, err
	}

	prompt := ca.appendPrompt
	if ca.appendPromptFile != "" {
		b, err := readBounded(ca.appendPromptFile)
		if err != nil {
			return nil, nil, fmt.Errorf("claude: --append-system-prompt-file: %w", err)
		}
		prompt = joinText(string(b), prompt)
	}
	prompt = joinText(prompt, s.SystemPrompt)

	var add []string
	if !ca.print {
		add = append(add, "-p")
	}
	if ca.inputFormat == "" {
		add = append(add, "--input-format", "stream-json")
	}
	if ca.outputFormat == "" {
		add = append(add, "--output-format", "stream-json")
	}
	if !ca.verbose {
		add = append(add, "--verbose")
	}
	add = append(add, "--mcp-config", mcpPath)
	if !ca.allowsToolbox {
		add = append(add, "--allowedTools", claudeAllowTools)
	}
	if !ca.promptTool {
		// A tool that needs permission asks a person through the toolbox
		// instead of being refused at once (headless, no one could answer
		// a prompt). Tools the user allowed never ask.
		add = append(add, "--permission-prompt-tool", claudePromptTool)
	}
	add = append(add, "--settings", settingsPath)
	if prompt != "" {
		promptPath := filepath.Join(s.Dir, claudePromptFile)
		if err := writePrivate(promptPath, []byte(prompt)); err != nil {
			return nil, nil, err
		}
		add = append(add, "--append-system-prompt-file", promptPath)
	}

	// The user's options, then ours (each starts with "-", so none is
	// taken as a value of a user option that takes several), then a "--"
	// and what follows it.
	argv := []string{s.Argv[0]}
	for i := 1; i < ca.end; i++ {
		if !ca.drop[i] {
			argv = append(argv, s.Argv[i])
		}
	}
	argv = append(argv, add...)
	argv = append(argv, s.Argv[ca.end:]...)

	// Telemetry: on with capture (the runner adds the OTEL_* settings),
	// explicitly off without, whatever the runner's own environment says.
	env := []string{"CLAUDE_CODE_ENABLE_TELEMETRY=0"}
	if s.Capture {
		env = []string{"CLAUDE_CODE_ENABLE_TELEMETRY=1"}
	}
	if s.Inferences != nil {
		base, err := c.startProxy(s, os.Getenv)
		if err != nil {
			return nil, nil, err
		}
		if base != "" {
			env = append(env, claudeBaseURLEnv+"="+base)
		}
	}
	return argv, env, nil
}

// claudeBaseURLEnv is where Claude Code reads the Anthropic API's base URL.
const claudeBaseURLEnv = "ANTHROPIC_BASE_URL"

// claudeDefaultAPI is the Anthropic API Claude Code calls by default.
const claudeDefaultAPI = "https://api.anthropic.com"

// startProxy puts the capturing proxy in front of the Anthropic API, as
// the Codex adapter does for its provider: Claude Code's own telemetry cuts
// a request body at about 60 KB, so only the proxy sees every request
// whole (docs/RUNNER-CLAUDE.md, "Full capture"). The upstream is the
// user's ANTHROPIC_BASE_URL, else the public API. It returns the base URL
// to give Claude Code (in its environment, which other users cannot read:
// the URL's random prefix is the proxy's lock), or "" when Claude Code is
// set to Bedrock or Vertex, which the proxy does not speak.
func (c *claude) startProxy(s Setup, getenv func(string) string) (string, error) {
	for _, k := range []string{"CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX"} {
		if v := strings.TrimSpace(getenv(k)); v != "" && v != "0" && !strings.EqualFold(v, "false") {
			if s.Log != nil {
				fmt.Fprintf(s.Log, "claude: %s is set: model calls are not captured (the proxy speaks the Anthropic API only)\n", k)
			}
			return "", nil
		}
	}
	raw := strings.TrimSpace(getenv(claudeBaseURLEnv))
	if raw == "" {
		raw = claudeDefaultAPI
	}
	up, err := url.Parse(raw)
	if err != nil || (up.Scheme != "http" && up.Scheme != "https") || up.Host == "" {
		return "", fmt.Errorf("claude: %s is not an http(s) URL", claudeBaseURLEnv)
	}
	if up.User != nil {
		return "", fmt.Errorf("claude: %s carries credentials; put the key in ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN", claudeBaseURLEnv)
	}
	p, err := capture.Start(capture.Options{Upstream: up, Log: s.Log, Sink: CaptureSink(s.Inferences)})
	if err != nil {
		return "", fmt.Errorf("claude: capturing proxy: %w", err)
	}
	c.proxy = p
	return p.URL(), nil
}

// claudeSettingsJSON is the settings file: the user's own settings (a file
// path or a JSON object, as --settings takes), if any, with the runner's
// hooks added to theirs.
func claudeSettingsJSON(user, svc string, capture bool) ([]byte, error) {
	settings := map[string]any{}
	if user != "" {
		raw := []byte(user)
		if t := strings.TrimSpace(user); !strings.HasPrefix(t, "{") && !strings.HasPrefix(t, "[") {
			b, err := readBounded(user)
			if err != nil {
				return nil, fmt.Errorf("claude: --settings: %w", err)
			}
			raw = b
		}
		if err := json.Unmarshal(raw, &settings); err != nil || settings == nil {
			return nil, fmt.Errorf("claude: --settings is not a JSON object: %v", err)
		}
	}
	hooks := map[string]any{}
	if h, ok := settings["hooks"]; ok && h != nil {
		m, ok := h.(map[string]any)
		if !ok {
			return nil, errors.New("claude: --settings: hooks is not an object")
		}
		hooks = m
	}
	command := map[string]any{"type": "command", "command": shellQuote(svc) + " hook", "timeout": claudeHookTimeout}
	events := claudeStateHooks
	if capture {
		events = append(append([]string(nil), claudeStateHooks...), claudeToolHooks...)
	}
	for _, ev := range events {
		group := map[string]any{"hooks": []any{command}}
		if ev == "PreToolUse" || ev == "PostToolUse" || ev == "PostToolUseFailure" {
			group["matcher"] = "*"
		}
		var list []any
		if prev, ok := hooks[ev]; ok && prev != nil {
			l, ok := prev.([]any)
			if !ok {
				return nil, fmt.Errorf("claude: --settings: hooks.%s is not a list", ev)
			}
			list = l
		}
		hooks[ev] = append(list, group)
	}
	settings["hooks"] = hooks
	return json.MarshalIndent(settings, "", "  ")
}

// shellQuote quotes s for a POSIX shell: Claude Code runs a hook's command
// with the shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, claudeMaxFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > claudeMaxFile {
		return nil, fmt.Errorf("%s is over %d bytes", path, claudeMaxFile)
	}
	return b, nil
}

// writePrivate writes data to path as a 0600 file, replacing it whole.
func writePrivate(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if err := f.Chmod(0o600); err == nil {
		_, err = f.Write(data)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp, path)
		}
		if err == nil {
			return nil
		}
	} else {
		f.Close()
	}
	os.Remove(tmp)
	return fmt.Errorf("claude: writing %s: %w", filepath.Base(path), err)
}

// Attach starts reading the agent's stdout. The capturing proxy closes
// once the agent's output ends (the agent exited).
func (c *claude) Attach(stdin io.WriteCloser, stdout io.Reader, events chan<- Event, log io.Writer) Session {
	s := &claudeSession{stdin: stdin, log: log, readDone: make(chan struct{}),
		out: lineWriter{w: stdin, name: "claude", timeout: claudeWriteTimeout}}
	proxy := c.proxy
	go func() {
		defer close(s.readDone)
		s.read(stdout, events)
		if proxy != nil {
			proxy.Close()
		}
	}()
	return s
}

type claudeSession struct {
	stdin    io.WriteCloser
	readDone chan struct{} // closed once stdout is read to its end

	logMu sync.Mutex
	log   io.Writer

	out lineWriter // the agent's stdin, one turn line at a time

	mu        sync.Mutex
	delivered int // turns written whole
	results   int // result lines read
}

// claudeUserLine is one stream-json input line.
type claudeUserLine struct {
	Type    string `json:"type"`
	Message struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"message"`
}

// Deliver writes the turn as one user line. A line is written whole or
// not at all as far as the runner can tell: a write cut short (the agent
// stopped reading) leaves a partial line the agent will choke on, so the
// session refuses every later turn; the runner keeps them.
func (s *claudeSession) Deliver(ctx context.Context, t Turn) error {
	text := boundText(t.Text, claudeMaxTurn)
	// Claude Code runs a user line that starts with "/" as a slash command
	// (/compact, /clear, …): a message is never a command to the agent.
	if strings.HasPrefix(text, "/") {
		text = " " + text
	}
	var l claudeUserLine
	l.Type, l.Message.Role, l.Message.Content = "user", "user", text
	line, err := json.Marshal(l)
	if err != nil {
		return err
	}
	line = append(line, '\n')

	if err := s.out.writeLine(ctx, line, "delivering a turn"); err != nil {
		return err
	}
	s.mu.Lock()
	s.delivered++
	s.mu.Unlock()
	return nil
}

func (s *claudeSession) Close() error { return s.stdin.Close() }

// boundText cuts text to at most max bytes on a rune boundary, saying so.
func boundText(text string, max int) string {
	if len(text) <= max {
		return text
	}
	note := fmt.Sprintf("\n[svc: turn cut at %d of %d bytes]", max, len(text))
	cut := max - len(note)
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return text[:cut] + note
}

func (s *claudeSession) logf(format string, args ...any) {
	if s.log == nil {
		return
	}
	s.logMu.Lock()
	defer s.logMu.Unlock()
	fmt.Fprintf(s.log, "claude: "+format+"\n", args...)
}

// claudeOutLine is the part of a stream-json output line the adapter reads.
type claudeOutLine struct {
	Type     string          `json:"type"`
	Subtype  string          `json:"subtype"`
	IsError  bool            `json:"is_error"`
	Message  json.RawMessage `json:"message"`
	ToolName string          `json:"tool_name"`
}

// claudeAssistant is the message of an assistant line.
type claudeAssistant struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
		Name string `json:"name"`
	} `json:"content"`
}

// read reads stdout until EOF: a result line ends the turn (the fallback
// for a Stop hook that does not come; a slash command such as /compact has
// a result but no Stop), a permission_denied line ends the refused tool,
// assistant text and tool calls go to the log in one short line each. The
// system/init line comes at every turn, not once a session: it means
// nothing to the runner (the SessionStart hook does).
func (s *claudeSession) read(stdout io.Reader, events chan<- Event) {
	r := bufio.NewReaderSize(stdout, 64<<10)
	for {
		line, tooLong, err := readBoundedLine(r, claudeMaxLine)
		if tooLong {
			s.logf("skipped an output line of over %d bytes", claudeMaxLine)
		} else if len(bytes.TrimSpace(line)) > 0 {
			if ev, ok := s.handle(line); ok {
				events <- ev
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				s.logf("reading output: %v", err)
			}
			return
		}
	}
}

// handle reads one output line; it returns the event it means, if any.
func (s *claudeSession) handle(line []byte) (Event, bool) {
	var l claudeOutLine
	if err := json.Unmarshal(line, &l); err != nil {
		s.logf("output: %s", s.short(string(line)))
		return Event{}, false
	}
	switch l.Type {
	case "assistant":
		var msg claudeAssistant
		if json.Unmarshal(l.Message, &msg) != nil {
			return Event{}, false
		}
		for _, c := range msg.Content {
			switch c.Type {
			case "text":
				if t := strings.TrimSpace(c.Text); t != "" {
					s.logf("%s", s.short(t))
				}
			case "tool_use":
				s.logf("tool %s", s.short(c.Name))
			}
		}
	case "system":
		// A tool the permission rules refuse had its PreToolUse hook but
		// gets no PostToolUse(Failure): this line closes it.
		if l.Subtype == "permission_denied" {
			if name, ok := toolName(l.ToolName); ok {
				s.logf("tool %s refused: not allowed", s.short(name))
				return Event{Kind: ToolEnd, Tool: name}, true
			}
		}
	case "result":
		if l.IsError {
			s.logf("turn ended with an error (%s)", s.short(l.Subtype))
		}
		// A result ends the turn only when no later turn was delivered:
		// if one was, the agent goes on with it and its own result (or
		// Stop hook) ends it.
		s.mu.Lock()
		s.results++
		pending := s.delivered > s.results
		s.mu.Unlock()
		if !pending {
			return Event{Kind: TurnEnd, Failed: l.IsError}, true
		}
	}
	return Event{}, false
}

// short is short of the text redacted as the log redacts it.
func (s *claudeSession) short(text string) string { return short(redactFor(s.log)(text)) }

// short makes s one log line of at most claudeLogText bytes.
func short(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= claudeLogText {
		return s
	}
	cut := claudeLogText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// readBoundedLine reads one line of at most max bytes (without its
// newline). A longer line is read to its end and dropped: tooLong.
func readBoundedLine(r *bufio.Reader, max int) (line []byte, tooLong bool, err error) {
	for {
		chunk, isPrefix, err := r.ReadLine()
		if !tooLong {
			if len(line)+len(chunk) > max {
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if err != nil || !isPrefix {
			return line, tooLong, err
		}
	}
}

// ParseHook is the Claude Code hook mapping of hookevents.go.
func (*claude) ParseHook(payload json.RawMessage) []Event { return ParseHook(payload) }
