package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCommandHelp: every command's --help (or -h) answers on stdout with
// exit 0, naming the command's arguments and its flags, and runs nothing
// (hook reads no stdin, serve opens no port).
func TestCommandHelp(t *testing.T) {
	tests := []struct {
		args []string
		want []string // each in stdout
	}{
		{[]string{"serve", "--help"}, []string{"usage: svc serve", "-addr", "-config-path", "-db-path", "SVC_ADDR"}},
		{[]string{"serve", "-h"}, []string{"usage: svc serve", "-addr"}},
		{[]string{"serve", "--addr", "127.0.0.1:0", "--help"}, []string{"usage: svc serve", "-addr"}},
		{[]string{"check", "--help"}, []string{"usage: svc check", "-db-path", "-files"}},
		{[]string{"activity", "prune", "--help"}, []string{"usage: svc activity prune", "-older-than", "-yes"}},
		{[]string{"kek", "rotate", "--help"}, []string{"usage: svc kek", "-new-kek-file", "-generate"}},
		{[]string{"kek", "fingerprint", "--help"}, []string{"usage: svc kek", "-kek-file"}},
		{[]string{"kek", "reset", "--help"}, []string{"usage: svc kek", "-yes"}},
		{[]string{"files", "sweep", "--help"}, []string{"usage: svc files sweep", "-config-path", "-db-path"}},
		{[]string{"admin", "token", "--help"}, []string{"usage: svc admin token --member NAME", "-member", "-config-path", "-db-path", "SVC_DB_PATH"}},
		{[]string{"migrate", "--help"}, []string{"usage: svc migrate --from sqlite:PATH --to postgres://...", "-from-activity", "-to-activity", "-replace-target", "SVC_DB_URL"}},
		{[]string{"login", "--help"}, []string{"usage: svc login", "--label", "--url"}},
		{[]string{"whoami", "--help"}, []string{"usage: svc whoami", "--token", "--url"}},
		{[]string{"send", "--help"}, []string{"usage: svc send <to> <body>", "--title", "--level", "--attach"}},
		{[]string{"tail", "--help"}, []string{"usage: svc tail", "--from"}},
		{[]string{"approvals", "--help"}, []string{"usage: svc approvals", "--decided"}},
		{[]string{"approve", "--help"}, []string{"usage: svc approve <id>", "--url"}},
		{[]string{"deny", "--help"}, []string{"usage: svc deny <id>", "--url"}},
		{[]string{"runner", "--help"}, []string{"usage: svc runner", "--agent", "--no-capture", "-- <agent command...>"}},
		{[]string{"mcp", "--help"}, []string{"usage: svc mcp", "--approval-prompt"}},
		{[]string{"hook", "--help"}, []string{"usage: svc hook", "always exits 0"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tt.args, failingReader{t}, &stdout, &stderr)
			require.NoError(t, err)
			for _, w := range tt.want {
				require.Contains(t, stdout.String(), w)
			}
			require.NotContains(t, stdout.String(), "help requested")
			require.Empty(t, stderr.String())
		})
	}
}

// TestHelpAfterDashDashIsTheAgents: a --help after "--" belongs to the
// agent command, not to svc runner.
func TestHelpAfterDashDashIsTheAgents(t *testing.T) {
	require.False(t, wantsHelp([]string{"--agent", "plain", "--", "claude", "--help"}))
	require.True(t, wantsHelp([]string{"--agent", "plain", "--help", "--", "claude"}))
}

// failingReader fails the test when read: help must not consume stdin.
type failingReader struct{ t *testing.T }

func (r failingReader) Read([]byte) (int, error) {
	r.t.Error("stdin was read")
	return 0, context.Canceled
}
