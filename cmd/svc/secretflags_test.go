package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A URL holding a password on the command line is readable by every user
// of the machine (ps): the broker says so once, naming the flag and the
// environment variable to use, never the password. The same URL in the
// environment variable, or without a password, is not warned about.
func TestSecretOnCommandLineWarns(t *testing.T) {
	const pw = "s3cr3t-pw"
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want []string // "" entries: no warning
	}{
		{"db-url with a password", nil, []string{"--db-url", "postgres://svc:" + pw + "@db.example/team"}, []string{"--db-url", "SVC_DB_URL", "PGPASSFILE"}},
		{"db-url with a password parameter", nil, []string{"--db-url", "postgres://svc@db.example/team?password=" + pw}, []string{"--db-url", "SVC_DB_URL"}},
		{"activity-db-url", nil, []string{"--db-url", "postgres://svc@db.example/team", "--activity-db-url", "postgres://svc:" + pw + "@act.example/team"}, []string{"--activity-db-url", "SVC_ACTIVITY_DB_URL"}},
		{"both, one warning", nil, []string{"--db-url", "postgres://svc:" + pw + "@db.example/team", "--activity-db-url", "postgres://svc:" + pw + "@act.example/team"}, []string{"--activity-db-url and --db-url hold passwords", "SVC_ACTIVITY_DB_URL and SVC_DB_URL"}},
		{"nats-url with a password", nil, []string{"--db-url", "postgres://svc@db.example/team", "--nats-url", "nats://svc:" + pw + "@127.0.0.1:4222"}, []string{"--nats-url", "SVC_NATS_URL"}},
		{"nats-url with a token", nil, []string{"--db-url", "postgres://svc@db.example/team", "--nats-url", "nats://127.0.0.1:4222,nats://" + pw + "@127.0.0.2:4222"}, []string{"--nats-url", "SVC_NATS_URL"}},
		{"no password", nil, []string{"--db-url", "postgres://svc@db.example/team", "--nats-url", "nats://127.0.0.1:4222"}, nil},
		{"in the environment", map[string]string{"SVC_DB_URL": "postgres://svc:" + pw + "@db.example/team", "SVC_NATS_URL": "nats://svc:" + pw + "@127.0.0.1:4222"}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []string{"SVC_DB_URL", "SVC_ACTIVITY_DB_URL", "SVC_NATS_URL", "SVC_DB_PATH"} {
				t.Setenv(k, tt.env[k])
			}
			var stderr bytes.Buffer
			_, err := parseServeConfig(tt.args, &stderr)
			require.NoError(t, err)
			out := stderr.String()
			require.NotContains(t, out, pw)
			if tt.want == nil {
				require.Empty(t, out)
				return
			}
			require.Equal(t, 1, strings.Count(out, "warning"), out)
			require.Contains(t, out, "ps")
			for _, w := range tt.want {
				require.Contains(t, out, w)
			}
		})
	}
}

// The maintenance commands and svc migrate warn the same way, before
// they do anything.
func TestSecretOnCommandLineWarnsMaintenance(t *testing.T) {
	const pw = "s3cr3t-pw"
	t.Setenv("SVC_DB_URL", "")
	t.Setenv("SVC_ACTIVITY_DB_URL", "")
	missing := t.TempDir() + "/missing.db"
	for _, args := range [][]string{
		{"migrate", "--from", "sqlite:" + missing, "--to", "postgres://svc:" + pw + "@127.0.0.1:1/team"},
		{"migrate", "--from", "sqlite:" + missing, "--to", "postgres://svc@127.0.0.1:1/team", "--to-activity", "postgres://svc:" + pw + "@127.0.0.1:1/act"},
		{"activity", "prune", "--older-than", "1d", "--db-url", "postgres://svc:" + pw + "@127.0.0.1:1/team"},
	} {
		t.Run(strings.Join(args[:2], " "), func(t *testing.T) {
			out, err := runCmd(t, args...)
			require.Error(t, err) // the source or the database is not there
			require.NotContains(t, out, pw)
			require.Equal(t, 1, strings.Count(out, "svc: warning:"), out)
			require.Contains(t, out, "holds a password")
			require.Contains(t, out, "SVC_")
		})
	}
}

// libpq's key=value form is refused (--db-url takes a URL), but a URL
// parser reads it as a path, with no password in sight: a password=
// setting in it is warned about first, like a URL's, before the refusal.
func TestSecretOnCommandLineWarnsKeyValue(t *testing.T) {
	const pw = "s3cr3t-pw"
	tests := []struct {
		name string
		args []string
		warn string // "": no warning
	}{
		{"password", []string{"--db-url", "host=db.example dbname=team password=" + pw}, "--db-url holds a password"},
		{"first, any case, spaced", []string{"--db-url", "PASSWORD = " + pw + " host=db.example"}, "--db-url holds a password"},
		{"quoted", []string{"--db-url", "host=db.example password='" + pw + " x'"}, "--db-url holds a password"},
		{"sslpassword", []string{"--db-url", "host=db.example sslpassword=" + pw}, "--db-url holds a password"},
		{"activity", []string{"--db-url", "postgres://svc@db.example/team", "--activity-db-url", "host=act.example password=" + pw}, "--activity-db-url holds a password"},
		{"no password", []string{"--db-url", "host=db.example dbname=team user=svc"}, ""},
		{"a password file is no password", []string{"--db-url", "host=db.example passfile=/home/svc/.pgpass"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []string{"SVC_DB_URL", "SVC_ACTIVITY_DB_URL", "SVC_NATS_URL", "SVC_DB_PATH"} {
				t.Setenv(k, "")
			}
			var stderr bytes.Buffer
			_, err := parseServeConfig(tt.args, &stderr)
			require.Error(t, err, "the key=value form is refused")
			require.Contains(t, err.Error(), "must be a postgres://user@host/database URL")
			out := stderr.String()
			require.NotContains(t, out, pw)
			require.NotContains(t, err.Error(), pw)
			if tt.warn == "" {
				require.Empty(t, out)
				return
			}
			require.Equal(t, 1, strings.Count(out, "svc: warning:"), out)
			require.Contains(t, out, tt.warn)
		})
	}
}
