// Package agenttest runs the real Claude Code CLI offline in tests: it
// installs a pinned release from the npm registry into a cache outside the
// repository (Claude), serves a scripted stub of the Anthropic Messages API
// (NewModel) and runs the agent headless against it with OpenTelemetry
// export configured (Run). It is test support: import it from tests only.
package agenttest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/cmd/svc/internal/npmcache"
)

// ClaudeCodeVersion is the pinned release of @anthropic-ai/claude-code.
const ClaudeCodeVersion = "2.1.328"

const (
	// installTimeout bounds one npm install (the native binary is ~370 MB).
	installTimeout = 10 * time.Minute
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
func CacheDir() (string, error) { return claudePackage.Path() }

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

// claudePackage is the pinned release as npmcache installs it: verified
// by `claude --version`.
var claudePackage = npmcache.Package{
	Name: "@anthropic-ai/claude-code", Version: ClaudeCodeVersion,
	Dir:            "claude-code-" + ClaudeCodeVersion,
	InstallTimeout: installTimeout,
	Verify: func(dir string) error {
		bin, err := binaryIn(dir)
		if err != nil {
			return err
		}
		return checkVersion(bin)
	},
}

// ensureClaudeIn installs the pinned release into dir unless a verified
// install is already there, and returns the binary's path.
func ensureClaudeIn(t testing.TB, dir string) (string, error) {
	dir, err := claudePackage.EnsureIn(t, dir)
	if err != nil {
		return "", err
	}
	return binaryIn(dir)
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
	npmcache.KillGroupOnCancel(cmd)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s --version: %v: %s", bin, err, npmcache.Tail(string(out), 2000))
	}
	want := ClaudeCodeVersion + " (Claude Code)"
	if got := strings.TrimSpace(string(out)); got != want {
		return fmt.Errorf("%s --version printed %q, want %q", bin, got, want)
	}
	return nil
}
