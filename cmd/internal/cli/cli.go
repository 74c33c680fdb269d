// Package cli implements svc's client commands: login, whoami, send,
// tail, approvals, approve and deny. Each takes its arguments (after the
// command name) and an Env, and returns nil, a *UsageError (exit 2) or
// another error (exit 1) whose text is one line.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"svc/cmd/internal/client"
)

// Env is what a command sees of its process.
type Env struct {
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
	// Now and Sleep are the clock; nil means the real one.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
}

func (e Env) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

func (e Env) sleep(ctx context.Context, d time.Duration) error {
	if e.Sleep != nil {
		return e.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// UsageError is a command line the command cannot run: exit code 2.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

func usagef(format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...)}
}

// callTimeout bounds one unary call of a command.
const callTimeout = 30 * time.Second

// common are the flags of every client command.
type common struct {
	url   string
	token string
}

func (c *common) register(fs *flag.FlagSet, withToken bool) {
	fs.StringVar(&c.url, "url", "", "broker URL (default $SVC_URL, else "+client.DefaultURL+")")
	if withToken {
		fs.StringVar(&c.token, "token", "", "bearer token (default $SVC_TOKEN, else the token cache)")
	}
}

// parse parses flags that may come before, between or after positional
// arguments, and returns the positionals.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, usagef("usage: svc %s %s", fs.Name(), flagNames(fs))
			}
			return nil, usagef("%s: %v", fs.Name(), err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func flagNames(fs *flag.FlagSet) string {
	var b strings.Builder
	fs.VisitAll(func(f *flag.Flag) { fmt.Fprintf(&b, "[--%s] ", f.Name) })
	return strings.TrimSpace(b.String())
}

// connect resolves the URL and token and returns a client. needToken false
// allows an empty token (login).
func connect(c common, env Env, needToken bool) (*client.Client, error) {
	u, err := client.ResolveURL(c.url, env.Getenv)
	if err != nil {
		return nil, usagef("%v", err)
	}
	tok := ""
	if needToken {
		if tok, _, err = client.ResolveToken(c.token, env.Getenv, u); err != nil {
			return nil, err
		}
	}
	return client.New(u, tok)
}

// dial connects with the caller's credential and checks that a broker
// answers, so a down broker or a wrong URL gets its own one-line error
// before any call.
func dial(ctx context.Context, c common, env Env) (*client.Client, error) {
	cl, err := connect(c, env, true)
	if err != nil {
		return nil, err
	}
	if err := ping(ctx, cl); err != nil {
		cl.Close()
		return nil, err
	}
	return cl, nil
}

// fail turns a call error into the command's one-line error.
func fail(cl *client.Client, err error) error {
	return errors.New(client.Describe(err, cl.URL()))
}

// ping checks the URL is an svc broker before a gRPC call, so a wrong URL
// or a down broker gets its own clear line rather than a transport error.
func ping(ctx context.Context, cl *client.Client) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if _, err := cl.Ping(ctx); err != nil {
		return fail(cl, err)
	}
	return nil
}
