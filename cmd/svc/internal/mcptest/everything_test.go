package mcptest

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/server/egress"
	"svc/server/toolcall"
)

func caller() *toolcall.Caller {
	return toolcall.New(egress.NewClient(egress.Options{Policy: egress.AllowAll}), toolcall.Options{Timeout: 20 * time.Second})
}

// TestEverythingTools lists the real server's tools twice (a second
// session sees the same set) and calls echo.
func TestEverythingTools(t *testing.T) {
	s := Everything(t)
	require.True(t, strings.HasPrefix(s.URL, "http://127.0.0.1:"), s.URL)
	c := caller()
	ctx := context.Background()
	cred := &toolcall.Credential{Kind: "bearer", Secret: "not-checked-by-everything"}

	first, err := c.ListMCP(ctx, s.URL, cred)
	require.NoError(t, err, s.Log())
	byName := map[string]toolcall.Tool{}
	for _, tool := range first {
		byName[tool.Name] = tool
	}
	require.Contains(t, byName, "echo")
	echo := byName["echo"]
	require.NotEmpty(t, echo.Description)
	var schema struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	require.NoError(t, json.Unmarshal(echo.InputSchema, &schema))
	require.Equal(t, "object", schema.Type)
	require.Contains(t, schema.Properties, "message")

	second, err := c.ListMCP(ctx, s.URL, cred)
	require.NoError(t, err)
	require.Equal(t, first, second)

	res, err := c.CallMCP(ctx, s.URL, cred, "echo", map[string]any{"message": "hello from svc"})
	require.NoError(t, err)
	require.False(t, res.IsError, "%s", res.Content)
	require.Len(t, res.Content, 1)
	var block struct{ Type, Text string }
	require.NoError(t, json.Unmarshal(res.Content[0], &block))
	require.Equal(t, "text", block.Type)
	require.Contains(t, block.Text, "hello from svc")

	// A tool the server does not have, and arguments its schema refuses,
	// are isError results.
	res, err = c.CallMCP(ctx, s.URL, cred, "no-such-tool", nil)
	require.NoError(t, err)
	require.True(t, res.IsError)
	res, err = c.CallMCP(ctx, s.URL, cred, "echo", map[string]any{"message": 5})
	require.NoError(t, err)
	require.True(t, res.IsError)
}

// TestEverythingStopped: once the server is gone, listing is an
// *UpstreamError and calling an isError result.
func TestEverythingStopped(t *testing.T) {
	s := Everything(t)
	c := caller()
	_, err := c.ListMCP(context.Background(), s.URL, nil)
	require.NoError(t, err, s.Log())
	s.Stop()
	s.Stop() // twice is harmless
	_, err = c.ListMCP(context.Background(), s.URL, nil)
	var ue *toolcall.UpstreamError
	require.ErrorAs(t, err, &ue)
	res, err := c.CallMCP(context.Background(), s.URL, nil, "echo", map[string]any{"message": "x"})
	require.NoError(t, err)
	require.True(t, res.IsError)
}

// TestEverythingLoopbackOnly: the server listens on 127.0.0.1 only.
func TestEverythingLoopbackOnly(t *testing.T) {
	s := Everything(t)
	port := strings.TrimSuffix(strings.TrimPrefix(s.URL, "http://127.0.0.1:"), "/mcp")
	addrs, err := net.InterfaceAddrs()
	require.NoError(t, err)
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.IsLoopback() {
			continue
		}
		host := ipn.IP.String()
		if ipn.IP.To4() == nil {
			host = "[" + host + "]"
			if ipn.IP.IsLinkLocalUnicast() {
				continue // needs a zone
			}
		}
		conn, err := net.DialTimeout("tcp", host+":"+port, 2*time.Second)
		if err == nil {
			conn.Close()
			t.Fatalf("server-everything answers on %s:%s", host, port)
		}
	}
}

func TestCacheDir(t *testing.T) {
	root := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", root)
	dir, err := CacheDir()
	require.NoError(t, err)
	require.Equal(t, filepath.Join(root, "svc-test", "server-everything-"+EverythingVersion), dir)
}

// TestInstallWithoutNPM: a machine without npm gets a clear error (which
// EverythingDir turns into a test failure, never a skip).
func TestInstallWithoutNPM(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := ensureIn(t, filepath.Join(t.TempDir(), "server-everything-"+EverythingVersion))
	require.ErrorContains(t, err, "npm is not on PATH")
}

// TestInstallOverDebris installs into a fresh cache over a crashed
// install's leftovers: a stale temp dir and an incomplete install.
func TestInstallOverDebris(t *testing.T) {
	if testing.Short() {
		t.Skip("a full npm install; skipped with -short")
	}
	dir := filepath.Join(t.TempDir(), "svc-test", "server-everything-"+EverythingVersion)
	stale := filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+".tmp-crashed")
	for _, d := range []string{stale, filepath.Join(dir, "node_modules")} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	p, err := ensureIn(t, dir)
	require.NoError(t, err)
	require.NoError(t, verify(dir))
	require.Equal(t, packageIn(dir), p)
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), ".*tmp-*"))
	require.Empty(t, left)
}
