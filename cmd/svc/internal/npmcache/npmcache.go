// Package npmcache installs pinned npm packages for tests into a cache
// outside the repository, once per machine: concurrent installs, in this
// process or others, are serialized by a file lock and made in a
// temporary directory renamed into place only once verified, so an
// interrupted install never looks complete. It is test support for
// agenttest and mcptest.
package npmcache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Package is one pinned npm package.
type Package struct {
	Name    string // e.g. "@anthropic-ai/claude-code"
	Version string
	// Dir names its install directory under the cache root.
	Dir string
	// Verify checks an install in dir; nil means it is whole and pinned.
	Verify func(dir string) error
	// InstallTimeout bounds one npm install.
	InstallTimeout time.Duration
}

// Root is $XDG_CACHE_HOME/svc-test, or ~/.cache/svc-test.
func Root() (string, error) {
	root := os.Getenv("XDG_CACHE_HOME")
	if root == "" || !filepath.IsAbs(root) {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no cache directory: XDG_CACHE_HOME unset and %v", err)
		}
		root = filepath.Join(home, ".cache")
	}
	return filepath.Join(root, "svc-test"), nil
}

// Path is the directory p is installed into.
func (p Package) Path() (string, error) {
	root, err := Root()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, p.Dir), nil
}

// Ensure installs p into its Path unless a verified install is in place,
// and returns that directory. It never skips: the caller fails the test on
// an error.
func (p Package) Ensure(t testing.TB) (string, error) {
	dir, err := p.Path()
	if err != nil {
		return "", err
	}
	return p.EnsureIn(t, dir)
}

// EnsureIn is Ensure into dir.
func (p Package) EnsureIn(t testing.TB, dir string) (string, error) {
	if p.Verify(dir) == nil {
		return dir, nil
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", err
	}
	unlock, err := LockFile(filepath.Join(parent, filepath.Base(dir)+".lock"), p.InstallTimeout+2*time.Minute)
	if err != nil {
		return "", err
	}
	defer unlock()
	// Another process may have installed it while we waited.
	if p.Verify(dir) == nil {
		return dir, nil
	}
	// Leftovers of crashed installs (only ever made under the lock we hold)
	// and a broken install in place.
	tmpPrefix := "." + filepath.Base(dir) + ".tmp-"
	old, _ := filepath.Glob(filepath.Join(parent, tmpPrefix+"*"))
	for _, o := range old {
		_ = os.RemoveAll(o)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Logf("npmcache: removing broken install %s", dir)
		if err := os.RemoveAll(dir); err != nil {
			return "", err
		}
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", fmt.Errorf("npm is not on PATH (install Node.js and npm, e.g. `apt-get install -y nodejs npm`): %v", err)
	}
	tmp, err := os.MkdirTemp(parent, tmpPrefix)
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp) // after a successful rename there is nothing left
	start := time.Now()
	t.Logf("npmcache: installing %s@%s into %s", p.Name, p.Version, dir)
	if err := p.install(npm, tmp); err != nil {
		return "", err
	}
	if err := p.Verify(tmp); err != nil {
		return "", fmt.Errorf("installed, but %w", err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil { // MkdirTemp made it 0700
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", fmt.Errorf("moving the install into place: %w", err)
	}
	t.Logf("npmcache: installed %s@%s in %s", p.Name, p.Version, time.Since(start).Round(time.Millisecond))
	if err := p.Verify(dir); err != nil {
		return "", err
	}
	return dir, nil
}

// install runs npm install of p into dir. --ignore-scripts: no install
// script of the package or its dependencies runs.
func (p Package) install(npm, dir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), p.InstallTimeout)
	defer cancel()
	// A package.json of our own keeps npm from walking up to a project
	// above the cache directory.
	if err := os.WriteFile(filepath.Join(dir, "package.json"),
		[]byte(`{"name":"svc-test-cache","private":true}`+"\n"), 0o644); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, npm, "install",
		"--no-audit", "--no-fund", "--no-update-notifier", "--no-progress",
		"--ignore-scripts", "--loglevel=error", "--save-exact",
		p.Name+"@"+p.Version)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "npm_config_update_notifier=false", "npm_config_fund=false", "npm_config_audit=false")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	KillGroupOnCancel(cmd)
	err := cmd.Run()
	if ctx.Err() != nil {
		return fmt.Errorf("npm install timed out after %s:\n%s", p.InstallTimeout, Tail(out.String(), 4000))
	}
	if err != nil {
		return fmt.Errorf("npm install %s@%s: %v:\n%s", p.Name, p.Version, err, Tail(out.String(), 4000))
	}
	return nil
}

// LockFile takes an exclusive flock on path, waiting at most timeout.
func LockFile(path string, timeout time.Duration) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("another process held %s for more than %s", path, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// KillGroupOnCancel puts cmd in its own process group and kills the whole
// group when its context ends.
func KillGroupOnCancel(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = 5 * time.Second
}

// Tail is the last n bytes of s, marked when cut.
func Tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
