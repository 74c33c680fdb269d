package server

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"

	apiv1 "svc/gen/svc/v1"
	"svc/server/auth"
	"svc/server/kek"
	"svc/server/secrets"
	"svc/server/toolsources"
	"svc/store"
)

// registryEnv is a running server over an in-memory store with members
// admin (secrets.manage, tools.manage), alice and bob, a KEK unless
// noKEK, and a fake tool engine.
type registryEnv struct {
	srv     *Server
	st      store.Store
	secrets *secrets.Service
	tools   *toolsources.Service
	broker  *Broker
	engine  *fakeEngine
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
	eng := newFakeEngine()
	srv := startTestServer(t, st, perms, Deps{KEK: k, Activity: act}, WithToolEngine(eng))
	return &registryEnv{
		srv: srv, st: st, secrets: srv.secrets, tools: srv.tools,
		broker: newBroker(srv.core, nil), engine: eng, perms: perms,
	}
}

func (e *registryEnv) as(name string) context.Context {
	return auth.WithPrincipal(context.Background(), &auth.Principal{Member: name, Permissions: e.perms[name]})
}

// events returns the registry events member received on thread, oldest
// first, as "event member" ("created ", "binding_added bob").
func (e *registryEnv) events(t *testing.T, member, thread string) []string {
	t.Helper()
	msgs, err := e.st.MessagesFor(context.Background(), member, 0, 500)
	require.NoError(t, err)
	var out []string
	for _, m := range msgs {
		if m.Thread != thread {
			continue
		}
		var d struct{ Event, Member string }
		require.NoError(t, json.Unmarshal(m.Data, &d))
		out = append(out, d.Event+" "+d.Member)
	}
	return out
}

// allMessages are every message of the store as JSON, for leak checks.
func (e *registryEnv) allMessages(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, m := range []string{"admin", "alice", "bob"} {
		msgs, err := e.st.MessagesFor(context.Background(), m, 0, 1000)
		require.NoError(t, err)
		for _, x := range msgs {
			j, err := json.Marshal(x)
			require.NoError(t, err)
			b.Write(j)
		}
	}
	return b.String()
}

func (e *registryEnv) createSecret(t *testing.T, slug, env string, all bool) {
	t.Helper()
	_, err := e.secrets.CreateSecret(e.as("admin"), &apiv1.CreateSecretRequest{Slug: slug, EnvName: env, AllMembers: &all})
	require.NoError(t, err)
}

func TestSecretViews(t *testing.T) {
	e := newRegistryEnv(t, false)
	e.createSecret(t, "gh", "GH_TOKEN", false)
	_, err := e.secrets.AddSecretBinding(e.as("admin"), &apiv1.AddSecretBindingRequest{Slug: "gh", Member: "bob"})
	require.NoError(t, err)
	_, err = e.secrets.SetSecretValue(e.as("admin"), &apiv1.SetSecretValueRequest{Slug: "gh", Value: "s3cr3t-gh"})
	require.NoError(t, err)

	for _, tc := range []struct {
		name, viewer string
		bound        bool
		members      []string // nil: boundMembers absent
	}{
		{"manager sees the bindings", "admin", false, []string{"bob"}},
		{"bound member", "bob", true, nil},
		{"other member", "alice", false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.secrets.GetSecret(e.as(tc.viewer), &apiv1.GetSecretRequest{Slug: "gh"})
			require.NoError(t, err)
			s := got.GetSecret()
			require.Equal(t, tc.bound, s.GetBound())
			require.True(t, s.GetHasValue())
			if tc.members == nil {
				require.Nil(t, s.GetBoundMembers())
			} else {
				require.Equal(t, tc.members, namesOf(s.GetBoundMembers().AsSlice()))
			}
			list, err := e.secrets.ListSecrets(e.as(tc.viewer), &apiv1.ListSecretsRequest{})
			require.NoError(t, err)
			require.Len(t, list.GetSecrets(), 1)
			require.Equal(t, tc.bound, list.GetSecrets()[0].GetBound())
			require.Nil(t, list.GetSecrets()[0].GetBoundMembers(), "summaries never list bindings")
			b, err := protojson.Marshal(got)
			require.NoError(t, err)
			require.NotContains(t, string(b), "s3cr3t-gh")
		})
	}
	_, err = e.secrets.GetSecret(e.as("bob"), &apiv1.GetSecretRequest{Slug: "nope"})
	requireCode(t, err, CodeNotFound)
}

func namesOf(vs []any) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.(string)
	}
	return out
}

func TestSecretCreateRefusals(t *testing.T) {
	e := newRegistryEnv(t, false)
	e.createSecret(t, "gh", "GH_TOKEN", false)
	e.createSecret(t, "npm", "NPM_TOKEN", false)
	for _, tc := range []struct {
		name string
		req  *apiv1.CreateSecretRequest
		code Code
	}{
		{"taken slug", &apiv1.CreateSecretRequest{Slug: "gh", EnvName: "OTHER"}, CodeConflict},
		{"taken envName", &apiv1.CreateSecretRequest{Slug: "other", EnvName: "GH_TOKEN"}, CodeConflict},
		{"reserved envName", &apiv1.CreateSecretRequest{Slug: "p", EnvName: "PATH"}, CodeBadRequest},
		{"reserved prefix", &apiv1.CreateSecretRequest{Slug: "p", EnvName: "LD_PRELOAD"}, CodeBadRequest},
		{"malformed envName", &apiv1.CreateSecretRequest{Slug: "p", EnvName: "lower"}, CodeBadRequest},
		{"malformed slug", &apiv1.CreateSecretRequest{Slug: "Bad_Slug", EnvName: "X"}, CodeBadRequest},
		{"description too long", &apiv1.CreateSecretRequest{Slug: "p", EnvName: "X", Description: ptr(strings.Repeat("d", maxRegistryDescription+1))}, CodeBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.secrets.CreateSecret(e.as("admin"), tc.req)
			requireCode(t, err, tc.code)
		})
	}
	_, err := e.secrets.UpdateSecret(e.as("admin"), &apiv1.UpdateSecretRequest{Slug: "npm", EnvName: ptr("GH_TOKEN")})
	requireCode(t, err, CodeConflict)
	_, err = e.secrets.UpdateSecret(e.as("admin"), &apiv1.UpdateSecretRequest{Slug: "npm", EnvName: ptr("HOME")})
	requireCode(t, err, CodeBadRequest)
	list, err := e.secrets.ListSecrets(e.as("admin"), &apiv1.ListSecretsRequest{})
	require.NoError(t, err)
	require.Len(t, list.GetSecrets(), 2, "nothing stored on refusal")
	require.Equal(t, "NPM_TOKEN", list.GetSecrets()[1].GetEnvName())
}

func TestSecretValueLimits(t *testing.T) {
	e := newRegistryEnv(t, false)
	e.createSecret(t, "gh", "GH_TOKEN", true)
	_, err := e.secrets.SetSecretValue(e.as("admin"), &apiv1.SetSecretValueRequest{Slug: "gh", Value: strings.Repeat("x", secrets.MaxValue+1)})
	requireCode(t, err, CodePayloadTooLarge)
	_, err = e.secrets.SetSecretValue(e.as("admin"), &apiv1.SetSecretValueRequest{Slug: "gh", Value: ""})
	requireCode(t, err, CodeBadRequest)
	_, err = e.secrets.SetSecretValue(e.as("admin"), &apiv1.SetSecretValueRequest{Slug: "nope", Value: "x"})
	requireCode(t, err, CodeNotFound)
	got, err := e.secrets.SetSecretValue(e.as("admin"), &apiv1.SetSecretValueRequest{Slug: "gh", Value: strings.Repeat("x", secrets.MaxValue)})
	require.NoError(t, err)
	require.True(t, got.GetSecret().GetHasValue())
	env, err := e.secrets.ResolveSecrets(e.as("bob"), &apiv1.ResolveSecretsRequest{})
	require.NoError(t, err)
	require.Len(t, env.GetEnv()["GH_TOKEN"], secrets.MaxValue)
}

func TestSecretsWithoutKEK(t *testing.T) {
	e := newRegistryEnv(t, true)
	e.createSecret(t, "gh", "GH_TOKEN", true)
	_, err := e.secrets.SetSecretValue(e.as("admin"), &apiv1.SetSecretValueRequest{Slug: "gh", Value: "v"})
	requireCode(t, err, CodeUnavailable)
	_, err = e.secrets.ResolveSecrets(e.as("bob"), &apiv1.ResolveSecretsRequest{})
	requireCode(t, err, CodeUnavailable)
	got, err := e.secrets.GetSecret(e.as("admin"), &apiv1.GetSecretRequest{Slug: "gh"})
	require.NoError(t, err)
	require.False(t, got.GetSecret().GetHasValue(), "nothing stored on refusal")
	require.Equal(t, []string{"created "}, e.events(t, "admin", "secret:gh"), "no event for a refused change")
}

func TestResolveSecrets(t *testing.T) {
	e := newRegistryEnv(t, false)
	admin := e.as("admin")
	set := func(slug, v string) {
		_, err := e.secrets.SetSecretValue(admin, &apiv1.SetSecretValueRequest{Slug: slug, Value: v})
		require.NoError(t, err)
	}
	e.createSecret(t, "everyone", "EVERYONE", true)
	set("everyone", "v-everyone")
	e.createSecret(t, "bobs", "BOBS", false)
	set("bobs", "v-bobs")
	_, err := e.secrets.AddSecretBinding(admin, &apiv1.AddSecretBindingRequest{Slug: "bobs", Member: "bob"})
	require.NoError(t, err)
	e.createSecret(t, "valueless", "VALUELESS", true)
	e.createSecret(t, "off", "OFF", true)
	set("off", "v-off")
	_, err = e.secrets.UpdateSecret(admin, &apiv1.UpdateSecretRequest{Slug: "off", Enabled: ptr(false)})
	require.NoError(t, err)

	for _, tc := range []struct {
		member string
		want   map[string]string
	}{
		{"bob", map[string]string{"EVERYONE": "v-everyone", "BOBS": "v-bobs"}},
		{"alice", map[string]string{"EVERYONE": "v-everyone"}},
		{"admin", map[string]string{"EVERYONE": "v-everyone"}},
	} {
		t.Run(tc.member, func(t *testing.T) {
			got, err := e.secrets.ResolveSecrets(e.as(tc.member), &apiv1.ResolveSecretsRequest{})
			require.NoError(t, err)
			require.Equal(t, tc.want, got.GetEnv())
		})
	}
	require.NotContains(t, e.allMessages(t), "v-", "no event carries a value")
}

func TestSecretEventsAndRecipients(t *testing.T) {
	e := newRegistryEnv(t, false)
	admin := e.as("admin")
	e.createSecret(t, "gh", "GH_TOKEN", false)
	_, err := e.secrets.AddSecretBinding(admin, &apiv1.AddSecretBindingRequest{Slug: "gh", Member: "bob"})
	require.NoError(t, err)
	_, err = e.secrets.AddSecretBinding(admin, &apiv1.AddSecretBindingRequest{Slug: "gh", Member: "bob"})
	require.NoError(t, err, "binding twice is no change")
	_, err = e.secrets.AddSecretBinding(admin, &apiv1.AddSecretBindingRequest{Slug: "gh", Member: "ghost"})
	requireCode(t, err, CodeBadRequest)
	_, err = e.secrets.SetSecretValue(admin, &apiv1.SetSecretValueRequest{Slug: "gh", Value: "v-secret"})
	require.NoError(t, err)
	_, err = e.secrets.RemoveSecretBinding(admin, &apiv1.RemoveSecretBindingRequest{Slug: "gh", Name: "bob"})
	require.NoError(t, err)
	_, err = e.secrets.RemoveSecretBinding(admin, &apiv1.RemoveSecretBindingRequest{Slug: "gh", Name: "bob"})
	requireCode(t, err, CodeNotFound)
	_, err = e.secrets.UpdateSecret(admin, &apiv1.UpdateSecretRequest{Slug: "gh", AllMembers: ptr(true)})
	require.NoError(t, err)
	_, err = e.secrets.DeleteSecretValue(admin, &apiv1.DeleteSecretValueRequest{Slug: "gh"})
	require.NoError(t, err)
	_, err = e.secrets.DeleteSecretValue(admin, &apiv1.DeleteSecretValueRequest{Slug: "gh"})
	requireCode(t, err, CodeNotFound)
	_, err = e.secrets.DeleteSecret(admin, &apiv1.DeleteSecretRequest{Slug: "gh"})
	require.NoError(t, err)
	_, err = e.secrets.DeleteSecret(admin, &apiv1.DeleteSecretRequest{Slug: "gh"})
	requireCode(t, err, CodeNotFound)

	all := []string{"created ", "binding_added bob", "value_set ", "binding_removed bob", "updated ", "value_deleted ", "deleted "}
	require.Equal(t, all, e.events(t, "admin", "secret:gh"))
	require.Equal(t, []string{"binding_added bob", "value_set ", "binding_removed bob", "updated ", "value_deleted ", "deleted "}, e.events(t, "bob", "secret:gh"),
		"bob hears of it from his binding on, is told of his unbinding, and hears again once every member may use it")
	require.Equal(t, []string{"updated ", "value_deleted ", "deleted "}, e.events(t, "alice", "secret:gh"))
	require.NotContains(t, e.allMessages(t), "v-secret")

	// Recreated, it has no value and no bindings.
	e.createSecret(t, "gh", "GH_TOKEN", false)
	got, err := e.secrets.GetSecret(admin, &apiv1.GetSecretRequest{Slug: "gh"})
	require.NoError(t, err)
	require.False(t, got.GetSecret().GetHasValue())
	require.Empty(t, got.GetSecret().GetBoundMembers().GetValues())
}

// Who is bound is the managers' to know: a binding change names its
// member only to the managers and that member.
func TestRegistryBindingEventsNameNoOtherMember(t *testing.T) {
	e := newRegistryEnv(t, false)
	admin := e.as("admin")
	e.createSecret(t, "gh", "GH_TOKEN", false)
	for _, m := range []string{"alice", "bob"} {
		_, err := e.secrets.AddSecretBinding(admin, &apiv1.AddSecretBindingRequest{Slug: "gh", Member: m})
		require.NoError(t, err)
	}
	_, err := e.secrets.RemoveSecretBinding(admin, &apiv1.RemoveSecretBindingRequest{Slug: "gh", Name: "bob"})
	require.NoError(t, err)
	require.Equal(t, []string{"created ", "binding_added alice", "binding_added bob", "binding_removed bob"}, e.events(t, "admin", "secret:gh"))
	require.Equal(t, []string{"binding_added alice", "binding_added ", "binding_removed "}, e.events(t, "alice", "secret:gh"))
	require.Equal(t, []string{"binding_added bob", "binding_removed bob"}, e.events(t, "bob", "secret:gh"))
	msgs, err := e.st.MessagesFor(context.Background(), "alice", 0, 100)
	require.NoError(t, err)
	for _, m := range msgs {
		require.NotContains(t, m.Body, "bob", "alice is not told who else is bound")
	}
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
	requireCode(t, err, CodeForbidden)
	_, err = e.broker.History(e.as("alice"), &apiv1.HistoryRequest{Thread: "tool:gh"})
	requireCode(t, err, CodeForbidden)
	h, err = e.broker.History(admin, &apiv1.HistoryRequest{Thread: "tool:none"})
	require.NoError(t, err)
	require.Empty(t, h.GetMessages())
}
