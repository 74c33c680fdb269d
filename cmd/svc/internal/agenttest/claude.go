// Package agenttest runs the real Claude Code CLI offline in tests: it
// installs a pinned release from the npm registry into a cache outside the
// repository (Claude), serves a scripted stub of the Anthropic Messages API
// (NewModel) and runs the agent headless against it with OpenTelemetry
// export configured (Run). It is test support: import it from tests only.
package agenttest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ClaudeCodeVersion is the pinned release of @anthropic-ai/claude-code.
const ClaudeCodeVersion = "2.1.328"

const (
	// installTimeout bounds one npm install (the native binary is ~370 MB).
	installTimeout = 10 * time.Minute
	// lockTimeout bounds the wait for another process's install.
	lockTimeout = installTimeout + 2*time.Minute
	// versionTimeout bounds `claude --version`.
	versionTimeout = 30 * time.Second
)

var (
	claudeMu   sync.Mutex
	claudePath string // verified in this process
)

// Claude returns the path of the pinned Claude Code binary, installing it
// with npm on first use into $XDG_CACHE_HOME/svc-test/claude-code-<version>
// (or ~/.cache/svc-test/claude-code-<version>). Concurrent callers, in this
// process or others, share one install: it is serialized by a file lock,
// made in a temporary directory and renamed into place only once
// `claude --version` answers the pinned version, so an interrupted install
// never looks complete. Anything that goes wrong fails the test: it never
// skips.
func Claude(t testing.TB) string {
	t.Helper()
	claudeMu.Lock()
	defer claudeMu.Unlock()
	if claudePath != "" {
		return claudePath
	}
	dir, err := CacheDir()
	var p string
	if err == nil {
		p, err = ensureClaudeIn(t, dir)
	}
	if err != nil {
		t.Fatalf("agenttest: Claude Code %s is needed by this test and could not be installed: %v", ClaudeCodeVersion, err)
	}
	claudePath = p
	return p
}

// CacheDir is the directory the pinned release is installed into.
func CacheDir() (string, error) {
	root := os.Getenv("XDG_CACHE_HOME")
	if root == "" || !filepath.IsAbs(root) {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no cache directory: XDG_CACHE_HOME unset and %v", err)
		}
		root = filepath.Join(home, ".cache")
	}
	return filepath.Join(root, "svc-test", "claude-code-"+ClaudeCodeVersion), nil
}

// platformPackage is the npm package holding the native binary for this
// machine.
func platformPackage() (string, error) {
	arch := map[string]string{"amd64": "x64", "arm64": "arm64"}[runtime.GOARCH]
	if arch == "" || (runtime.GOOS != "linux" && runtime.GOOS != "darwin") {
		return "", fmt.Errorf("no Claude Code native package for %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	return "@anthropic-ai/claude-code-" + runtime.GOOS + "-" + arch, nil
}

func binaryIn(dir string) (string, error) {
	pkg, err := platformPackage()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "node_modules", filepath.FromSlash(pkg), "claude"), nil
}

// ensureClaudeIn installs the pinned release into dir unless a verified
// install is already there, and returns the binary's path.
func ensureClaudeIn(t testing.TB, dir string) (string, error) {
	bin, err := binaryIn(dir)
	if err != nil {
		return "", err
	}
	// Fast path: a directory in place was renamed there after a verified
	// install.
	if checkVersion(bin) == nil {
		return bin, nil
	}

	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", err
	}
	unlock, err := lockFile(filepath.Join(parent, filepath.Base(dir)+".lock"), lockTimeout)
	if err != nil {
		return "", err
	}
	defer unlock()

	// Another process may have installed it while we waited.
	if checkVersion(bin) == nil {
		return bin, nil
	}
	// Leftovers of crashed installs (only ever made under the lock we hold)
	// and a broken install in place.
	tmpPrefix := "." + filepath.Base(dir) + ".tmp-"
	if old, _ := filepath.Glob(filepath.Join(parent, tmpPrefix+"*")); len(old) > 0 {
		for _, o := range old {
			_ = os.RemoveAll(o)
		}
	}
	if _, err := os.Stat(dir); err == nil {
		t.Logf("agenttest: removing broken install %s", dir)
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
	t.Logf("agenttest: installing @anthropic-ai/claude-code@%s into %s", ClaudeCodeVersion, dir)
	if err := npmInstall(npm, tmp); err != nil {
		return "", err
	}
	tmpBin, _ := binaryIn(tmp)
	if err := checkVersion(tmpBin); err != nil {
		return "", fmt.Errorf("installed, but %w", err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil { // MkdirTemp made it 0700
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", fmt.Errorf("moving the install into place: %w", err)
	}
	t.Logf("agenttest: installed Claude Code %s in %s", ClaudeCodeVersion, time.Since(start).Round(time.Millisecond))
	if err := checkVersion(bin); err != nil {
		return "", err
	}
	return bin, nil
}

func npmInstall(npm, dir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), installTimeout)
	defer cancel()
	// A package.json of our own keeps npm from walking up to a project
	// above the cache directory.
	if err := os.WriteFile(filepath.Join(dir, "package.json"),
		[]byte(`{"name":"svc-test-claude-code","private":true}`+"\n"), 0o644); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, npm, "install",
		"--no-audit", "--no-fund", "--no-update-notifier", "--no-progress",
		"--ignore-scripts", "--loglevel=error", "--save-exact",
		"@anthropic-ai/claude-code@"+ClaudeCodeVersion)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "npm_config_update_notifier=false", "npm_config_fund=false", "npm_config_audit=false")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	killGroupOnCancel(cmd)
	err := cmd.Run()
	if ctx.Err() != nil {
		return fmt.Errorf("npm install timed out after %s:\n%s", installTimeout, tail(out.String(), 4000))
	}
	if err != nil {
		return fmt.Errorf("npm install @anthropic-ai/claude-code@%s: %v:\n%s", ClaudeCodeVersion, err, tail(out.String(), 4000))
	}
	return nil
}

// checkVersion runs `claude --version` and wants the pinned version.
func checkVersion(bin string) error {
	if _, err := os.Stat(bin); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), versionTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--version")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir(), "DISABLE_AUTOUPDATER=1"}
	killGroupOnCancel(cmd)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s --version: %v: %s", bin, err, tail(string(out), 2000))
	}
	want := ClaudeCodeVersion + " (Claude Code)"
	if got := strings.TrimSpace(string(out)); got != want {
		return fmt.Errorf("%s --version printed %q, want %q", bin, got, want)
	}
	return nil
}

// lockFile takes an exclusive flock on path, waiting at most timeout.
func lockFile(path string, timeout time.Duration) (func(), error) {
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

// killGroupOnCancel puts cmd in its own process group and kills the whole
// group when its context ends.
func killGroupOnCancel(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = 5 * time.Second
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
