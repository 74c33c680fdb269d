package server

import (
	"context"
	"crypto/rand"
	"svc/server/apierr"
	"testing"

	"github.com/stretchr/testify/require"

	apiv1 "svc/gen/svc/v1"
	"svc/server/auth"
	"svc/server/kek"
	"svc/server/secrets"
	"svc/store"
)

// registryEnv is a running server over an in-memory store with members
// admin (secrets.manage, tools.manage), alice and bob, and a KEK unless
// noKEK. The secrets and tool sources services are tested in their
// packages; this tests what the root wires around them.
type registryEnv struct {
	srv     *Server
	st      store.Store
	secrets *secrets.Service
	broker  *Broker
	perms   map[string][]string
}

func newRegistryEnv(t *testing.T, noKEK bool) *registryEnv {
	t.Helper()
	return newRegistryEnvWith(t, noKEK, nil)
}

// newRegistryEnvWith is newRegistryEnv with an activity store (nil: none).
func newRegistryEnvWith(t *testing.T, noKEK bool, act store.ActivityStore) *registryEnv {
	t.Helper()
	perms := map[string][]string{"admin": {auth.SecretsManage, auth.ToolsManage, auth.MembersManage}, "alice": {}, "bob": {}}
	st := mustMemStore(t)
	var k *kek.KEK
	if !noKEK {
		key := make([]byte, kek.KeySize)
		_, err := rand.Read(key)
		require.NoError(t, err)
		k, err = kek.New(key)
		require.NoError(t, err)
	}
	srv := startTestServer(t, st, perms, Deps{KEK: k, Activity: act})
	return &registryEnv{srv: srv, st: st, secrets: srv.secrets, broker: newBroker(srv.core, nil), perms: perms}
}

func (e *registryEnv) as(name string) context.Context {
	return auth.WithPrincipal(context.Background(), &auth.Principal{Member: name, Permissions: e.perms[name]})
}

func (e *registryEnv) createSecret(t *testing.T, slug, env string, all bool) {
	t.Helper()
	_, err := e.secrets.CreateSecret(e.as("admin"), &apiv1.CreateSecretRequest{Slug: slug, EnvName: env, AllMembers: &all})
	require.NoError(t, err)
}

func TestRegistryThreadHistory(t *testing.T) {
	e := newRegistryEnv(t, false)
	admin := e.as("admin")
	e.createSecret(t, "gh", "GH_TOKEN", false)
	_, err := e.secrets.AddSecretBinding(admin, &apiv1.AddSecretBindingRequest{Slug: "gh", Member: "bob"})
	require.NoError(t, err)

	h, err := e.broker.History(admin, &apiv1.HistoryRequest{Thread: "secret:gh"})
	require.NoError(t, err)
	require.Len(t, h.GetMessages(), 2)
	h, err = e.broker.History(e.as("bob"), &apiv1.HistoryRequest{Thread: "secret:gh"})
	require.NoError(t, err)
	require.Len(t, h.GetMessages(), 1, "bob sees what was addressed to him")
	_, err = e.broker.History(e.as("alice"), &apiv1.HistoryRequest{Thread: "secret:gh"})
	requireCode(t, err, apierr.CodeForbidden)
	_, err = e.broker.History(e.as("alice"), &apiv1.HistoryRequest{Thread: "tool:gh"})
	requireCode(t, err, apierr.CodeForbidden)
	h, err = e.broker.History(admin, &apiv1.HistoryRequest{Thread: "tool:none"})
	require.NoError(t, err)
	require.Empty(t, h.GetMessages())
}
