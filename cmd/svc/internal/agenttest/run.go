package agenttest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"svc/cmd/svc/internal/npmcache"
)

// DefaultRunTimeout bounds a run whose RunOptions.Timeout is zero.
const DefaultRunTimeout = 60 * time.Second

// DummyAPIKey is the ANTHROPIC_API_KEY runs use: the stub ignores it.
const DummyAPIKey = "sk-ant-api03-agenttest-dummy-key"

// OTLP exporter protocols of Claude Code (OTEL_EXPORTER_OTLP_PROTOCOL).
const (
	ProtocolHTTPJSON     = "http/json"
	ProtocolHTTPProtobuf = "http/protobuf"
	ProtocolGRPC         = "grpc"
)

// RunOptions configure one headless run of Claude Code (see Run).
type RunOptions struct {
	// Prompt is the user prompt given to `claude -p` (it must not start
	// with "-"). Put a marker of your own in it if the stub must recognize
	// the turn (Model.ReplyOn). Empty: no prompt argument, e.g. with
	// Args {"--input-format", "stream-json"} and user lines on Stdin (each
	// line is a turn; Claude Code exits at end of input).
	Prompt string
	// ModelURL is the base URL of the Messages API (ANTHROPIC_BASE_URL),
	// usually Model.URL(). Required.
	ModelURL string

	// OTLPEndpoint turns on telemetry (logs/events) exported to it, as
	// OTEL_EXPORTER_OTLP_ENDPOINT: the HTTP exporters post to
	// <endpoint>/v1/logs (so give a broker's "<base>/otlp"); for grpc give
	// "http://host:port". Empty: telemetry off.
	OTLPEndpoint string
	// OTLPProtocol is ProtocolHTTPJSON (default), ProtocolHTTPProtobuf or
	// ProtocolGRPC.
	OTLPProtocol string
	// OTLPHeaders are sent with every export (OTEL_EXPORTER_OTLP_HEADERS,
	// written as k=v,k=v: no ',' in keys or values), e.g.
	// {"Authorization": "Bearer <token>"}.
	OTLPHeaders map[string]string
	// ExportInterval is OTEL_LOGS_EXPORT_INTERVAL; default 200 ms.
	ExportInterval time.Duration

	// AllowedTools is given as --allowedTools (e.g. "Read", "Bash(echo:*)",
	// "mcp__svc__*"); in -p mode a tool needing permission is refused
	// otherwise.
	AllowedTools []string
	// OutputFormat is --output-format: "json" (default), "stream-json"
	// (then --verbose is added, as Claude Code requires) or "text".
	OutputFormat string
	// Args are appended to the command line (e.g. --mcp-config f,
	// --input-format stream-json).
	Args []string
	// Env entries (KEY=VALUE) are added last and override the defaults.
	Env []string
	// Stdin feeds the process (e.g. stream-json user lines); nil: empty.
	Stdin io.Reader

	// Dir is the working directory; default a fresh t.TempDir().
	Dir string
	// Home is HOME (Claude Code's config and state); default a fresh
	// t.TempDir().
	Home string
	// Timeout bounds the run (default DefaultRunTimeout): past it the
	// process group is killed and the test fails.
	Timeout time.Duration
	// AllowFailure returns a non-zero exit's output instead of failing the
	// test.
	AllowFailure bool

	tmp string // TMPDIR of the run, removed with the test
}

// Run runs `claude -p <prompt> --output-format json` (see RunOptions) with a
// clean environment: a throwaway HOME and TMPDIR, the stub model, telemetry
// (logs only: OTEL_METRICS_EXPORTER=none unless Env says otherwise) to the
// given OTLP endpoint with user prompts, raw API bodies and tool details
// logged, no auto-update and no nonessential traffic. It waits for the
// process to exit (Claude Code flushes its telemetry on exit), kills the
// process group on timeout and after exit (no process is left behind), and
// fails the test on timeout or, unless AllowFailure, a non-zero exit.
func Run(t testing.TB, bin string, opts RunOptions) (stdout, stderr string) {
	t.Helper()
	if opts.ModelURL == "" {
		t.Fatal("agenttest.Run: RunOptions.ModelURL is required (the stub model's URL)")
	}
	for k, v := range opts.OTLPHeaders {
		if k == "" || strings.ContainsAny(k, ",=") || strings.Contains(v, ",") {
			t.Fatalf("agenttest.Run: OTLP header %q: %q cannot be written in OTEL_EXPORTER_OTLP_HEADERS", k, v)
		}
	}
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	if opts.Home == "" {
		opts.Home = t.TempDir()
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultRunTimeout
	}
	// Claude Code leaves directories (fswatch probes) in $TMPDIR/claude-<uid>.
	opts.tmp = t.TempDir()
	format := opts.OutputFormat
	if format == "" {
		format = "json"
	}
	args := []string{"-p"}
	if opts.Prompt != "" {
		args = append(args, opts.Prompt)
	}
	args = append(args, "--output-format", format)
	if format == "stream-json" && !contains(opts.Args, "--verbose") {
		args = append(args, "--verbose")
	}
	if len(opts.AllowedTools) > 0 {
		args = append(args, "--allowedTools", strings.Join(opts.AllowedTools, ","))
	}
	args = append(args, opts.Args...)

	ctx, cancel := context.WithTimeout(context.Background(), opts.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = opts.Dir
	cmd.Env = runEnv(opts)
	var outBuf, errBuf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &outBuf, &errBuf
	cmd.Stdin = opts.Stdin
	npmcache.KillGroupOnCancel(cmd)

	start := time.Now()
	err := cmd.Start()
	if err != nil {
		t.Fatalf("agenttest.Run: starting %s: %v", bin, err)
	}
	pgid := cmd.Process.Pid
	// A test that ends while the run goes on (Run called from a goroutine)
	// still kills the group; once the run is over there is nothing to kill
	// and the id is not ours any more.
	var mu sync.Mutex
	done := false
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	})
	err = cmd.Wait()
	// Tools may have left children (a Bash background job): the group goes.
	// (The group id cannot be reused while any member lives.)
	mu.Lock()
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	done = true
	mu.Unlock()
	elapsed := time.Since(start)
	stdout, stderr = outBuf.String(), errBuf.String()
	if ctx.Err() == context.DeadlineExceeded {
		t.Fatalf("agenttest.Run: claude did not exit within %s (killed)\nstdout:\n%s\nstderr:\n%s",
			opts.Timeout, npmcache.Tail(stdout, 8000), npmcache.Tail(stderr, 8000))
	}
	if err != nil && !opts.AllowFailure {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("agenttest.Run: %v", err)
		}
		t.Fatalf("agenttest.Run: claude failed after %s: %v\nstdout:\n%s\nstderr:\n%s",
			elapsed.Round(time.Millisecond), err, npmcache.Tail(stdout, 8000), npmcache.Tail(stderr, 8000))
	}
	t.Logf("agenttest.Run: claude exited after %s", elapsed.Round(time.Millisecond))
	return stdout, stderr
}

// runEnv is the process environment: nothing inherited but PATH and the
// locale, so the caller's own Claude Code or OpenTelemetry settings (or a
// real API key) never leak into a test run.
func runEnv(opts RunOptions) []string {
	env := map[string]string{
		"PATH":                    os.Getenv("PATH"),
		"HOME":                    opts.Home,
		"USER":                    "agenttest",
		"TMPDIR":                  opts.tmp,
		"CLAUDE_CODE_TMPDIR":      opts.tmp,
		"LANG":                    "C.UTF-8",
		"TERM":                    "dumb",
		"NO_COLOR":                "1",
		"XDG_CONFIG_HOME":         filepath.Join(opts.Home, ".config"),
		"XDG_CACHE_HOME":          filepath.Join(opts.Home, ".cache"),
		"XDG_DATA_HOME":           filepath.Join(opts.Home, ".local", "share"),
		"XDG_STATE_HOME":          filepath.Join(opts.Home, ".local", "state"),
		"CLAUDE_CONFIG_DIR":       filepath.Join(opts.Home, ".claude"),
		"ANTHROPIC_BASE_URL":      opts.ModelURL,
		"ANTHROPIC_API_KEY":       DummyAPIKey,
		"DISABLE_AUTOUPDATER":     "1",
		"DISABLE_ERROR_REPORTING": "1",
		"DISABLE_BUG_COMMAND":     "1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
	}
	if opts.OTLPEndpoint != "" {
		proto := opts.OTLPProtocol
		if proto == "" {
			proto = ProtocolHTTPJSON
		}
		interval := opts.ExportInterval
		if interval <= 0 {
			interval = 200 * time.Millisecond
		}
		env["CLAUDE_CODE_ENABLE_TELEMETRY"] = "1"
		env["OTEL_LOGS_EXPORTER"] = "otlp"
		env["OTEL_METRICS_EXPORTER"] = "none"
		env["OTEL_EXPORTER_OTLP_PROTOCOL"] = proto
		env["OTEL_EXPORTER_OTLP_ENDPOINT"] = opts.OTLPEndpoint
		env["OTEL_LOGS_EXPORT_INTERVAL"] = strconv.Itoa(int(interval / time.Millisecond))
		env["OTEL_LOG_USER_PROMPTS"] = "1"
		env["OTEL_LOG_RAW_API_BODIES"] = "1"
		env["OTEL_LOG_TOOL_DETAILS"] = "1"
		if len(opts.OTLPHeaders) > 0 {
			var hs []string
			for k, v := range opts.OTLPHeaders {
				hs = append(hs, k+"="+v)
			}
			sort.Strings(hs)
			env["OTEL_EXPORTER_OTLP_HEADERS"] = strings.Join(hs, ",")
		}
	}
	for _, kv := range opts.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// Result is the final JSON object of `--output-format json` (the last
// "result" line of stream-json).
type Result struct {
	Type         string  `json:"type"`
	Subtype      string  `json:"subtype"`
	IsError      bool    `json:"is_error"`
	Result       string  `json:"result"`
	SessionID    string  `json:"session_id"`
	NumTurns     int     `json:"num_turns"`
	DurationMS   int     `json:"duration_ms"`
	TotalCostUSD float64 `json:"total_cost_usd"`
}

// ParseResult decodes the result object from a run's stdout (json or
// stream-json output), failing the test if there is none.
func ParseResult(t testing.TB, stdout string) Result {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		var r Result
		if json.Unmarshal([]byte(lines[i]), &r) == nil && r.Type == "result" {
			return r
		}
	}
	t.Fatalf("agenttest: no result object in claude's output:\n%s", npmcache.Tail(stdout, 8000))
	return Result{}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
