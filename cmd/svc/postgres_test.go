package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/store/postgres/pgtest"
)

// The PostgreSQL cluster of this test binary, started by the first test
// that needs one (pgCluster) and stopped by TestMain.
var (
	pgOnce    sync.Once
	pgShared  *pgtest.Cluster
	pgStarted error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if pgShared != nil {
		pgShared.Stop()
	}
	os.Exit(code)
}

// pgCluster returns the binary's cluster, started on first use.
func pgCluster(t *testing.T) *pgtest.Cluster {
	t.Helper()
	pgOnce.Do(func() { pgShared, pgStarted = pgtest.Start(context.Background()) })
	require.NoError(t, pgStarted, "PostgreSQL for the tests: %s", pgtest.Install)
	return pgShared
}

// syncBuffer is a bytes.Buffer safe to read while serve writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var listeningAt = regexp.MustCompile(`msg="svc listening" addr=(127\.0\.0\.1:[0-9]+)`)

// serving is one `svc serve` run in this process.
type serving struct {
	base   string
	stdout *syncBuffer
	stop   func() error
	// args are what it was started with (after serve --addr).
	args []string
}

// startServe runs `svc serve args…` until stop, once it listens.
func startServe(t *testing.T, args ...string) *serving {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...), nil, stdout, stderr)
	}()
	// Generous: under a loaded CI machine a first start on PostgreSQL (the
	// migrations, the use lock, the KEK) took over 30 s twice in 60 runs.
	deadline := time.After(90 * time.Second)
	for {
		if m := listeningAt.FindStringSubmatch(stderr.String()); m != nil {
			s := &serving{base: "http://" + m[1], stdout: stdout, args: args}
			var once sync.Once
			var err error
			s.stop = func() error {
				once.Do(func() { cancel(); err = <-done })
				return err
			}
			t.Cleanup(func() { _ = s.stop() })
			return s
		}
		select {
		case err := <-done:
			cancel()
			t.Fatalf("svc serve ended before listening: %v\n%s", err, stderr)
		case <-deadline:
			cancel()
			t.Fatalf("svc serve did not listen within 90s:\n%s", stderr)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// call sends a JSON request with a bearer token and decodes the answer.
func (s *serving) call(t *testing.T, method, path, token string, body any) (int, map[string]any) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.base+path, r)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// TestServeOnPostgres: svc serve --db-url keeps a team in PostgreSQL
// across restarts, and no second broker or maintenance command works on
// the database while one runs.
func TestServeOnPostgres(t *testing.T) {
	url := pgCluster(t).NewDatabase(t)
	cfgPath := t.TempDir() + "/svc.json"
	first := startServe(t, "--config-path", cfgPath, "--db-url", url)
	m := regexp.MustCompile(`admin token: (\S+)`).FindStringSubmatch(first.stdout.String())
	require.NotNil(t, m, "a first boot prints the admin token")
	token := m[1]

	code, out := first.call(t, http.MethodPost, "/push", token, map[string]any{"to": "admin", "body": "kept in postgres"})
	require.Equal(t, http.StatusOK, code, "%v", out)

	// Another broker on the same database is refused while this one runs,
	// and so is a maintenance command.
	ctx := context.Background()
	err := run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--config-path", cfgPath, "--db-url", url}, nil, io.Discard, io.Discard)
	require.ErrorContains(t, err, "in use")
	var stdout bytes.Buffer
	err = run(ctx, []string{"admin", "token", "--member", "admin", "--config-path", cfgPath, "--db-url", url}, nil, &stdout, io.Discard)
	require.ErrorContains(t, err, "in use")
	require.NoError(t, first.stop())

	// Once it stopped, the maintenance command works on PostgreSQL.
	stdout.Reset()
	require.NoError(t, run(ctx, []string{"admin", "token", "--member", "admin", "--config-path", cfgPath, "--db-url", url}, nil, &stdout, io.Discard))
	m = regexp.MustCompile(`token for admin: (\S+)`).FindStringSubmatch(stdout.String())
	require.NotNil(t, m, stdout.String())
	recovered := m[1]

	second := startServe(t, "--config-path", cfgPath, "--db-url", url)
	require.NotContains(t, second.stdout.String(), "admin token", "a restart is not a first boot")
	code, out = second.call(t, http.MethodGet, "/history?with=admin", recovered, nil)
	require.Equal(t, http.StatusOK, code, "%v", out)
	require.Contains(t, fmt.Sprint(out), "kept in postgres")
	require.NoError(t, second.stop())
}

// TestServeDBURLFlags: the store is named once, as a postgres:// URL, and
// a refused URL is not repeated (it may carry a password).
func TestServeDBURLFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"both stores", []string{"--db-url", "postgres://u@h/db", "--db-path", "x.db"}, "both name the main store"},
		{"key=value form", []string{"--db-url", "host=h password=hunter2"}, "must be a postgres://"},
		{"other scheme", []string{"--db-url", "mysql://u:hunter2@h/db"}, "must be a postgres://"},
		{"activity url alone", []string{"--activity-db-url", "postgres://u@h/act"}, "needs --db-url"},
		{"activity named twice", []string{"--db-url", "postgres://u@h/db", "--activity-db-url", "postgres://u@h/act", "--activity-db-path", "a.db"}, "both name the activity store"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseServeConfig(append([]string{"--config-path", t.TempDir() + "/svc.json"}, tc.args...), io.Discard)
			var ee *exitError
			require.ErrorAs(t, err, &ee)
			require.Equal(t, 2, ee.code)
			require.ErrorContains(t, err, tc.want)
			require.NotContains(t, err.Error(), "hunter2")
		})
	}
	c, err := parseServeConfig([]string{"--config-path", t.TempDir() + "/svc.json", "--db-url", "postgresql://svc:hunter2@db.example/team?sslmode=require"}, io.Discard)
	require.NoError(t, err)
	require.Empty(t, c.DBPath)
	require.Empty(t, c.ActivityDBPath, "the activity store goes to the same database")
	require.Equal(t, "postgresql://svc:xxxxx@db.example/team?sslmode=require", c.dbName())
	require.Equal(t, c.dbName(), c.activityDBName())
}

// TestRedactDBURL: a password never shows, wherever the URL carries it.
func TestRedactDBURL(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://svc@h/db":                        "postgres://svc@h/db",
		"postgres://svc:hunter2@h:5433/db":           "postgres://svc:xxxxx@h:5433/db",
		"postgres://h/db?user=svc&password=hunter2":  "postgres://h/db?password=xxxxx&user=svc",
		"postgres:///db?host=/run/pg&password=x%20y": "postgres:///db?host=%2Frun%2Fpg&password=xxxxx",
		"postgres://svc:hunter2@%zz/db":              "(a PostgreSQL database)",
		"postgres://svc:1234/hunter2@db/team":        "(a PostgreSQL database)",
		"postgres://svc:99?hunter2@db/team":          "(a PostgreSQL database)",
		"postgres://svc:42#hunter2@db/team":          "(a PostgreSQL database)",
		"postgres://svc@db/team?sslpassword=hunter2": "postgres://svc@db/team?sslpassword=xxxxx",
	} {
		got := redactDBURL(in)
		require.Equal(t, want, got, in)
		require.False(t, strings.Contains(got, "hunter2"))
	}
}

// TestCheckOnPostgres: svc check --db-url reports the server and verifies
// the stored files against the entries PostgreSQL holds: a file whose
// bytes were changed on disk is damage.
func TestCheckOnPostgres(t *testing.T) {
	url := pgCluster(t).NewDatabase(t)
	dir := t.TempDir()
	cfgPath := dir + "/svc.json"
	s := startServe(t, "--config-path", cfgPath, "--db-url", url)
	token := regexp.MustCompile(`admin token: (\S+)`).FindStringSubmatch(s.stdout.String())[1]
	// Over 64 KiB, so the content is a blob file (smaller files are kept
	// in the database): svc check verifies those on disk.
	s.writeFile(t, "/admin/notes.txt", token, []byte(strings.Repeat("checked on postgres ", 4000)))
	require.NoError(t, s.stop())

	ctx := context.Background()
	var out bytes.Buffer
	require.NoError(t, run(ctx, []string{"check", "--db-url", url, "--config-path", cfgPath}, nil, &out, io.Discard), out.String())
	require.Contains(t, out.String(), "ok      main store postgres")
	require.Contains(t, out.String(), "data checksums")
	require.Contains(t, out.String(), "1 stored contents")

	blobs, err := filepath.Glob(filepath.Join(dir, "svc-files", "blobs", "*", "*"))
	require.NoError(t, err)
	require.Len(t, blobs, 1, "one stored content")
	require.NoError(t, os.WriteFile(blobs[0], []byte("changed on disk!!!!"), 0o600))
	out.Reset()
	err = run(ctx, []string{"check", "--db-url", url, "--config-path", cfgPath}, nil, &out, io.Discard)
	var ee *exitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, 1, ee.code)
	require.Contains(t, out.String(), "DAMAGED file /admin/notes.txt")
}

// TestDBURLMisreadCredentialsRefused: a password url.Parse would read as
// part of the host or path is refused, not printed.
func TestDBURLMisreadCredentialsRefused(t *testing.T) {
	for _, v := range []string{"postgres://svc:1234/hunter2@db/team", "postgres://svc:99?hunter2@db/team", "postgres://svc:42#hunter2@db/team", "postgres://svc:ok@db/team#hunter2"} {
		_, err := parseDBURL("--db-url", v)
		require.ErrorContains(t, err, "percent-encode", v)
		require.NotContains(t, err.Error(), "hunter2")
		_, err = parseNATSURL(strings.Replace(strings.Replace(v, "postgres://", "nats://", 1), "/team", "", 1), true)
		require.Error(t, err, v)
		require.NotContains(t, err.Error(), "hunter2")
	}
}

// FuzzRedactDBURL: whatever a password holds, a URL svc accepts is never
// printed with it, in the user part or the query.
func FuzzRedactDBURL(f *testing.F) {
	for _, p := range []string{"hunter2", "1234/hunter2", "a?b#c@d", "p%40ss", "::::", "xxxxx1"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, pw string) {
		if len(pw) < 4 || strings.ContainsAny(pw, "x") {
			return // short values and the mask's own letter occur anywhere
		}
		for _, raw := range []string{"postgres://svc:" + pw + "@db.example:5432/team", "postgres://svc@db.example/team?password=" + url.QueryEscape(pw), "nats://svc:" + pw + "@nats.example:4222"} {
			var shown string
			if strings.HasPrefix(raw, "nats://") {
				if _, err := parseNATSURL(raw, true); err != nil {
					require.NotContains(t, err.Error(), pw)
					continue
				}
				shown = redactNATSURL(raw)
			} else {
				if _, err := parseDBURL("--db-url", raw); err != nil {
					require.NotContains(t, err.Error(), pw)
					continue
				}
				shown = redactDBURL(raw)
			}
			for _, form := range []string{pw, url.QueryEscape(pw), url.PathEscape(pw)} {
				if len(form) >= 4 && !strings.Contains("svc db.example 5432 team password nats.example 4222 postgres", form) {
					require.NotContains(t, shown, form, raw)
				}
			}
		}
	})
}
