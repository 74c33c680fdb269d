// Command svc is the team broker: `svc serve` runs it; `svc activity prune`
// applies activity retention; `svc kek` and `svc files sweep` are the
// maintenance a stopped broker needs.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"svc/cmd/internal/cli"
	"svc/cmd/internal/runner"
	"svc/cmd/internal/toolbox"
)

// version is the semver reported by /healthz; `make build` sets it.
var version = "0.1.0-dev"

// exitError carries a process exit code.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func main() {
	// Every file svc writes is private: 0600 files in 0700 directories.
	syscall.Umask(0o077)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "svc:", err)
		var ee *exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		os.Exit(1)
	}
}

const usage = `usage: svc <command> [flags]

commands:
  serve                                      run the broker
  activity prune --older-than <dur> [--yes]  delete activity older than dur
  kek fingerprint|rotate|reset [flags]       the key-encryption key: name it, change it,
                                             or give up what a lost one sealed (svc kek help)
  files sweep --config-path P --db-path D [--yes]
                                             delete files no file entry references
  check [--db-path P] [--files=false]        check the stores and stored files in full
  admin token --member NAME [--config-path P] --db-path D
                                             mint a new token for a members.manage holder
                                             (a lost admin token; the broker stopped)
  migrate --from sqlite:PATH --to postgres://... [--replace-target]
                                             copy a stopped team's stores into PostgreSQL,
                                             verified per table (docs/OPERATIONS.md)
  version                                    print the version
  login [--url U] [--label L]                sign in with the device flow; saves the token
  whoami                                     print your member, role and permissions
  send <to> <body> [--title T] [--level L] [--attach path]...
                                             send to a member, #channel or general (-)
  tail [--from ID]                           follow your messages, one line each
  approvals [--decided | --all]              approvals you may decide and your own requests
  approve <id>                               let the agent that asked use the tool
  deny <id> [reason...]                      refuse it; the agent reads the reason
  runner [--agent A] [--no-capture] [--state-dir D] -- <agent command...>
                                             run an agent as your member: wake it per message
  hook                                       (run by an agent's hooks) report to its runner
  mcp [--url U] [--token T]                  the agent toolbox as an MCP server on stdio
` + clientNote + "\n"

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 1 && wantsHelp(args[1:]) {
		return commandHelp(ctx, args, stdin, stdout)
	}
	return dispatch(ctx, args, stdin, stdout, stderr)
}

// wantsHelp reports whether a command's arguments ask for its help: -h,
// -help or --help before any "--" (after it, they are the agent's).
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

// commandHelp answers `svc <command> ... --help` on stdout with exit 0: the
// command's lines of the usage, then what the command's own flag parsing
// says (its flags and their defaults, or its usage line). The command is
// run only as far as its flag parsing, which stops at the help flag; a
// command with no flag set (hook) is not run at all.
func commandHelp(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	known := false
	for line := range strings.Lines(usage) {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(line, "  ") && line[2] != ' ' && f[0] == args[0] {
			if !known {
				fmt.Fprint(stdout, "usage: svc ")
			} else {
				fmt.Fprint(stdout, "       svc ")
			}
			fmt.Fprintln(stdout, strings.TrimSpace(line))
			known = true
		}
	}
	if !known {
		return dispatch(ctx, args, stdin, stdout, io.Discard)
	}
	if args[0] == "hook" {
		fmt.Fprintln(stdout, "\nRun by an agent's hooks with the hook's JSON on stdin; it reports to the agent's runner and always exits 0. It takes no arguments or flags.")
		return nil
	}
	var flags strings.Builder
	err := dispatch(ctx, append([]string{args[0]}, helpArgs(args[1:])...), strings.NewReader(""), io.Discard, &flags)
	if flags.Len() > 0 {
		fmt.Fprintf(stdout, "\nflags:\n%s", flags.String())
	}
	var cu *cli.UsageError
	var tu *toolbox.UsageError
	switch {
	case errors.As(err, &cu):
		fmt.Fprintf(stdout, "\n%s\n", strings.TrimSuffix(cu.Error(), ": "+flag.ErrHelp.Error()))
	case errors.As(err, &tu):
		fmt.Fprintf(stdout, "\n%s\n", strings.TrimSuffix(tu.Error(), ": "+flag.ErrHelp.Error()))
	}
	switch args[0] {
	case "login", "whoami", "send", "tail", "approve", "deny", "approvals", "runner", "mcp":
		fmt.Fprintln(stdout, clientNote)
	}
	return nil
}

// helpArgs keeps a command's subcommand words (kek rotate, activity prune)
// and asks its flag parsing for help.
func helpArgs(args []string) []string {
	var out []string
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			break
		}
		out = append(out, a)
	}
	return append(out, "-h")
}

// clientNote is the usage's closing note on where client commands find the
// broker and token.
const clientNote = `
client commands take --url (else SVC_URL, else http://127.0.0.1:7433) and,
except login, --token (else SVC_TOKEN, else the token cache entry of the URL).`

// dispatch runs the command args name.
func dispatch(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return &exitError{code: 2, err: errors.New("no command")}
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stdout, stderr)
	case "check":
		return check(ctx, args[1:], stdout, stderr)
	case "activity":
		if len(args) > 1 && args[1] == "prune" {
			return prune(ctx, args[2:], stdin, stdout, stderr)
		}
	case "kek":
		return kekCommand(ctx, args[1:], stdin, stdout, stderr)
	case "admin":
		return adminCommand(ctx, args[1:], stdout, stderr)
	case "files":
		return filesCommand(ctx, args[1:], stdin, stdout, stderr)
	case "migrate":
		return migrateCommand(ctx, args[1:], stdout, stderr)
	case "login", "whoami", "send", "tail", "approve", "deny", "approvals":
		return clientCommand(ctx, args[0], args[1:], stdout, stderr)
	case "runner":
		return runnerCommand(ctx, args[1:], stdout, stderr)
	case "hook":
		// A hook must never stall or fail the agent: always exit 0.
		runner.Hook(ctx, stdin, stderr, os.Getenv)
		return nil
	case "mcp":
		err := toolbox.Run(ctx, args[1:], toolbox.Env{Stdin: stdin, Stdout: stdout, Stderr: stderr, Getenv: os.Getenv, Version: version})
		var ue *toolbox.UsageError
		if errors.As(err, &ue) {
			return &exitError{code: 2, err: err}
		}
		return err
	case "version", "--version":
		fmt.Fprintln(stdout, version)
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return &exitError{code: 2, err: fmt.Errorf("unknown command %q", args[0])}
}

// clientCommand runs one of the client commands of cmd/internal/cli; a
// usage error exits 2, any other failure 1.
func clientCommand(ctx context.Context, name string, args []string, stdout, stderr io.Writer) error {
	cmds := map[string]func(context.Context, []string, cli.Env) error{
		"login": cli.Login, "whoami": cli.Whoami, "send": cli.Send, "tail": cli.Tail,
		"approve": cli.Approve, "deny": cli.Deny, "approvals": cli.Approvals,
	}
	err := cmds[name](ctx, args, cli.Env{Stdout: stdout, Stderr: stderr, Getenv: os.Getenv})
	var ue *cli.UsageError
	if errors.As(err, &ue) {
		return &exitError{code: 2, err: err}
	}
	return err
}

// runnerCommand runs `svc runner`: a usage error exits 2, the agent's own
// non-zero exit code is the runner's, a signal exits 0.
func runnerCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	// A closed terminal stops the runner cleanly too: its private files
	// (the agent's MCP config holds the token) go with it.
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGHUP)
	defer stop()
	err := runner.Main(ctx, args, stdout, stderr, os.Getenv, os.Environ())
	var ue *cli.UsageError
	if errors.As(err, &ue) {
		return &exitError{code: 2, err: err}
	}
	var ae *runner.AgentExit
	if errors.As(err, &ae) {
		return &exitError{code: ae.Code, err: err}
	}
	return err
}
