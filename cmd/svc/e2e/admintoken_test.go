package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"svc/server/kek"
)

var adminTokenOutRE = regexp.MustCompile(`^token for admin: (svc_[A-Za-z0-9_-]{43})\n$`)

// TestAdminTokenRecovery: svc admin token mints a new token for a
// members.manage holder of a stopped broker. While the broker runs it is
// refused (the database's lock) and changes nothing; a member without
// members.manage, an unknown member, a missing KEK and an in-memory
// database are refused. After a restart the new token manages members and
// the old one still works. Only the token's hash is stored.
func TestAdminTokenRecovery(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfgPath, dbPath := filepath.Join(dir, "svc.json"), filepath.Join(dir, "svc.db")
	p := mustStartSvc(t, procOpts{configPath: cfgPath, dbPath: dbPath})
	old := bearer(p.adminToken(t))
	d := restDriver{p}
	createMember(t, d, old, "bob", "activity.read")
	mint := func(member string, extra ...string) []string {
		return append([]string{"admin", "token", "--member", member, "--config-path", cfgPath, "--db-path", dbPath}, extra...)
	}

	// A running broker holds the database: refused, nothing written.
	before, err := os.ReadFile(cfgPath)
	require.NoError(t, err)
	code, stdout, stderr := runSvc(t, mint("admin"), nil, nil)
	require.Equal(t, 1, code, "stderr:\n%s", stderr)
	require.Contains(t, stderr, "stop the broker first")
	require.Empty(t, stdout)
	after, err := os.ReadFile(cfgPath)
	require.NoError(t, err)
	require.Equal(t, string(before), string(after))
	p.mustStop(t)

	for _, tc := range []struct {
		name string
		args []string
		env  []string
		code int
		want string
	}{
		{name: "without members.manage", args: mint("bob"), code: 1, want: `member "bob" does not hold members.manage`},
		{name: "unknown member", args: mint("mallory"), code: 1, want: `no member "mallory"`},
		{name: "no --member", args: []string{"admin", "token", "--config-path", cfgPath, "--db-path", dbPath}, code: 2, want: "--member is required"},
		{name: "in-memory database", args: []string{"admin", "token", "--member", "admin", "--config-path", cfgPath, "--db-path", ":memory:"}, code: 2, want: "in-memory"},
		{name: "a wrong KEK", args: mint("admin"), env: []string{"SVC_KEK=" + wrongKEK(t)}, code: 1, want: "does not open with the key from SVC_KEK"},
	} {
		code, stdout, stderr := runSvc(t, tc.args, tc.env, nil)
		require.Equal(t, tc.code, code, "%s: stderr:\n%s", tc.name, stderr)
		require.Contains(t, stderr, tc.want, tc.name)
		require.Empty(t, stdout, tc.name)
	}
	after, err = os.ReadFile(cfgPath)
	require.NoError(t, err)
	require.Equal(t, string(before), string(after), "a refusal writes nothing")

	code, stdout, stderr = runSvc(t, mint("admin"), nil, nil)
	require.Equal(t, 0, code, "stderr:\n%s", stderr)
	m := adminTokenOutRE.FindStringSubmatch(stdout)
	require.NotNil(t, m, "stdout: %q", stdout)
	tok := m[1]
	sum := sha256.Sum256([]byte(tok))
	cfg, err := os.ReadFile(cfgPath)
	require.NoError(t, err)
	require.NotContains(t, string(cfg), tok, "the plaintext is never stored")
	require.Contains(t, string(cfg), hex.EncodeToString(sum[:]), "the config names the newest token's hash")
	for _, f := range []string{dbPath, dbPath + "-wal"} {
		if b, err := os.ReadFile(f); err == nil {
			require.NotContains(t, string(b), tok)
		}
	}
	requireMode(t, cfgPath, 0o600)

	p = p.restart(t)
	d = restDriver{p}
	recovered := bearer(tok)
	requireWorks(t, d, recovered, "admin")
	createMember(t, d, recovered, "carol")
	toks := listOf(t, mustCall(t, d, recovered, "ListTokens", obj{"name": "admin"}), "tokens")
	require.Len(t, toks, 2, "the new token and the first run's")
	requireWorks(t, d, old, "admin")
	mustFail(t, d, bearer(createMember(t, d, recovered, "dave", "activity.read")), "CreateMember", obj{"name": "erin", "permissions": []string{}}, "forbidden")
}

// wrongKEK is a fresh key, in SVC_KEK's form, that sealed nothing.
func wrongKEK(t *testing.T) string {
	t.Helper()
	k, err := kek.Generate()
	require.NoError(t, err)
	return strings.TrimSpace(string(kek.Encode(k)))
}
