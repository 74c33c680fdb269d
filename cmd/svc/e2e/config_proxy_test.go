package e2e

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// The binary refuses to start on a malformed list.
func TestBadTrustedProxiesRefusesToStart(t *testing.T) {
	t.Parallel()
	cfgPath := filepath.Join(t.TempDir(), "svc.json")
	code, _, stderr := runSvc(t, []string{"serve", "--addr", "127.0.0.1:0", "--config-path", cfgPath}, []string{"SVC_TRUSTED_PROXIES=10.0.0.0/40"}, nil)
	require.Equal(t, 2, code, "stderr:\n%s", stderr)
	require.Contains(t, stderr, "SVC_TRUSTED_PROXIES")
	require.NotContains(t, stderr, "svc listening")
}
