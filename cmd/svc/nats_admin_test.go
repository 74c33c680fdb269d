package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"svc/server/kek"
	"svc/server/teamconfig"
	"svc/store"
	"svc/store/postgres"
)

// Maintenance commands on a team whose members live in the database
// (docs/DECISIONS.md, "Maintenance commands on a team whose members live
// in the database").

var sharedTokenOut = regexp.MustCompile(`^token for admin: (svc_[A-Za-z0-9_-]{43})\n$`)

// runMaint runs the svc command line in this process and returns its
// stdout, stderr and error.
func runMaint(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut strings.Builder
	err = run(context.Background(), args, strings.NewReader(""), &out, &errOut)
	return out.String(), errOut.String(), err
}

// metaValue reads one key of the database's meta table.
func metaValue(t *testing.T, url, key string) string {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var v string
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT value FROM meta WHERE key = $1`, key).Scan(&v))
	return v
}

// storedMembersFile is the members document of the database as a config
// file holding them, for checks of their sealed values.
func storedMembersFile(t *testing.T, url string) *teamconfig.File {
	t.Helper()
	var doc struct {
		Members []teamconfig.Member `json:"members"`
	}
	require.NoError(t, json.Unmarshal([]byte(metaValue(t, url, "members_doc")), &doc))
	return &teamconfig.File{Store: teamconfig.Store{Members: doc.Members}}
}

// TestSharedAdminTokenWhileBrokersRun: with two brokers serving a team
// whose members live in the database, svc admin token mints a token that
// manages members on both brokers at once, without stopping them; the
// database keeps only its hash, the members document moves one version,
// and the config file is not touched. A member who cannot manage members
// or is no member is refused, changing nothing.
func TestSharedAdminTokenWhileBrokersRun(t *testing.T) {
	st := startSharedTeam(t)
	st.create(t, st.a, "carol")
	before, err := os.ReadFile(st.cfgPath)
	require.NoError(t, err)
	version := metaValue(t, st.dbURL, "members_version")
	mint := func(member string) []string {
		return []string{"admin", "token", "--member", member, "--config-path", st.cfgPath, "--db-url", st.dbURL}
	}

	for _, tc := range []struct{ member, want string }{
		{"carol", `member "carol" does not hold members.manage`},
		{"mallory", `no member "mallory"`},
	} {
		stdout, _, err := runMaint(t, mint(tc.member)...)
		require.ErrorContains(t, err, tc.want)
		require.Empty(t, stdout)
	}
	require.Equal(t, version, metaValue(t, st.dbURL, "members_version"), "a refusal writes nothing")

	stdout, stderr, err := runMaint(t, mint("admin")...)
	require.NoError(t, err, "stderr: %s", stderr)
	m := sharedTokenOut.FindStringSubmatch(stdout)
	require.NotNil(t, m, "stdout: %q", stdout)
	tok := m[1]

	// At once, on both brokers: a call that needs members.manage.
	for i, s := range []*serving{st.a, st.b} {
		name := []string{"dave", "erin"}[i]
		code, out := s.call(t, http.MethodPost, "/members", tok, map[string]any{"name": name})
		require.Equal(t, http.StatusOK, code, "broker %d: %v", i, out)
	}
	code, out := st.b.call(t, http.MethodGet, "/members/admin/tokens", st.admin, nil)
	require.Equal(t, http.StatusOK, code, "the first token still works: %v", out)
	require.Len(t, out["tokens"], 2, "%v", out)

	after, err := os.ReadFile(st.cfgPath)
	require.NoError(t, err)
	require.Equal(t, string(before), string(after), "the config file holds no members and is not written")

	// The database: the token's hash, in the tokens table and as the
	// member's tokenHash, never the token itself.
	sum := sha256.Sum256([]byte(tok))
	conn, err := pgx.Connect(t.Context(), st.dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var n int
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT count(*) FROM tokens WHERE hash = $1 AND member = 'admin'`, sum[:]).Scan(&n))
	require.Equal(t, 1, n)
	rows, err := conn.Query(t.Context(), `SELECT tablename FROM pg_tables WHERE schemaname = current_schema()`)
	require.NoError(t, err)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.NotEmpty(t, tables)
	for _, table := range tables {
		require.NoError(t, conn.QueryRow(t.Context(), `SELECT count(*) FROM `+pgx.Identifier{table}.Sanitize()+` x WHERE x::text LIKE '%' || $1 || '%'`, tok).Scan(&n))
		require.Zero(t, n, "table %s holds the token", table)
	}
	doc := storedMembersFile(t, st.dbURL)
	i := doc.MemberIndex("admin")
	require.GreaterOrEqual(t, i, 0)
	require.Equal(t, teamconfig.FormatTokenHash(sum), doc.Store.Members[i].TokenHash)
	require.NotContains(t, stderr, tok)
	require.NotEqual(t, version, metaValue(t, st.dbURL, "members_version"))
}

// TestSharedAdminTokenBesideMemberChanges: tokens minted while a broker
// creates members lose none of the broker's changes, and the broker's
// changes lose none of the tokens: both change the members document one
// after the other under the store's write lock.
func TestSharedAdminTokenBesideMemberChanges(t *testing.T) {
	st := startSharedTeam(t)
	mint := []string{"admin", "token", "--member", "admin", "--config-path", st.cfgPath, "--db-url", st.dbURL}
	want := []string{"admin"}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 10 {
			name := fmt.Sprintf("m%02d", i)
			code, out := st.b.call(t, http.MethodPost, "/members", st.admin, map[string]any{"name": name})
			if code != http.StatusOK {
				t.Errorf("create %s: %d %v", name, code, out)
				return
			}
		}
	}()
	var tokens []string
	for range 3 {
		stdout, stderr, err := runMaint(t, mint...)
		require.NoError(t, err, "stderr: %s", stderr)
		m := sharedTokenOut.FindStringSubmatch(stdout)
		require.NotNil(t, m, "stdout: %q", stdout)
		tokens = append(tokens, m[1])
	}
	<-done
	for i := range 10 {
		want = append(want, fmt.Sprintf("m%02d", i))
	}
	for _, s := range []*serving{st.a, st.b} {
		for _, tok := range tokens {
			require.Equal(t, want, memberNames(t, s, tok))
		}
	}
	last := sha256.Sum256([]byte(tokens[len(tokens)-1]))
	doc := storedMembersFile(t, st.dbURL)
	require.Equal(t, teamconfig.FormatTokenHash(last), doc.Store.Members[doc.MemberIndex("admin")].TokenHash, "the member's tokenHash names the newest token")
}

// TestSharedAdminTokenAndTheUseLock: svc admin token takes the use lock
// shared, as the brokers do: a process holding the database alone (a KEK
// command, svc migrate, a broker without NATS) refuses it, changing
// nothing; with no broker running it works too, and the brokers started
// afterwards accept the token.
func TestSharedAdminTokenAndTheUseLock(t *testing.T) {
	st := startSharedTeam(t)
	require.NoError(t, st.a.stop())
	require.NoError(t, st.b.stop())
	version := metaValue(t, st.dbURL, "members_version")
	mint := []string{"admin", "token", "--member", "admin", "--config-path", st.cfgPath, "--db-url", st.dbURL}

	alone, err := postgres.Open(t.Context(), st.dbURL, postgres.WithUseLock(true))
	require.NoError(t, err)
	stdout, _, err := runMaint(t, mint...)
	require.ErrorIs(t, err, store.ErrInUse)
	require.Empty(t, stdout)
	require.Equal(t, version, metaValue(t, st.dbURL, "members_version"), "a refusal writes nothing")
	require.NoError(t, alone.Close())

	stdout, stderr, err := runMaint(t, mint...)
	require.NoError(t, err, "stderr: %s", stderr)
	m := sharedTokenOut.FindStringSubmatch(stdout)
	require.NotNil(t, m, "stdout: %q", stdout)
	a := startServe(t, st.args...)
	code, out := a.call(t, http.MethodPost, "/members", m[1], map[string]any{"name": "carol"})
	require.Equal(t, http.StatusOK, code, "%v", out)
}

// TestSharedKEKRotate: svc kek rotate on a team whose members live in the
// database is refused while its brokers run (they hold the key in
// memory), changing nothing; with them stopped it re-seals the members'
// TOTP secrets in the database with the rest, the brokers start on the
// new key, and a TOTP login works on them.
func TestSharedKEKRotate(t *testing.T) {
	st := startSharedTeam(t)
	st.create(t, st.a, "alice")
	code, out := st.a.call(t, http.MethodPost, "/members/alice/enroll-totp", st.admin, map[string]any{})
	require.Equal(t, http.StatusOK, code, "%v", out)
	secret := out["totpSecret"].(string)
	oldKey, err := kek.Load(st.cfgPath + ".kek")
	require.NoError(t, err)
	newKeyFile := filepath.Join(t.TempDir(), "new.kek")
	rotate := []string{"kek", "rotate", "--config-path", st.cfgPath, "--db-url", st.dbURL, "--new-kek-file", newKeyFile, "--generate"}

	cfgBefore, err := os.ReadFile(st.cfgPath)
	require.NoError(t, err)
	docBefore := metaValue(t, st.dbURL, "members_doc")
	_, _, err = runMaint(t, rotate...)
	require.ErrorIs(t, err, store.ErrInUse)
	require.ErrorContains(t, err, "stop every broker of the team first")
	_, statErr := os.Stat(newKeyFile)
	require.ErrorIs(t, statErr, os.ErrNotExist, "a refusal makes no key")
	cfgAfter, err := os.ReadFile(st.cfgPath)
	require.NoError(t, err)
	require.Equal(t, string(cfgBefore), string(cfgAfter))
	require.Equal(t, docBefore, metaValue(t, st.dbURL, "members_doc"))

	require.NoError(t, st.a.stop())
	require.NoError(t, st.b.stop())
	stdout, stderr, err := runMaint(t, rotate...)
	require.NoError(t, err, "stderr: %s", stderr)
	require.Contains(t, stdout, "re-sealed")
	newKey, err := kek.Load(st.cfgPath + ".kek")
	require.NoError(t, err)
	require.NotEqual(t, oldKey.Fingerprint(), newKey.Fingerprint(), "the broker's key file holds the new key")
	require.Equal(t, newKey.Fingerprint(), metaValue(t, st.dbURL, store.MetaKEKFingerprint))
	doc := storedMembersFile(t, st.dbURL)
	require.NoError(t, doc.CheckKEK(newKey), "the members' TOTP secrets open with the new key")
	require.Error(t, doc.CheckKEK(oldKey), "and no longer with the old one")
	var file struct {
		Store struct {
			Members []any `json:"members"`
		} `json:"store"`
	}
	raw, err := os.ReadFile(st.cfgPath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &file))
	require.Empty(t, file.Store.Members, "the config file still keeps no members: %s", raw)

	// Again: nothing to do, nothing written.
	stdout, _, err = runMaint(t, "kek", "rotate", "--config-path", st.cfgPath, "--db-url", st.dbURL, "--new-kek-file", newKeyFile)
	require.NoError(t, err)
	require.Contains(t, stdout, "nothing to do")

	a, b := startServe(t, st.args...), startServe(t, st.args...)
	require.Equal(t, http.StatusOK, login(t, a, currentCode(t, secret)), "alice's TOTP secret opens under the new key")
	code, out = b.call(t, http.MethodGet, "/members", st.admin, nil)
	require.Equal(t, http.StatusOK, code, "%v", out)
}

// TestSharedKEKReset: svc kek reset on a team whose members live in the
// database drops the members' TOTP secrets from the database's members
// document (they enroll again), and the brokers start on the new key.
func TestSharedKEKReset(t *testing.T) {
	st := startSharedTeam(t)
	st.create(t, st.a, "alice")
	code, out := st.a.call(t, http.MethodPost, "/members/alice/enroll-totp", st.admin, map[string]any{})
	require.Equal(t, http.StatusOK, code, "%v", out)
	secret := out["totpSecret"].(string)
	require.NoError(t, st.a.stop())
	require.NoError(t, st.b.stop())

	// The key is lost: another one stands in the broker's key file.
	lost, err := kek.Generate()
	require.NoError(t, err)
	require.NoError(t, kek.Replace(st.cfgPath+".kek", lost))
	stdout, stderr, err := runMaint(t, "kek", "reset", "--yes", "--config-path", st.cfgPath, "--db-url", st.dbURL,
		"--new-kek-file", filepath.Join(t.TempDir(), "new.kek"), "--generate")
	require.NoError(t, err, "stderr: %s", stderr)
	require.Contains(t, stdout, "the TOTP secret of alice")
	require.Contains(t, stdout, "1 TOTP secrets")
	doc := storedMembersFile(t, st.dbURL)
	for _, m := range doc.Store.Members {
		require.False(t, m.HasTOTP(), "%s keeps a TOTP secret", m.Name)
	}

	a := startServe(t, st.args...)
	require.Equal(t, http.StatusUnauthorized, login(t, a, currentCode(t, secret)), "the dropped secret opens nothing")
	code, out = a.call(t, http.MethodPost, "/members/alice/enroll-totp", st.admin, map[string]any{})
	require.Equal(t, http.StatusOK, code, "alice enrolls again: %v", out)
}
