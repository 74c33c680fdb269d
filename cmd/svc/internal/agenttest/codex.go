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

	"svc/cmd/svc/internal/npmcache"
)

// CodexVersion is the pinned release of @openai/codex.
const CodexVersion = "0.169.0"

var (
	codexMu   sync.Mutex
	codexPath string // verified in this process
)

// Codex returns the path of the pinned Codex binary, installing it with
// npm on first use into $XDG_CACHE_HOME/svc-test/codex-<version> (or
// ~/.cache/svc-test/codex-<version>), as Claude does for Claude Code. It
// never skips: anything that goes wrong fails the test.
func Codex(t testing.TB) string {
	t.Helper()
	codexMu.Lock()
	defer codexMu.Unlock()
	if codexPath != "" {
		return codexPath
	}
	dir, err := codexPackage.Ensure(t)
	var p string
	if err == nil {
		p, err = codexBinaryIn(dir)
	}
	if err != nil {
		t.Fatalf("agenttest: Codex %s is needed by this test and could not be installed: %v", CodexVersion, err)
	}
	codexPath = p
	return p
}

// codexBinaryIn is the native binary inside an install: the platform
// package @openai/codex-<os>-<arch> holds it under vendor/<triple>/bin.
func codexBinaryIn(dir string) (string, error) {
	triple := map[string]string{
		"linux/amd64": "x86_64-unknown-linux-musl", "linux/arm64": "aarch64-unknown-linux-musl",
		"darwin/amd64": "x86_64-apple-darwin", "darwin/arm64": "aarch64-apple-darwin",
	}[runtime.GOOS+"/"+runtime.GOARCH]
	arch := map[string]string{"amd64": "x64", "arm64": "arm64"}[runtime.GOARCH]
	if triple == "" || arch == "" {
		return "", fmt.Errorf("no Codex native package for %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	pkg := "@openai/codex-" + runtime.GOOS + "-" + arch
	return filepath.Join(dir, "node_modules", filepath.FromSlash(pkg), "vendor", triple, "bin", "codex"), nil
}

var codexPackage = npmcache.Package{
	Name: "@openai/codex", Version: CodexVersion,
	Dir:            "codex-" + CodexVersion,
	InstallTimeout: installTimeout,
	Verify: func(dir string) error {
		bin, err := codexBinaryIn(dir)
		if err != nil {
			return err
		}
		return checkCodexVersion(bin)
	},
}

// checkCodexVersion runs `codex --version` and wants the pinned version.
func checkCodexVersion(bin string) error {
	if _, err := os.Stat(bin); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), versionTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--version")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir(), "CODEX_HOME=" + os.TempDir()}
	npmcache.KillGroupOnCancel(cmd)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s --version: %v: %s", bin, err, npmcache.Tail(string(out), 2000))
	}
	want := "codex-cli " + CodexVersion
	if got := strings.TrimSpace(string(out)); !strings.HasSuffix(got, want) {
		return fmt.Errorf("%s --version printed %q, want %q", bin, got, want)
	}
	return nil
}
