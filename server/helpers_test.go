package server

import (
	"context"
	"crypto/rand"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"svc/server/apierr"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/server/auth"
	"svc/server/kek"
	"svc/server/teamconfig"
	"svc/store"
	"svc/store/sqlite"
)

const testTOTPSecret = "JBSWY3DPEHPK3PXP"

// testBroker is a Broker with the core it runs on, so a test can reach the
// store and the team.
type testBroker struct {
	*Broker
	*core
}

// mustBroker returns a Broker over an in-memory store with members admin
// (TOTP enrolled, members.manage) and bob (plain), and its config path. Its
// committers do not run: calls that commit through them wait.
func mustBroker(t testing.TB) (*testBroker, string) {
	t.Helper()
	ctx := context.Background()
	key := make([]byte, kek.KeySize)
	_, err := rand.Read(key)
	require.NoError(t, err)
	k, err := kek.New(key)
	require.NoError(t, err)
	sealed, err := teamconfig.SealTOTP(k, "admin", testTOTPSecret)
	require.NoError(t, err)
	f := &teamconfig.File{Store: teamconfig.Store{Members: []teamconfig.Member{
		{Name: "admin", Permissions: []string{auth.MembersManage}, TOTPSecret: sealed},
		{Name: "bob", Permissions: []string{}},
	}}}
	require.NoError(t, f.Validate())
	path := filepath.Join(t.TempDir(), "svc.json")
	require.NoError(t, teamconfig.Save(path, f))
	st, err := sqlite.Open(ctx, "")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	team, err := NewTeam(ctx, path, f, st, time.Now)
	require.NoError(t, err)
	s := New(Deps{Store: st, Team: team, KEK: k, Version: "test"})
	return &testBroker{Broker: newBroker(s.core, nil), core: s.core}, path
}

// startTestServer runs a server over st whose team is perms (member ->
// permission leaves), with its committers running until the test ends.
func startTestServer(t testing.TB, st store.Store, perms map[string][]string, d Deps, opts ...Option) *Server {
	t.Helper()
	return startTestServerFile(t, st, &teamconfig.File{}, perms, d, opts...)
}

// startTestServerFile is startTestServer over the team config f (its
// settings blocks), with the members of perms added.
func startTestServerFile(t testing.TB, st store.Store, f *teamconfig.File, perms map[string][]string, d Deps, opts ...Option) *Server {
	t.Helper()
	ctx := context.Background()
	for _, n := range slices.Sorted(maps.Keys(perms)) {
		f.Store.Members = append(f.Store.Members, teamconfig.Member{Name: n, Permissions: perms[n]})
	}
	require.NoError(t, f.Validate())
	path := filepath.Join(t.TempDir(), "svc.json")
	require.NoError(t, teamconfig.Save(path, f))
	team, err := NewTeam(ctx, path, f, st, time.Now)
	require.NoError(t, err)
	d.Store, d.Team, d.Version = st, team, "test"
	srv := New(d, opts...)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = srv.Run(runCtx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return srv
}

func mustMemStore(t testing.TB) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), "")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func ptr[T any](v T) *T { return &v }

// requireCode asserts that err is answered with code.
func requireCode(t *testing.T, err error, code apierr.Code, msg ...any) {
	t.Helper()
	require.Error(t, err, msg...)
	require.Equal(t, code, apierr.Render(err).Body.Error, "%v %v", err, msg)
}
