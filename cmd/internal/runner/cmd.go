package runner

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"svc/cmd/internal/cli"
	"svc/cmd/internal/client"
	"svc/cmd/internal/relay"
)

// Usage is the runner's usage line.
const Usage = "usage: svc runner [--url U] [--token T] [--agent claude|codex|plain] [--no-capture] [--turn-quiet DUR] [--state-dir D] -- <agent command...>"

// Main runs `svc runner` with its arguments (after the command name). It
// returns nil (a signal stopped it, or the agent exited 0), a
// *cli.UsageError, an *AgentExit carrying the agent's exit code, or
// another error whose text is one line.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string, environ []string) error {
	fs := flag.NewFlagSet("runner", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	flagURL := fs.String("url", "", "broker URL (default $SVC_URL, else "+client.DefaultURL+")")
	flagToken := fs.String("token", "", "bearer token (default $SVC_TOKEN, else the token cache)")
	agent := fs.String("agent", "", "agent adapter: claude, codex or plain (default: by the command's name)")
	noCapture := fs.Bool("no-capture", false, "report no activity: no live state, no telemetry, no tool results")
	stateDir := fs.String("state-dir", "", "where a runner of an earlier version kept its last message id, read once (default $XDG_STATE_HOME/svc/runner)")
	turnQuiet := fs.Duration("turn-quiet", DefaultTurnQuiet, "report a turn that shows nothing for this long")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return &cli.UsageError{Msg: Usage}
		}
		return &cli.UsageError{Msg: fmt.Sprintf("runner: %v\n%s", err, Usage)}
	}
	argv := fs.Args()
	if len(argv) == 0 || argv[0] == "" {
		return &cli.UsageError{Msg: "runner: no agent command\n" + Usage}
	}
	u, err := client.ResolveURL(*flagURL, getenv)
	if err != nil {
		return &cli.UsageError{Msg: err.Error()}
	}
	tok, src, err := client.ResolveToken(*flagToken, getenv, u)
	if err != nil {
		return err
	}
	if src == client.SourceFlag {
		// The runner keeps the token out of its agent's reach, but not out
		// of its own argv (docs/RUNNER.md, "No credential within the
		// agent's reach").
		fmt.Fprintln(stderr, "svc runner: --token puts the token on the runner's command line, which every process on this machine can read (/proc/<pid>/cmdline); prefer SVC_TOKEN or `svc login`")
	}
	// Only an earlier runner's state file is read there (once): with no
	// directory to look in, there is none to read.
	dir, err := StateDir(*stateDir, getenv)
	if err != nil {
		dir = ""
	}
	if _, err := pickAdapter(*agent, argv); err != nil {
		return &cli.UsageError{Msg: "runner: " + err.Error()}
	}
	if *turnQuiet < time.Second {
		return &cli.UsageError{Msg: "runner: --turn-quiet must be at least 1s\n" + Usage}
	}
	return Run(ctx, Options{
		URL: u, Token: tok, Agent: *agent, Capture: !*noCapture, StateDir: dir, TurnQuiet: *turnQuiet, Argv: argv,
		Stdout: stdout, Stderr: stderr, Environ: environ,
	})
}

// maxHookInput bounds the hook input `svc hook` reads: past relay.MaxLine
// it relays only the event (stripHook), so it reads enough to parse one.
const maxHookInput = 64 << 20

// hookTimeout bounds one `svc hook`: a hook must never stall the agent.
const hookTimeout = 5 * time.Second

// Hook runs `svc hook`: it reads the hook's JSON input on stdin (at most
// maxHookInput bytes) and reports it to the runner named by
// $SVC_RUNNER_SOCKET, waiting at most 5 s; an input too big to relay
// whole is relayed as its event alone (stripHook). It never fails the agent: every
// problem goes to stderr and the exit code is always 0.
func Hook(ctx context.Context, stdin io.Reader, stderr io.Writer, getenv func(string) string) {
	path := getenv(relay.Env)
	if path == "" {
		fmt.Fprintf(stderr, "svc hook: %s is not set (not running under svc runner); ignored\n", relay.Env)
		return
	}
	data, err := io.ReadAll(io.LimitReader(stdin, maxHookInput+1))
	if err != nil {
		fmt.Fprintf(stderr, "svc hook: reading the hook input: %v\n", err)
		return
	}
	if len(data) > relay.MaxLine-1024 {
		// Too big to relay whole (a huge tool result): the event still
		// counts for the activity state, so relay it without its bulk.
		data = stripHook(data)
		if data == nil {
			fmt.Fprintf(stderr, "svc hook: hook input over %d bytes and not a whole hook object; ignored\n", relay.MaxLine)
			return
		}
		fmt.Fprintln(stderr, "svc hook: hook input too big; reported without its tool input and result")
	}
	ctx, cancel := context.WithTimeout(ctx, hookTimeout)
	defer cancel()
	if err := relay.SendHook(ctx, path, data); err != nil {
		fmt.Fprintf(stderr, "svc hook: %v\n", err)
	}
}

// stripHook keeps the small fields of an oversized hook payload: the event,
// the tool's name and id, the notification type and the session source.
// nil when data is not a JSON object.
func stripHook(data []byte) []byte {
	var p map[string]json.RawMessage
	if json.Unmarshal(data, &p) != nil {
		return nil
	}
	keep := map[string]json.RawMessage{}
	for _, k := range []string{"hook_event_name", "tool_name", "tool_use_id", "notification_type", "source", "session_id"} {
		if v, ok := p[k]; ok && len(v) <= 1024 {
			keep[k] = v
		}
	}
	out, _ := json.Marshal(keep)
	return out
}
