// Package mcptest runs a real MCP server made elsewhere in tests: the
// reference @modelcontextprotocol/server-everything from npm, over
// Streamable HTTP on a loopback port. It installs a pinned release into a
// cache outside the repository (the way agenttest installs Claude Code)
// and runs it with node. It is test support: import it from tests only.
package mcptest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"

	"svc/cmd/svc/internal/npmcache"
)

// EverythingVersion is the pinned release of
// @modelcontextprotocol/server-everything.
const EverythingVersion = "2026.8.31"

const everythingPackage = "@modelcontextprotocol/server-everything"

const (
	installTimeout = 5 * time.Minute
	startTimeout   = 30 * time.Second
)

var (
	installMu   sync.Mutex
	installPath string // verified in this process
)

// EverythingDir returns the directory of the pinned server-everything
// package, installing it with npm on first use into
// $XDG_CACHE_HOME/svc-test/server-everything-<version> (or
// ~/.cache/svc-test/...). Concurrent installs, in this process or others,
// are serialized by a file lock and made in a temporary directory renamed
// into place once verified. Anything that goes wrong fails the test: it
// never skips.
func EverythingDir(t testing.TB) string {
	t.Helper()
	installMu.Lock()
	defer installMu.Unlock()
	if installPath != "" {
		return installPath
	}
	dir, err := CacheDir()
	var p string
	if err == nil {
		p, err = ensureIn(t, dir)
	}
	if err != nil {
		t.Fatalf("mcptest: %s@%s is needed by this test and could not be installed: %v", everythingPackage, EverythingVersion, err)
	}
	installPath = p
	return p
}

// CacheDir is the directory the pinned release is installed into.
func CacheDir() (string, error) { return everything.Path() }

// everything is the pinned release as npmcache installs it.
var everything = npmcache.Package{
	Name: everythingPackage, Version: EverythingVersion,
	Dir:            "server-everything-" + EverythingVersion,
	InstallTimeout: installTimeout,
	Verify:         verify,
}

func packageIn(dir string) string {
	return filepath.Join(dir, "node_modules", filepath.FromSlash(everythingPackage))
}

// verify checks dir holds the pinned version with its entry point.
func verify(dir string) error {
	pkg := packageIn(dir)
	b, err := os.ReadFile(filepath.Join(pkg, "package.json"))
	if err != nil {
		return err
	}
	var meta struct{ Name, Version string }
	if err := json.Unmarshal(b, &meta); err != nil {
		return fmt.Errorf("%s/package.json: %w", pkg, err)
	}
	if meta.Name != everythingPackage || meta.Version != EverythingVersion {
		return fmt.Errorf("%s holds %s@%s, want %s@%s", pkg, meta.Name, meta.Version, everythingPackage, EverythingVersion)
	}
	if _, err := os.Stat(filepath.Join(pkg, "dist", "transports", "streamableHttp.js")); err != nil {
		return err
	}
	return nil
}

func ensureIn(t testing.TB, dir string) (string, error) {
	dir, err := everything.EnsureIn(t, dir)
	if err != nil {
		return "", err
	}
	return packageIn(dir), nil
}

// listenShim is preloaded into node: the server calls app.listen(PORT)
// on every interface; the shim binds 127.0.0.1 on a port the kernel picks
// instead, and prints it, so no port is guessed and nothing listens
// beyond loopback.
const listenShim = `'use strict';
const net = require('net');
const listen = net.Server.prototype.listen;
let done = false;
net.Server.prototype.listen = function (...args) {
  if (done) return listen.apply(this, args);
  done = true;
  const cb = args.find((a) => typeof a === 'function');
  this.once('listening', () => {
    const a = this.address();
    process.stderr.write('mcptest-listening ' + a.address + ' ' + a.port + '\n');
  });
  return cb ? listen.call(this, { port: 0, host: '127.0.0.1' }, cb) : listen.call(this, { port: 0, host: '127.0.0.1' });
};
`

var listeningLine = regexp.MustCompile(`^mcptest-listening 127\.0\.0\.1 (\d+)$`)

// Server is one running server-everything.
type Server struct {
	// URL is its Streamable HTTP endpoint, http://127.0.0.1:<port>/mcp.
	URL string

	t    testing.TB
	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	log  bytes.Buffer
}

// Everything starts the pinned server-everything over Streamable HTTP and
// stops it when the test ends. It needs node and npm on PATH.
func Everything(t testing.TB) *Server {
	t.Helper()
	pkg := EverythingDir(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("mcptest: node is not on PATH (install Node.js): %v", err)
	}
	shim := filepath.Join(t.TempDir(), "listen-shim.cjs")
	if err := os.WriteFile(shim, []byte(listenShim), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, done: make(chan struct{})}
	s.cmd = exec.Command(node, "--require", shim, filepath.Join(pkg, "dist", "index.js"), "streamableHttp")
	s.cmd.Dir = pkg
	s.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "PORT=0", "NODE_ENV=test"}
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	s.cmd.Stdout = &lockedWriter{s: s}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("mcptest: starting node: %v", err)
	}
	t.Cleanup(s.Stop)
	port := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			if m := listeningLine.FindStringSubmatch(line); m != nil {
				select {
				case port <- m[1]:
				default:
				}
			}
			s.mu.Lock()
			s.log.WriteString(line + "\n")
			s.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, stderr)
		_ = s.cmd.Wait()
		close(s.done)
	}()
	select {
	case p := <-port:
		s.URL = "http://127.0.0.1:" + p + "/mcp"
	case <-s.done:
		t.Fatalf("mcptest: server-everything exited before listening:\n%s", s.Log())
	case <-time.After(startTimeout):
		t.Fatalf("mcptest: server-everything did not listen within %s:\n%s", startTimeout, s.Log())
	}
	if err := s.waitReady(); err != nil {
		t.Fatalf("mcptest: %v\n%s", err, s.Log())
	}
	return s
}

// waitReady waits until the endpoint answers HTTP.
func (s *Server) waitReady() error {
	deadline := time.Now().Add(startTimeout)
	for {
		req, _ := http.NewRequest(http.MethodGet, s.URL, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer within %s: %v", s.URL, startTimeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop kills the server (its whole process group) and waits for it.
// Calling it again does nothing.
func (s *Server) Stop() {
	if s.cmd.Process == nil {
		return
	}
	select {
	case <-s.done:
		return
	default:
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.t.Errorf("mcptest: server-everything (pid %d) did not exit", s.cmd.Process.Pid)
	}
}

// Log is what the server printed.
func (s *Server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

type lockedWriter struct{ s *Server }

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	return w.s.log.Write(p)
}
