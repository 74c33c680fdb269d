// Package pgtest runs a throwaway PostgreSQL cluster for tests: initdb
// into a temporary directory, a server listening only on a unix socket in
// it, a fresh database per store, and everything removed when the test
// binary's TestMain stops it. SVC_TEST_PG_URL names an existing server to
// use instead (its user must be allowed to create databases).
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL names an existing server to run the tests against.
const EnvURL = "SVC_TEST_PG_URL"

// Install is the command that installs what the local cluster needs.
const Install = "make postgres (or: sudo apt-get install -y postgresql)"

// Cluster is a server the tests create databases on.
type Cluster struct {
	admin string // URL of a database to run CREATE DATABASE on
	owned bool   // started here: stopped and removed by Stop
	dir   string
	cmd   *exec.Cmd
	done  chan error

	mu        sync.Mutex
	stopped   bool
	templates map[string]string // template -> database
}

// Start starts a local cluster, or returns the server SVC_TEST_PG_URL
// names. A missing PostgreSQL is an error naming the command that
// installs it: tests fail rather than skip.
func Start(ctx context.Context) (*Cluster, error) {
	if u := os.Getenv(EnvURL); u != "" {
		return &Cluster{admin: u}, nil
	}
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	// A short directory: a unix socket's path is limited to 107 bytes.
	dir, err := os.MkdirTemp("", "svcpg-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{owned: true, dir: dir, done: make(chan error, 1)}
	if err := c.start(ctx, bin); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// binDir is the newest of Debian's /usr/lib/postgresql/*/bin with initdb.
func binDir() (string, error) {
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(found) == 0 {
		return "", fmt.Errorf("PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb): run %s, or set %s", Install, EnvURL)
	}
	slices.SortFunc(found, func(a, b string) int { return version(b) - version(a) })
	return filepath.Dir(found[0]), nil
}

func version(initdb string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return v
}

func (c *Cluster) start(ctx context.Context, bin string) error {
	cred, err := serverUser(c.dir)
	if err != nil {
		return err
	}
	data := filepath.Join(c.dir, "data")
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", "svc",
		"--auth=trust", "--encoding=UTF8", "--no-locale",
		// initdb's own final flush only: the server below runs with
		// fsync on, as in production.
		"--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %w: %s", err, out)
	}
	c.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", data,
		"-k", c.dir, "-c", "listen_addresses=", "-c", "fsync=on", "-c", "synchronous_commit=on",
		"-c", "unix_socket_permissions=0700", "-c", "max_connections=200", "-c", "shared_buffers=32MB")
	var log strings.Builder
	c.cmd.Stdout, c.cmd.Stderr = &syncWriter{w: &log}, &syncWriter{w: &log}
	// SIGQUIT is PostgreSQL's immediate shutdown: if the test binary dies,
	// the server does not outlive it.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT}
	if err := c.cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	go func() { c.done <- c.cmd.Wait() }()
	c.admin = (&url.URL{Scheme: "postgres", User: url.User("svc"), Path: "/postgres",
		RawQuery: url.Values{"host": {c.dir}, "sslmode": {"disable"}}.Encode()}).String()
	deadline := time.Now().Add(60 * time.Second)
	for {
		conn, err := pgx.Connect(ctx, c.admin)
		if err == nil {
			return conn.Close(ctx)
		}
		select {
		case werr := <-c.done:
			c.done <- werr
			return fmt.Errorf("postgres exited: %v: %s", werr, log.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not accept connections in 60 s: %w: %s", err, log.String())
		}
	}
}

// serverUser is who runs the server: PostgreSQL refuses to run as root,
// so as root the cluster belongs to the postgres (or nobody) user.
func serverUser(dir string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	var u *user.User
	for _, name := range []string{"postgres", "nobody"} {
		if found, err := user.Lookup(name); err == nil {
			u = found
			break
		}
	}
	if u == nil {
		return nil, errors.New("running as root and no postgres or nobody user to run the server as")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// Stop stops a cluster started here (a fast shutdown) and removes its
// directory; for SVC_TEST_PG_URL it does nothing.
func (c *Cluster) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.owned {
		for _, name := range c.templates {
			_ = c.drop(name)
		}
		c.templates = nil
		return
	}
	if c.stopped {
		return
	}
	c.stopped = true
	if c.cmd != nil && c.cmd.Process != nil {
		_ = c.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-c.done:
		case <-time.After(30 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	}
	_ = os.RemoveAll(c.dir)
}

// NewDatabase creates an empty database and returns its URL. On a server
// named by SVC_TEST_PG_URL it is dropped when tb ends; a local cluster
// goes whole at Stop.
func (c *Cluster) NewDatabase(tb testing.TB) string {
	tb.Helper()
	return c.newDatabase(tb, "template0")
}

// NewDatabaseFrom creates a database as a copy of the template database
// build prepares once per name (for example, by migrating it): copying a
// migrated database is faster than migrating each one.
func (c *Cluster) NewDatabaseFrom(tb testing.TB, template string, build func(url string) error) string {
	tb.Helper()
	c.mu.Lock()
	if c.templates == nil {
		c.templates = map[string]string{}
	}
	name, ok := c.templates[template]
	if !ok {
		name = randomName("svc_tmpl_")
		if err := c.create(name, "template0"); err != nil {
			c.mu.Unlock()
			tb.Fatalf("create template database: %v", err)
		}
		if err := build(c.urlOf(name)); err != nil {
			c.mu.Unlock()
			tb.Fatalf("build template database %s: %v", template, err)
		}
		c.templates[template] = name
	}
	c.mu.Unlock()
	return c.newDatabase(tb, name)
}

func (c *Cluster) newDatabase(tb testing.TB, template string) string {
	tb.Helper()
	name := randomName("svc_test_")
	if err := c.create(name, template); err != nil {
		tb.Fatalf("create database: %v", err)
	}
	if !c.owned {
		tb.Cleanup(func() {
			if err := c.drop(name); err != nil {
				tb.Errorf("drop %s: %v", name, err)
			}
		})
	}
	return c.urlOf(name)
}

func randomName(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func (c *Cluster) create(name, template string) error {
	return c.admin1(`CREATE DATABASE ` + name + ` TEMPLATE ` + template + ` ENCODING 'UTF8'`)
}

func (c *Cluster) drop(name string) error {
	return c.admin1(`DROP DATABASE IF EXISTS ` + name + ` WITH (FORCE)`)
}

// admin1 runs one statement on the admin database.
func (c *Cluster) admin1(sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.admin)
	if err != nil {
		return fmt.Errorf("connect to the test cluster: %w", err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// urlOf is the URL of database name on the cluster.
func (c *Cluster) urlOf(name string) string {
	u, err := url.Parse(c.admin)
	if err != nil {
		// Start parsed it already (pgx.Connect); a local URL is built here.
		panic(err)
	}
	u.Path = "/" + name
	return u.String()
}

type syncWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w.Len() > 1<<16 {
		return len(p), nil
	}
	return s.w.Write(p)
}
