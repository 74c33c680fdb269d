package toolbox

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"svc/cmd/internal/client"
	"svc/cmd/internal/relay"
	apiv1 "svc/gen/svc/v1"
)

// UsageError is a command line `svc mcp` cannot run: exit code 2.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// Env is what `svc mcp` sees of its process.
type Env struct {
	Stdin   io.Reader
	Stdout  io.Writer
	Stderr  io.Writer
	Getenv  func(string) string
	Version string
}

// Run is `svc mcp [--url U] [--token T]`: the toolbox served over stdin and
// stdout until the client closes stdin or ctx ends. With --approval-prompt
// it serves Claude Code's permission-prompt tool alone (ServeApprovalPrompt). Diagnostics go to
// stderr (stdout carries the protocol only).
func Run(ctx context.Context, args []string, env Env) error {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	flagURL := fs.String("url", "", "broker URL (default $SVC_URL, else "+client.DefaultURL+")")
	flagToken := fs.String("token", "", "bearer token (default $SVC_TOKEN, else the token cache)")
	prompt := fs.Bool("approval-prompt", false, "serve only the permission-prompt tool, asking $"+relay.Env)
	if err := fs.Parse(args); err != nil {
		return &UsageError{Msg: "usage: svc mcp [--url U] [--token T] [--approval-prompt]: " + err.Error()}
	}
	if fs.NArg() > 0 {
		return &UsageError{Msg: "usage: svc mcp [--url U] [--token T] [--approval-prompt]: no arguments"}
	}
	if *prompt {
		// It asks the runner, never the broker: no credential is read.
		return ServeApprovalPrompt(ctx, env.Stdin, env.Stdout, env.Getenv(relay.Env), env.Version)
	}
	u, err := client.ResolveURL(*flagURL, env.Getenv)
	if err != nil {
		return &UsageError{Msg: err.Error()}
	}
	tok, err := resolveToken(ctx, *flagToken, env.Getenv, u)
	if err != nil {
		return err
	}
	cl, err := client.New(u, tok)
	if err != nil {
		return err
	}
	defer cl.Close()
	log := slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	tb, err := New(ctx, cl, Options{URL: u, Logger: log, Version: env.Version})
	if err != nil {
		var te toolError
		var be *brokerError
		if errors.As(err, &be) && be.status == 401 {
			return errors.New(client.Describe(&client.APIError{Status: 401, Code: "unauthenticated"}, u))
		}
		if errors.As(err, &te) {
			return te // already CLIENT.md's one line
		}
		if errors.As(err, &be) {
			return err
		}
		return errors.New(client.Describe(err, u))
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go tb.RunRecomputer(ctx)
	if path := env.Getenv(relay.Env); path != "" {
		// Under the runner: its stream already counts as the member's
		// connection; a second one would inflate presence.
		go tb.WatchRelay(ctx, path)
	} else {
		go tb.WatchStream(ctx, cl.Broker())
	}
	t := &mcp.IOTransport{Reader: io.NopCloser(&drainReader{r: env.Stdin, tb: tb}), Writer: nopWriteCloser{env.Stdout}}
	if err := tb.Server().Run(ctx, t); err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("mcp: %w", err)
	}
	return nil
}

// noDump is relay.NoDump (a test counts the calls instead).
var noDump = relay.NoDump

// redeemTimeout bounds asking the runner for the credential.
const redeemTimeout = 10 * time.Second

// resolveToken is the client's credential order, except under a runner
// that gave the toolbox a ticket and no token: then the credential comes
// from the runner, once, over its socket (docs/RUNNER.md, "No credential
// within the agent's reach"). The process is made undumpable first, so
// the agent, which runs as the same user, cannot read the bearer out of
// its memory.
func resolveToken(ctx context.Context, flagToken string, getenv func(string) string, u string) (string, error) {
	ticket, socket := getenv(relay.TicketEnv), getenv(relay.Env)
	if flagToken != "" || getenv(client.EnvToken) != "" || ticket == "" || socket == "" {
		tok, _, err := client.ResolveToken(flagToken, getenv, u)
		return tok, err
	}
	if err := noDump(); err != nil {
		return "", fmt.Errorf("svc mcp: cannot keep the credential private (prctl: %v)", err)
	}
	rctx, cancel := context.WithTimeout(ctx, redeemTimeout)
	defer cancel()
	tok, err := relay.Redeem(rctx, socket, ticket)
	if errors.Is(err, relay.ErrTicketRefused) {
		return "", errors.New("svc mcp: the runner refused this toolbox's ticket: a ticket works once, for the toolbox the runner's agent starts first; restart the runner")
	}
	if err != nil {
		return "", fmt.Errorf("svc mcp: no credential from the runner: %v", err)
	}
	return tok, nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// Reconnect backoff of the event watchers.
const (
	backoffMin = 500 * time.Millisecond
	backoffMax = 15 * time.Second
)

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// WatchRelay follows the runner's relayed registry events until ctx ends,
// reconnecting with backoff if the socket goes away.
func (t *Toolbox) WatchRelay(ctx context.Context, path string) {
	wait := backoffMin
	for ctx.Err() == nil {
		ch, err := relay.Subscribe(ctx, path)
		if err != nil {
			t.log.Warn("runner relay unreachable", "error", err.Error())
			if !sleep(ctx, wait) {
				return
			}
			wait = min(wait*2, backoffMax)
			continue
		}
		wait = backoffMin
		// Events may have been missed before this subscription opened:
		// after a drop, and at start between the first tool set and now.
		t.Notify()
		for ev := range ch {
			if IsRegistryKind(ev.Kind) {
				t.Notify()
			}
		}
	}
}

// WatchStream follows the member's own message stream (standalone, with no
// runner) and recomputes after registry events. It resumes after the last
// message seen, reconnecting with backoff.
func (t *Toolbox) WatchStream(ctx context.Context, b apiv1.BrokerClient) {
	wait := backoffMin
	last := ""
	for ctx.Err() == nil {
		opened, err := t.followStream(ctx, b, &last)
		if ctx.Err() != nil {
			return
		}
		if opened {
			wait = backoffMin
		}
		if err != nil {
			t.log.Warn("message stream ended", "error", err.Error())
		}
		if !sleep(ctx, wait) {
			return
		}
		wait = min(wait*2, backoffMax)
	}
}

func (t *Toolbox) followStream(ctx context.Context, b apiv1.BrokerClient, last *string) (bool, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := b.Subscribe(ctx, &apiv1.SubscribeRequest{Name: t.Self(), LastId: *last})
	if err != nil {
		return false, err
	}
	opened := false
	for {
		resp, err := st.Recv()
		if err != nil {
			return opened, err
		}
		if resp.GetReady() != nil {
			if !opened {
				// Reconnected, or first attached: a change between the
				// first tool set and now is not replayed (no last id yet),
				// and a recompute costs little.
				t.Notify()
			}
			opened = true
			continue
		}
		m := resp.GetMessage()
		if m == nil {
			continue
		}
		opened = true
		if m.GetId() != "" {
			*last = m.GetId()
		}
		if IsRegistryKind(m.GetData().GetFields()["kind"].GetStringValue()) {
			t.Notify()
		}
	}
}

// drainReader is stdin that, at its end, waits (bounded) for the requests
// already read to be answered: a client that writes its requests and
// closes stdin (a pipe from a script) still gets every answer, where the
// SDK would close the connection at once.
type drainReader struct {
	r  io.Reader
	tb *Toolbox
}

// drainGrace lets a request read just before the end reach its handler.
const drainGrace = 100 * time.Millisecond

func (d *drainReader) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	if errors.Is(err, io.EOF) {
		time.Sleep(drainGrace)
		deadline := time.Now().Add(callTimeout)
		for d.tb.inflight.Load() > 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	return n, err
}
