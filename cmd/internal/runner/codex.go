package runner

// The Codex adapter (docs/RUNNER-CODEX.md): the agent runs as `codex
// app-server`, one long-lived process speaking JSON-RPC on stdio (one JSON
// object a line), one thread for the runner's life, a turn per turn/start.
// The toolbox is `svc mcp` named in Codex's own MCP config (-c
// mcp_servers.svc.*), the briefing is the thread's developer instructions,
// the model provider goes through the capturing proxy, and Codex's OTLP
// export goes to the broker.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"svc/cmd/internal/capture"
	"svc/cmd/internal/client"
	"svc/cmd/internal/relay"
)

const (
	// codexMCPServer is the toolbox's server name: Codex offers its tools
	// to the model in the namespace mcp__svc.
	codexMCPServer = "svc"
	// codexMaxLine bounds one JSON-RPC line from Codex; a longer line is
	// skipped (and logged).
	codexMaxLine = 16 << 20
	// codexMaxTurn bounds the text of one delivered turn.
	codexMaxTurn = 512 << 10
	// codexCallTimeout bounds a JSON-RPC call of the runner (initialize,
	// thread/start, turn/start) when the caller's context has no sooner
	// deadline.
	codexCallTimeout = 60 * time.Second
	// codexLogText bounds the agent text echoed to the log.
	codexLogText = 2000
	// codexToolboxWait bounds how long the first turn waits for the
	// toolbox's MCP server to be up: Codex starts MCP servers in the
	// background, and a turn started before the toolbox is ready goes to
	// the model without the toolbox's tools (measured with 0.169.0).
	codexToolboxWait = 30 * time.Second
	// codexMaxInflight bounds the tool items remembered between their
	// start and end.
	codexMaxInflight = 1024
)

// codexVersion is the clientInfo version the runner gives Codex.
const codexVersion = "1"

// NewCodex returns the adapter for the Codex CLI.
func NewCodex() Agent { return &codex{} }

// codex keeps what Command learned for Attach: the runner calls Command
// once, then Attach once.
type codex struct {
	threadParams map[string]any
	proxy        *capture.Proxy
	approve      func(ctx context.Context, r relay.ApprovalRequest) relay.ApprovalAnswer
}

func (*codex) Name() string { return "codex" }

// codexArgs is the user's command line, turned into app-server terms.
type codexArgs struct {
	config    []string // -c values, in order (the user's -m/-p as -c)
	features  []string // --enable/--disable with their value
	approval  string   // -a
	sandbox   string   // -s
	cwd       string   // -C
	overrides []codexOverride
}

// scanCodexArgs reads the user's `codex [flags]` (argv[0] is the binary).
// What applies to app-server is kept; what cannot apply is refused.
func scanCodexArgs(argv []string) (codexArgs, error) {
	var ca codexArgs
	addConfig := func(kv string) error {
		o, err := parseCodexOverride(kv)
		if err != nil {
			return err
		}
		ca.config = append(ca.config, kv)
		ca.overrides = append(ca.overrides, o)
		return nil
	}
	for i := 1; i < len(argv); {
		a := argv[i]
		if i == 1 && a == "app-server" {
			i++
			continue
		}
		type opt struct {
			names []string
			apply func(string) error
		}
		opts := []opt{
			{[]string{"-c", "--config"}, addConfig},
			{[]string{"--enable"}, func(v string) error { ca.features = append(ca.features, "--enable", v); return nil }},
			{[]string{"--disable"}, func(v string) error { ca.features = append(ca.features, "--disable", v); return nil }},
			{[]string{"-m", "--model"}, func(v string) error {
				q, err := tomlValue(v)
				if err != nil {
					return err
				}
				return addConfig("model=" + q)
			}},
			{[]string{"-p", "--profile"}, func(v string) error {
				// Codex 0.169 refuses profiles for app-server (--profile
				// "only applies to runtime commands", a profile key is a
				// legacy config error).
				return errors.New("codex: -p/--profile does not apply to codex app-server; put the profile's settings in -c flags or config.toml")
			}},
			{[]string{"-a", "--ask-for-approval"}, func(v string) error {
				switch v {
				case "untrusted", "on-request", "on-failure", "never":
					ca.approval = v
					return nil
				}
				return fmt.Errorf("codex: --ask-for-approval %q is not untrusted, on-request, on-failure or never", short(v))
			}},
			{[]string{"-s", "--sandbox"}, func(v string) error {
				switch v {
				case "read-only", "workspace-write", "danger-full-access":
					ca.sandbox = v
					return nil
				}
				return fmt.Errorf("codex: --sandbox %q is not read-only, workspace-write or danger-full-access", short(v))
			}},
			{[]string{"-C", "--cd"}, func(v string) error {
				abs, err := filepath.Abs(v)
				if err != nil {
					return err
				}
				ca.cwd = abs
				return nil
			}},
		}
		matched := false
		for _, o := range opts {
			v, used, err := optValue(argv, i, o.names...)
			if err != nil {
				return ca, errors.New(strings.Replace(err.Error(), "claude:", "codex:", 1))
			}
			if used == 0 {
				continue
			}
			if err := o.apply(v); err != nil {
				return ca, err
			}
			i += used
			matched = true
			break
		}
		if matched {
			continue
		}
		switch {
		case a == "--full-auto":
			ca.sandbox = "workspace-write"
		case a == "--dangerously-bypass-approvals-and-sandbox" || a == "--yolo":
			ca.sandbox, ca.approval = "danger-full-access", "never"
		case strings.HasPrefix(a, "-"):
			return ca, fmt.Errorf("codex: %s does not apply to the runner's `codex app-server` (kept: -c, --enable, --disable, -m, -p, -a, -s, -C, --full-auto)", short(a))
		default:
			return ca, fmt.Errorf("codex: %q: the runner starts `codex app-server` itself and feeds it messages; leave out subcommands and prompts", short(a))
		}
		i++
	}
	if ca.approval == "on-failure" {
		// Codex 0.169's app-server has no on-failure: the nearest is
		// on-request (approval is asked for when the model asks).
		ca.approval = "on-request"
	}
	return ca, nil
}

// Command builds `codex app-server <user's config flags> <runner's -c>`.
// No secret is on the command line, and no token anywhere: the toolbox
// gets its one-time ticket through mcp_servers.svc.env_vars, which
// forwards it from Codex's environment.
func (c *codex) Command(s Setup) ([]string, []string, error) {
	if len(s.Argv) == 0 || s.Argv[0] == "" {
		return nil, nil, errors.New("codex: no agent command")
	}
	if s.Svc == "" || !filepath.IsAbs(s.Svc) {
		return nil, nil, fmt.Errorf("codex: svc binary path %q is not absolute", s.Svc)
	}
	ca, err := scanCodexArgs(s.Argv)
	if err != nil {
		return nil, nil, err
	}
	argv := []string{s.Argv[0], "app-server"}
	for _, kv := range ca.config {
		argv = append(argv, "-c", kv)
	}
	argv = append(argv, ca.features...)

	// The toolbox, through Codex's own MCP config. Its environment is
	// forwarded by name from Codex's: the values never reach argv.
	svcPath, err := tomlValue(s.Svc)
	if err != nil {
		return nil, nil, err
	}
	names, env := codexToolboxEnv(s.MCPEnv, os.Environ())
	namesTOML, err := tomlValue(names)
	if err != nil {
		return nil, nil, err
	}
	argv = append(argv,
		"-c", "mcp_servers."+codexMCPServer+".command="+svcPath,
		"-c", "mcp_servers."+codexMCPServer+`.args=["mcp"]`,
		"-c", "mcp_servers."+codexMCPServer+".env_vars="+namesTOML,
		// A toolbox call needs no approval: under the runner's default
		// approval policy (never) it would otherwise be refused.
		"-c", "mcp_servers."+codexMCPServer+`.default_tools_approval_mode="approve"`,
	)

	cfg, err := loadCodexConfig(os.Getenv)
	if err != nil {
		return nil, nil, err
	}
	for _, o := range ca.overrides {
		setPath(cfg, o.Path, o.Value)
	}

	// The commands the model runs must not see the runner's credentials:
	// Codex 0.169 passes its whole environment to them by default
	// (measured: `env` showed SVC_TOKEN). The user's own excludes stay.
	exclude := []string{client.EnvToken, relay.TicketEnv, "OTEL_EXPORTER_OTLP_HEADERS", codexCaptureKeyEnv}
	if prev, ok := getPath(cfg, "shell_environment_policy", "exclude"); ok {
		list, ok := prev.([]any)
		if !ok {
			return nil, nil, errors.New("codex: shell_environment_policy.exclude is not a list")
		}
		for _, v := range list {
			if p, ok := v.(string); ok && !slices.Contains(exclude, p) {
				exclude = append(exclude, p)
			}
		}
	}
	excl, err := tomlValue(exclude)
	if err != nil {
		return nil, nil, err
	}
	argv = append(argv, "-c", "shell_environment_policy.exclude="+excl)

	// The model provider through the capturing proxy.
	if s.Inferences != nil {
		prov, err := resolveCodexProvider(cfg, nil, os.Getenv)
		if err != nil {
			return nil, nil, err
		}
		up, err := url.Parse(prov.BaseURL())
		if err != nil {
			return nil, nil, err
		}
		key := make([]byte, 16)
		if _, err := rand.Read(key); err != nil {
			return nil, nil, err
		}
		p, err := capture.Start(capture.Options{Upstream: up, Log: s.Log, Sink: CaptureSink(s.Inferences), Key: hex.EncodeToString(key)})
		if err != nil {
			return nil, nil, fmt.Errorf("codex: capturing proxy: %w", err)
		}
		env = append(env, codexCaptureKeyEnv+"="+hex.EncodeToString(key))
		over, err := prov.captureOverrides(p.URL())
		if err != nil {
			p.Close()
			return nil, nil, err
		}
		c.proxy = p
		argv = append(argv, over...)
	}

	// Codex's own telemetry, through the runner's OTLP relay (which adds
	// the bearer); the relay's key comes from OTEL_EXPORTER_OTLP_HEADERS
	// in Setup.Env, never argv.
	if s.Capture {
		base := strings.TrimRight(s.Env["OTEL_EXPORTER_OTLP_ENDPOINT"], "/")
		if base != "" {
			ep, err := tomlValue(base + "/v1/logs")
			if err != nil {
				return nil, nil, err
			}
			argv = append(argv, "-c", "otel.exporter={otlp-http={endpoint="+ep+`, protocol="binary"}}`,
				"-c", "otel.log_user_prompt=true")
		}
	} else {
		argv = append(argv, "-c", `otel.exporter="none"`)
	}

	// A person answers Codex's approval requests through the runner
	// (docs/APPROVALS.md), so the default is Codex's own: on-request. A
	// runner without approvals (none wired) keeps never: no one could
	// answer.
	approval := ca.approval
	if approval == "" {
		approval = "on-request"
		if s.Approve == nil {
			approval = "never"
		}
	}
	c.approve = s.Approve
	c.threadParams = map[string]any{"approvalPolicy": approval}
	if ca.sandbox != "" {
		c.threadParams["sandbox"] = ca.sandbox
	}
	if ca.cwd != "" {
		c.threadParams["cwd"] = ca.cwd
	} else if wd, err := os.Getwd(); err == nil {
		c.threadParams["cwd"] = wd
	}
	if s.SystemPrompt != "" {
		c.threadParams["developerInstructions"] = boundText(s.SystemPrompt, codexMaxTurn)
	}
	return argv, env, nil
}

// codexToolboxEnv names the variables Codex forwards to `svc mcp`
// (mcp_servers.svc.env_vars: Codex gives an MCP server only a short list of
// its own variables plus those): the toolbox's (SVC_URL, SVC_RUNNER_SOCKET,
// SVC_RUNNER_TICKET), added to Codex's environment, and every other SVC_*
// setting of the runner's environment, which Codex inherits, since
// `svc mcp` is svc and reads its settings there. Sorted, no duplicates.
func codexToolboxEnv(mcpEnv map[string]string, environ []string) (names, env []string) {
	seen := map[string]bool{}
	for _, k := range []string{client.EnvURL, relay.Env, relay.TicketEnv} {
		if v, ok := mcpEnv[k]; ok {
			seen[k] = true
			env = append(env, k+"="+v)
		}
	}
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "SVC_") && codexKeyPart.MatchString(k) && !seen[k] {
			if k == client.EnvToken || k == relay.Env || k == relay.TicketEnv {
				continue // the runner's own, never the agent's
			}
			seen[k] = true
		}
	}
	for k := range seen {
		names = append(names, k)
	}
	slices.Sort(names)
	return names, env
}

// startsToolbox: Codex starts `svc mcp` from its MCP config.
func (*codex) startsToolbox() bool { return true }

// ParseHook: Codex runs no hook command under the runner; everything comes
// over the app-server protocol.
func (*codex) ParseHook(json.RawMessage) []Event { return nil }

// Attach starts the JSON-RPC session: the handshake and thread/start run at
// once, Deliver waits for them.
func (c *codex) Attach(stdin io.WriteCloser, stdout io.Reader, events chan<- Event, log io.Writer) Session {
	s := &codexSession{
		stdin: stdin, log: log, events: events,
		out:      lineWriter{w: stdin, name: "codex", timeout: codexCallTimeout},
		pending:  map[int64]chan codexResponse{},
		inflight: map[string]Event{},
		ready:    make(chan struct{}),
		toolbox:  make(chan struct{}),
		readDone: make(chan struct{}),
		proxy:    c.proxy,
		approve:  c.approve,
	}
	s.life, s.endLife = context.WithCancel(context.Background())
	go func() {
		defer close(s.readDone)
		defer s.endLife()
		s.read(stdout)
		s.failAll(errors.New("codex: the agent's output ended"))
		s.tbOnce.Do(func() { close(s.toolbox) })
		if s.proxy != nil {
			s.proxy.Close()
		}
	}()
	go s.start(c.threadParams)
	return s
}

type codexSession struct {
	stdin    io.WriteCloser
	events   chan<- Event
	readDone chan struct{}
	proxy    *capture.Proxy
	// approve asks a person (nil: every approval request is declined at
	// once); life ends when Codex's output does, and with it every wait.
	approve func(ctx context.Context, r relay.ApprovalRequest) relay.ApprovalAnswer
	life    context.Context
	endLife context.CancelFunc

	logMu sync.Mutex
	log   io.Writer

	out lineWriter // the agent's stdin, one line at a time

	mu       sync.Mutex
	nextID   int64
	pending  map[int64]chan codexResponse
	closed   error
	inflight map[string]Event // tool items started, by item id
	compact  string           // turn id of the last compaction reported

	ready    chan struct{} // closed once the thread started (or failed)
	toolbox  chan struct{} // closed once the toolbox's MCP server is up (or failed)
	tbOnce   sync.Once
	threadID string
	startErr error
}

type codexResponse struct {
	Result json.RawMessage
	Err    error
}

// codexMsg is any JSON-RPC message from Codex.
type codexMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// short is short of the text redacted as the log redacts it (a cut
// secret is no longer found by the log's writer).
func (s *codexSession) short(text string) string { return short(redactFor(s.log)(text)) }

func (s *codexSession) logf(format string, args ...any) {
	if s.log == nil {
		return
	}
	s.logMu.Lock()
	defer s.logMu.Unlock()
	fmt.Fprintf(s.log, "codex: "+format+"\n", args...)
}

// write sends one JSON line, bounded by ctx and codexCallTimeout.
func (s *codexSession) write(ctx context.Context, v any) error {
	line, err := json.Marshal(v)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	return s.out.writeLine(ctx, line, "writing to the agent")
}

// call sends a request and waits for its response.
func (s *codexSession) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, codexCallTimeout)
	defer cancel()
	ch := make(chan codexResponse, 1)
	s.mu.Lock()
	if s.closed != nil {
		s.mu.Unlock()
		return nil, s.closed
	}
	s.nextID++
	id := s.nextID
	s.pending[id] = ch
	s.mu.Unlock()
	drop := func() {
		s.mu.Lock()
		delete(s.pending, id)
		s.mu.Unlock()
	}
	if err := s.write(ctx, map[string]any{"id": id, "method": method, "params": params}); err != nil {
		drop()
		return nil, err
	}
	select {
	case r := <-ch:
		return r.Result, r.Err
	case <-ctx.Done():
		drop()
		return nil, fmt.Errorf("codex: %s: no answer: %w", method, ctx.Err())
	}
}

// failAll ends every call waiting for an answer.
func (s *codexSession) failAll(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed == nil {
		s.closed = err
	}
	for id, ch := range s.pending {
		ch <- codexResponse{Err: err}
		delete(s.pending, id)
	}
}

// start runs the handshake and starts the thread.
func (s *codexSession) start(params map[string]any) {
	err := func() error {
		ctx := context.Background()
		if _, err := s.call(ctx, "initialize", map[string]any{
			"clientInfo": map[string]any{"name": "svc", "title": "svc runner", "version": codexVersion},
		}); err != nil {
			return fmt.Errorf("codex: initialize: %w", err)
		}
		if err := s.write(ctx, map[string]any{"method": "initialized"}); err != nil {
			return err
		}
		res, err := s.call(ctx, "thread/start", params)
		if err != nil {
			return fmt.Errorf("codex: thread/start: %w", err)
		}
		var r struct {
			Thread struct {
				ID string `json:"id"`
			} `json:"thread"`
		}
		if err := json.Unmarshal(res, &r); err != nil || r.Thread.ID == "" || len(r.Thread.ID) > 256 {
			return errors.New("codex: thread/start answered no thread id")
		}
		s.mu.Lock()
		s.threadID = r.Thread.ID
		s.mu.Unlock()
		return nil
	}()
	s.mu.Lock()
	s.startErr = err
	s.mu.Unlock()
	close(s.ready)
	if err != nil {
		// Without a thread no turn can ever be delivered: end the agent's
		// input so Codex exits and the runner stops with this error in its
		// log, instead of looking online while nothing arrives.
		s.logf("%v; stopping the agent", err)
		_ = s.stdin.Close()
		return
	}
	s.send(Event{Kind: SessionStart, Source: "startup"})
	select {
	case <-s.toolbox:
	case <-s.readDone:
	case <-time.After(codexToolboxWait):
		s.logf("the toolbox (MCP server %s) is not up after %s; turns go on without waiting", codexMCPServer, codexToolboxWait)
		s.tbOnce.Do(func() { close(s.toolbox) })
	}
}

// send hands an event to the runner unless the session's output ended
// long ago (the runner reads events until the agent exits).
func (s *codexSession) send(e Event) { s.events <- e }

// Deliver starts a turn: turn/start, returning once Codex accepted it.
func (s *codexSession) Deliver(ctx context.Context, t Turn) error {
	select {
	case <-s.ready:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.mu.Lock()
	tid, err := s.threadID, s.startErr
	s.mu.Unlock()
	if err != nil {
		return err
	}
	select {
	case <-s.toolbox:
	case <-ctx.Done():
		return ctx.Err()
	}
	text := boundText(t.Text, codexMaxTurn)
	_, err = s.call(ctx, "turn/start", map[string]any{
		"threadId": tid,
		"input":    []map[string]any{{"type": "text", "text": text}},
	})
	if err != nil {
		return fmt.Errorf("codex: turn/start: %w", err)
	}
	return nil
}

func (s *codexSession) Close() error { return s.stdin.Close() }

// read reads Codex's output until EOF.
func (s *codexSession) read(stdout io.Reader) {
	r := bufio.NewReaderSize(stdout, 64<<10)
	for {
		line, tooLong, err := readBoundedLine(r, codexMaxLine)
		if tooLong {
			s.logf("skipped an output line of over %d bytes", codexMaxLine)
		} else if len(bytes.TrimSpace(line)) > 0 {
			s.handle(line)
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				s.logf("reading output: %v", err)
			}
			return
		}
	}
}

// handle reads one JSON-RPC message.
func (s *codexSession) handle(line []byte) {
	var m codexMsg
	if err := json.Unmarshal(line, &m); err != nil {
		s.logf("output: %s", s.short(string(line)))
		return
	}
	hasID := len(m.ID) > 0 && string(m.ID) != "null"
	switch {
	case hasID && m.Method != "":
		s.serverRequest(m)
	case hasID:
		var id int64
		if json.Unmarshal(m.ID, &id) != nil {
			return
		}
		s.mu.Lock()
		ch, ok := s.pending[id]
		delete(s.pending, id)
		s.mu.Unlock()
		if !ok {
			return
		}
		if m.Error != nil {
			ch <- codexResponse{Err: fmt.Errorf("%s (code %d)", s.short(m.Error.Message), m.Error.Code)}
		} else {
			ch <- codexResponse{Result: m.Result}
		}
	case m.Method != "":
		s.notification(m.Method, m.Params)
	}
}

// codexDecline is what the runner answers to each request for a person:
// the runner is headless, no one can approve, so it declines at once and
// the turn goes on (docs/RUNNER-CODEX.md).
var codexDecline = map[string]any{
	"item/commandExecution/requestApproval": map[string]any{"decision": "decline"},
	"item/fileChange/requestApproval":       map[string]any{"decision": "decline"},
	"item/permissions/requestApproval":      map[string]any{"permissions": map[string]any{}, "scope": "turn"},
	"item/tool/requestUserInput":            map[string]any{"answers": map[string]any{}},
	"mcpServer/elicitation/request":         map[string]any{"action": "decline", "content": nil, "_meta": nil},
	"execCommandApproval":                   map[string]any{"decision": map[string]any{"denied": map[string]any{"rejection": "svc runner: headless, no one can approve"}}},
	"applyPatchApproval":                    map[string]any{"decision": map[string]any{"denied": map[string]any{"rejection": "svc runner: headless, no one can approve"}}},
}

// serverRequest answers a request of Codex's. A request for a person
// blocks the member until it is answered; every other one gets a JSON-RPC
// error so Codex never waits.
func (s *codexSession) serverRequest(m codexMsg) {
	if len(m.ID) > 128 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), codexCallTimeout)
	defer cancel()
	if codexAsksPerson[m.Method] && s.approve != nil {
		// A person decides, which may take minutes: answered off the
		// reader, which must go on reading Codex's output meanwhile.
		go s.askPerson(m)
		return
	}
	answer, ok := codexDecline[m.Method]
	if !ok {
		s.logf("answered %s with an error: not supported by the runner", s.short(m.Method))
		_ = s.write(ctx, map[string]any{"id": m.ID, "error": map[string]any{"code": -32601, "message": "svc runner: method not supported"}})
		return
	}
	s.send(Event{Kind: Blocked})
	s.logf("%s declined: the runner is headless", m.Method)
	if err := s.write(ctx, map[string]any{"id": m.ID, "result": answer}); err != nil {
		s.logf("answering %s: %v", m.Method, err)
	}
	s.send(Event{Kind: Unblocked})
}

// codexAsksPerson are the approval requests a person decides through the
// runner: commands and file changes (and their legacy forms). The others
// (permission grants, user input, MCP elicitations) are still declined at
// once.
var codexAsksPerson = map[string]bool{
	"item/commandExecution/requestApproval": true,
	"item/fileChange/requestApproval":       true,
	"execCommandApproval":                   true,
	"applyPatchApproval":                    true,
}

// codexApprovalParams is the part of an approval request the adapter
// reads: v2 (threadId, turnId, itemId) and legacy (callId) fields.
type codexApprovalParams struct {
	ThreadID    string          `json:"threadId"`
	TurnID      string          `json:"turnId"`
	ItemID      string          `json:"itemId"`
	CallID      string          `json:"callId"`
	Command     json.RawMessage `json:"command"` // a string (v2) or a list (legacy)
	Cwd         string          `json:"cwd"`
	Reason      *string         `json:"reason"`
	GrantRoot   *string         `json:"grantRoot"`
	FileChanges json.RawMessage `json:"fileChanges"`
}

// codexApprovalRequest reads one of Codex's approval requests (hostile
// input: from the agent's side) into what a person is asked. started gives
// the input of a tool item that started (a file change's changes).
func codexApprovalRequest(method string, params json.RawMessage, started func(item string) json.RawMessage) (codexApprovalParams, relay.ApprovalRequest) {
	var p codexApprovalParams
	_ = json.Unmarshal(params, &p)
	req := relay.ApprovalRequest{Tool: "exec_command", ToolUseID: p.ItemID}
	in := map[string]any{}
	switch method {
	case "item/commandExecution/requestApproval", "execCommandApproval":
		in["command"], in["cwd"] = rawJSON(p.Command), p.Cwd
	case "item/fileChange/requestApproval":
		req.Tool = "apply_patch"
		if ch := started(p.ItemID); ch != nil {
			in["changes"] = ch
		}
	case "applyPatchApproval":
		req.Tool = "apply_patch"
		in["changes"] = rawJSON(p.FileChanges)
	}
	if req.ToolUseID == "" {
		req.ToolUseID = p.CallID
	}
	if len(req.ToolUseID) > 256 || !printableASCII(req.ToolUseID) {
		req.ToolUseID = ""
	}
	if p.Reason != nil && *p.Reason != "" {
		in["reason"] = *p.Reason
	}
	if p.GrantRoot != nil && *p.GrantRoot != "" {
		in["grantRoot"] = *p.GrantRoot
	}
	req.Input = rawJSON(in)
	return p, req
}

// askPerson has a person decide one of Codex's approval requests and
// answers it. A denial's reason reaches the model by steering the turn:
// app-server's decline carries none.
func (s *codexSession) askPerson(m codexMsg) {
	p, req := codexApprovalRequest(m.Method, m.Params, func(item string) json.RawMessage {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.inflight[item].ToolInput
	})
	s.logf("%s: a person is asked", m.Method)
	ans := s.approve(s.life, req)

	ctx, cancel := context.WithTimeout(context.Background(), codexCallTimeout)
	defer cancel()
	var result map[string]any
	legacy := m.Method == "execCommandApproval" || m.Method == "applyPatchApproval"
	switch {
	case ans.Allow && legacy:
		result = map[string]any{"decision": "approved"}
	case ans.Allow:
		result = map[string]any{"decision": "accept"}
	case legacy:
		result = map[string]any{"decision": map[string]any{"denied": map[string]any{"rejection": ans.Reason}}}
	default:
		result = map[string]any{"decision": "decline"}
	}
	if err := s.write(ctx, map[string]any{"id": m.ID, "result": result}); err != nil {
		s.logf("answering %s: %v", m.Method, err)
		return
	}
	if ans.Allow || legacy || ans.Reason == "" || p.TurnID == "" || len(p.TurnID) > 256 || len(p.ThreadID) > 256 {
		return
	}
	s.mu.Lock()
	tid := s.threadID
	s.mu.Unlock()
	if p.ThreadID != "" {
		tid = p.ThreadID
	}
	text := "[svc] " + req.Tool + " was not run: " + ans.Reason
	if _, err := s.call(ctx, "turn/steer", map[string]any{
		"threadId": tid, "expectedTurnId": p.TurnID,
		"input": []map[string]any{{"type": "text", "text": boundText(text, codexMaxTurn)}},
	}); err != nil {
		s.logf("the refusal's reason did not reach the turn: %v", err)
	}
}

// codexItem is the part of a thread item the adapter reads.
type codexItem struct {
	Type   string          `json:"type"`
	ID     string          `json:"id"`
	Text   string          `json:"text"`
	Server string          `json:"server"`
	Tool   string          `json:"tool"`
	Args   json.RawMessage `json:"arguments"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
	Status string          `json:"status"`
	// commandExecution
	Command  string          `json:"command"`
	Cwd      string          `json:"cwd"`
	Output   *string         `json:"aggregatedOutput"`
	ExitCode *int            `json:"exitCode"`
	Changes  json.RawMessage `json:"changes"`
	// dynamicToolCall
	ContentItems json.RawMessage `json:"contentItems"`
	Query        string          `json:"query"`
}

// toolEvent describes a tool item: its name, input and (when completed)
// result; ok is false for an item that is not a tool.
func (it codexItem) toolEvent(done bool) (Event, bool) {
	var name string
	var input, result any
	switch it.Type {
	case "mcpToolCall":
		name = "mcp__" + it.Server + "__" + it.Tool
		input = it.Args
		if done {
			if nonNull(it.Error) {
				result = map[string]any{"error": it.Error}
			} else {
				result = it.Result
			}
		}
	case "dynamicToolCall":
		name = it.Tool
		input = it.Args
		if done {
			result = it.ContentItems
		}
	case "commandExecution":
		name = "exec_command"
		input = map[string]any{"command": it.Command, "cwd": it.Cwd}
		if done {
			result = map[string]any{"status": it.Status, "exitCode": it.ExitCode, "output": it.Output}
		}
	case "fileChange":
		name = "apply_patch"
		input = it.Changes
		if done {
			result = map[string]any{"status": it.Status}
		}
	case "webSearch":
		name = "web_search"
		input = map[string]any{"query": it.Query}
	default:
		return Event{}, false
	}
	n, ok := toolName(name)
	if !ok {
		return Event{}, false
	}
	ev := Event{Kind: ToolStart, Tool: n, ToolInput: rawJSON(input), ToolUseID: it.ID}
	if done {
		ev.Kind = ToolEnd
		ev.ToolResult = rawJSON(result)
	}
	return ev, true
}

func nonNull(r json.RawMessage) bool {
	t := bytes.TrimSpace(r)
	return len(t) > 0 && string(t) != "null"
}

// rawJSON marshals v; null and empty values are left out.
func rawJSON(v any) json.RawMessage {
	if r, ok := v.(json.RawMessage); ok {
		if !nonNull(r) {
			return nil
		}
		return r
	}
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil || !nonNull(b) {
		return nil
	}
	return b
}

// notification maps one Codex notification to runner events. Turn and
// item notifications of another thread (a sub-agent's) are not the
// runner's turn and are ignored.
func (s *codexSession) notification(method string, params json.RawMessage) {
	if strings.HasPrefix(method, "turn/") || strings.HasPrefix(method, "item/") {
		var t struct {
			ThreadID string `json:"threadId"`
		}
		_ = json.Unmarshal(params, &t)
		s.mu.Lock()
		mine := s.threadID
		s.mu.Unlock()
		if t.ThreadID != "" && mine != "" && t.ThreadID != mine {
			return
		}
	}
	switch method {
	case "mcpServer/startupStatus/updated":
		var p struct {
			Name   string  `json:"name"`
			Status string  `json:"status"`
			Error  *string `json:"error"`
		}
		if json.Unmarshal(params, &p) != nil || p.Name != codexMCPServer {
			return
		}
		switch p.Status {
		case "failed", "cancelled":
			msg := ""
			if p.Error != nil {
				msg = ": " + s.short(*p.Error)
			}
			s.logf("the toolbox (MCP server %s) %s%s", codexMCPServer, p.Status, msg)
			fallthrough
		case "ready":
			s.tbOnce.Do(func() { close(s.toolbox) })
		}
	case "turn/started":
		s.send(Event{Kind: TurnStart})
	case "turn/completed":
		var p struct {
			Turn struct {
				Status string `json:"status"`
				Error  *struct {
					Message string `json:"message"`
				} `json:"error"`
			} `json:"turn"`
		}
		_ = json.Unmarshal(params, &p)
		if p.Turn.Status != "" && p.Turn.Status != "completed" {
			msg := ""
			if p.Turn.Error != nil {
				msg = ": " + s.short(p.Turn.Error.Message)
			}
			s.logf("turn %s%s", s.short(p.Turn.Status), msg)
		}
		// Tools Codex never completed (an interrupted turn) end with it.
		s.mu.Lock()
		var open []Event
		for id, ev := range s.inflight {
			open = append(open, Event{Kind: ToolEnd, Tool: ev.Tool, ToolInput: ev.ToolInput, ToolUseID: ev.ToolUseID})
			delete(s.inflight, id)
		}
		s.mu.Unlock()
		for _, ev := range open {
			s.send(ev)
		}
		// A turn Codex did not complete (interrupted, failed: its model
		// call was lost) is a failed end.
		s.send(Event{Kind: TurnEnd, Failed: p.Turn.Status != "" && p.Turn.Status != "completed"})
	case "thread/compacted":
		var p struct {
			TurnID string `json:"turnId"`
		}
		_ = json.Unmarshal(params, &p)
		s.compacted(p.TurnID)
	case "item/started", "item/completed":
		var p struct {
			Item   codexItem `json:"item"`
			TurnID string    `json:"turnId"`
		}
		if json.Unmarshal(params, &p) != nil {
			return
		}
		done := method == "item/completed"
		if p.Item.Type == "contextCompaction" && done {
			s.compacted(p.TurnID)
			return
		}
		if p.Item.Type == "agentMessage" && done {
			if t := strings.TrimSpace(p.Item.Text); t != "" {
				s.logf("%s", cut(redactFor(s.log)(t), codexLogText))
			}
			return
		}
		ev, ok := p.Item.toolEvent(done)
		if !ok || p.Item.ID == "" || len(p.Item.ID) > 256 {
			return
		}
		s.mu.Lock()
		if !done {
			if _, dup := s.inflight[p.Item.ID]; dup || len(s.inflight) >= codexMaxInflight {
				s.mu.Unlock()
				return
			}
			s.inflight[p.Item.ID] = ev
			s.mu.Unlock()
			s.logf("tool %s", s.short(ev.Tool))
			s.send(ev)
			return
		}
		_, started := s.inflight[p.Item.ID]
		delete(s.inflight, p.Item.ID)
		s.mu.Unlock()
		if started {
			s.send(ev)
		}
	case "error":
		var p struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
			WillRetry bool `json:"willRetry"`
		}
		if json.Unmarshal(params, &p) == nil && p.Error.Message != "" {
			s.logf("error: %s", s.short(p.Error.Message))
		}
	}
}

// compacted reports a compaction once per turn (Codex sends both the
// deprecated thread/compacted and a contextCompaction item).
func (s *codexSession) compacted(turnID string) {
	s.mu.Lock()
	dup := turnID != "" && turnID == s.compact
	s.compact = turnID
	s.mu.Unlock()
	if !dup {
		s.send(Event{Kind: SessionStart, Source: "compact"})
	}
}
