package secrets

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"

	apiv1 "svc/gen/svc/v1"
	"svc/server/apierr"
	"svc/server/auth"
	"svc/server/kek"
	"svc/server/registry"
	"svc/store"
	"svc/store/sqlite"
)

// env is the secrets service over an in-memory store with members admin
// (secrets.manage), alice and bob, a KEK unless noKEK, and a registry kit
// whose committer stores each change's event messages in the change's
// transaction, as the broker's does.
type env struct {
	st      store.Store
	secrets *Service
	perms   map[string][]string
	// changed counts the changes the redactors were told of.
	changed atomic.Int64
}

func newEnv(t *testing.T, noKEK bool) *env {
	t.Helper()
	ctx := context.Background()
	perms := map[string][]string{"admin": {auth.SecretsManage, auth.ToolsManage, auth.MembersManage}, "alice": {}, "bob": {}}
	st, err := sqlite.Open(ctx, "")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	names := slices.Sorted(maps.Keys(perms))
	for _, n := range names {
		require.NoError(t, st.PutMember(ctx, store.Member{Name: n, Permissions: perms[n], CreatedAt: time.Now(), UpdatedAt: time.Now()}))
	}
	var k *kek.KEK
	if !noKEK {
		key := make([]byte, kek.KeySize)
		_, err := rand.Read(key)
		require.NoError(t, err)
		k, err = kek.New(key)
		require.NoError(t, err)
	}
	kit := registry.New(registry.Deps{
		Commit: func(ctx context.Context, apply func(ctx context.Context, tx store.Tx) ([]store.Message, error)) error {
			return st.WithTx(ctx, func(tx store.Tx) error {
				msgs, err := apply(ctx, tx)
				if err != nil || len(msgs) == 0 {
					return err
				}
				for i := range msgs {
					msgs[i].CreatedAt = time.Now()
				}
				_, err = tx.AppendMessages(ctx, msgs)
				return err
			})
		},
		Members: func() []string { return names },
		Holders: func(leaf string) []string {
			var out []string
			for _, n := range names {
				if slices.Contains(perms[n], leaf) {
					out = append(out, n)
				}
			}
			return out
		},
		KEK: k,
	})
	e := &env{st: st, perms: perms}
	e.secrets = New(Deps{Store: st, Registry: kit, Changed: func() { e.changed.Add(1) }, Now: time.Now, Log: slog.New(slog.DiscardHandler)})
	return e
}

func (e *env) as(name string) context.Context {
	return auth.WithPrincipal(context.Background(), &auth.Principal{Member: name, Permissions: e.perms[name]})
}

// events returns the registry events member received on thread, oldest
// first, as "event member" ("created ", "binding_added bob").
func (e *env) events(t *testing.T, member, thread string) []string {
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
func (e *env) allMessages(t *testing.T) string {
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

// requireCode asserts err is (or wraps) the domain error code.
func requireCode(t *testing.T, err error, code apierr.Code) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, code, apierr.Classify(err).Code, "%v", err)
}

func ptr[T any](v T) *T { return &v }

func (e *env) createSecret(t *testing.T, slug, env string, all bool) {
	t.Helper()
	_, err := e.secrets.CreateSecret(e.as("admin"), &apiv1.CreateSecretRequest{Slug: slug, EnvName: env, AllMembers: &all})
	require.NoError(t, err)
}

func TestSecretViews(t *testing.T) {
	e := newEnv(t, false)
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
	requireCode(t, err, apierr.CodeNotFound)
}

func namesOf(vs []any) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.(string)
	}
	return out
}

func TestSecretCreateRefusals(t *testing.T) {
	e := newEnv(t, false)
	e.createSecret(t, "gh", "GH_TOKEN", false)
	e.createSecret(t, "npm", "NPM_TOKEN", false)
	for _, tc := range []struct {
		name string
		req  *apiv1.CreateSecretRequest
		code apierr.Code
	}{
		{"taken slug", &apiv1.CreateSecretRequest{Slug: "gh", EnvName: "OTHER"}, apierr.CodeConflict},
		{"taken envName", &apiv1.CreateSecretRequest{Slug: "other", EnvName: "GH_TOKEN"}, apierr.CodeConflict},
		{"reserved envName", &apiv1.CreateSecretRequest{Slug: "p", EnvName: "PATH"}, apierr.CodeBadRequest},
		{"reserved prefix", &apiv1.CreateSecretRequest{Slug: "p", EnvName: "LD_PRELOAD"}, apierr.CodeBadRequest},
		{"malformed envName", &apiv1.CreateSecretRequest{Slug: "p", EnvName: "lower"}, apierr.CodeBadRequest},
		{"malformed slug", &apiv1.CreateSecretRequest{Slug: "Bad_Slug", EnvName: "X"}, apierr.CodeBadRequest},
		{"description too long", &apiv1.CreateSecretRequest{Slug: "p", EnvName: "X", Description: ptr(strings.Repeat("d", registry.MaxDescription+1))}, apierr.CodeBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.secrets.CreateSecret(e.as("admin"), tc.req)
			requireCode(t, err, tc.code)
		})
	}
	_, err := e.secrets.UpdateSecret(e.as("admin"), &apiv1.UpdateSecretRequest{Slug: "npm", EnvName: ptr("GH_TOKEN")})
	requireCode(t, err, apierr.CodeConflict)
	_, err = e.secrets.UpdateSecret(e.as("admin"), &apiv1.UpdateSecretRequest{Slug: "npm", EnvName: ptr("HOME")})
	requireCode(t, err, apierr.CodeBadRequest)
	list, err := e.secrets.ListSecrets(e.as("admin"), &apiv1.ListSecretsRequest{})
	require.NoError(t, err)
	require.Len(t, list.GetSecrets(), 2, "nothing stored on refusal")
	require.Equal(t, "NPM_TOKEN", list.GetSecrets()[1].GetEnvName())
}

func TestSecretValueLimits(t *testing.T) {
	e := newEnv(t, false)
	e.createSecret(t, "gh", "GH_TOKEN", true)
	_, err := e.secrets.SetSecretValue(e.as("admin"), &apiv1.SetSecretValueRequest{Slug: "gh", Value: strings.Repeat("x", MaxValue+1)})
	requireCode(t, err, apierr.CodePayloadTooLarge)
	_, err = e.secrets.SetSecretValue(e.as("admin"), &apiv1.SetSecretValueRequest{Slug: "gh", Value: ""})
	requireCode(t, err, apierr.CodeBadRequest)
	_, err = e.secrets.SetSecretValue(e.as("admin"), &apiv1.SetSecretValueRequest{Slug: "nope", Value: "x"})
	requireCode(t, err, apierr.CodeNotFound)
	got, err := e.secrets.SetSecretValue(e.as("admin"), &apiv1.SetSecretValueRequest{Slug: "gh", Value: strings.Repeat("x", MaxValue)})
	require.NoError(t, err)
	require.True(t, got.GetSecret().GetHasValue())
	env, err := e.secrets.ResolveSecrets(e.as("bob"), &apiv1.ResolveSecretsRequest{})
	require.NoError(t, err)
	require.Len(t, env.GetEnv()["GH_TOKEN"], MaxValue)
}

func TestSecretsWithoutKEK(t *testing.T) {
	e := newEnv(t, true)
	e.createSecret(t, "gh", "GH_TOKEN", true)
	_, err := e.secrets.SetSecretValue(e.as("admin"), &apiv1.SetSecretValueRequest{Slug: "gh", Value: "v"})
	requireCode(t, err, apierr.CodeUnavailable)
	_, err = e.secrets.ResolveSecrets(e.as("bob"), &apiv1.ResolveSecretsRequest{})
	requireCode(t, err, apierr.CodeUnavailable)
	got, err := e.secrets.GetSecret(e.as("admin"), &apiv1.GetSecretRequest{Slug: "gh"})
	require.NoError(t, err)
	require.False(t, got.GetSecret().GetHasValue(), "nothing stored on refusal")
	require.Equal(t, []string{"created "}, e.events(t, "admin", "secret:gh"), "no event for a refused change")
}

func TestResolveSecrets(t *testing.T) {
	e := newEnv(t, false)
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
	e := newEnv(t, false)
	admin := e.as("admin")
	e.createSecret(t, "gh", "GH_TOKEN", false)
	_, err := e.secrets.AddSecretBinding(admin, &apiv1.AddSecretBindingRequest{Slug: "gh", Member: "bob"})
	require.NoError(t, err)
	_, err = e.secrets.AddSecretBinding(admin, &apiv1.AddSecretBindingRequest{Slug: "gh", Member: "bob"})
	require.NoError(t, err, "binding twice is no change")
	_, err = e.secrets.AddSecretBinding(admin, &apiv1.AddSecretBindingRequest{Slug: "gh", Member: "ghost"})
	requireCode(t, err, apierr.CodeBadRequest)
	_, err = e.secrets.SetSecretValue(admin, &apiv1.SetSecretValueRequest{Slug: "gh", Value: "v-secret"})
	require.NoError(t, err)
	_, err = e.secrets.RemoveSecretBinding(admin, &apiv1.RemoveSecretBindingRequest{Slug: "gh", Name: "bob"})
	require.NoError(t, err)
	_, err = e.secrets.RemoveSecretBinding(admin, &apiv1.RemoveSecretBindingRequest{Slug: "gh", Name: "bob"})
	requireCode(t, err, apierr.CodeNotFound)
	_, err = e.secrets.UpdateSecret(admin, &apiv1.UpdateSecretRequest{Slug: "gh", AllMembers: ptr(true)})
	require.NoError(t, err)
	_, err = e.secrets.DeleteSecretValue(admin, &apiv1.DeleteSecretValueRequest{Slug: "gh"})
	require.NoError(t, err)
	_, err = e.secrets.DeleteSecretValue(admin, &apiv1.DeleteSecretValueRequest{Slug: "gh"})
	requireCode(t, err, apierr.CodeNotFound)
	_, err = e.secrets.DeleteSecret(admin, &apiv1.DeleteSecretRequest{Slug: "gh"})
	require.NoError(t, err)
	_, err = e.secrets.DeleteSecret(admin, &apiv1.DeleteSecretRequest{Slug: "gh"})
	requireCode(t, err, apierr.CodeNotFound)

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
	e := newEnv(t, false)
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

// Every change of a secret tells the redactors, which hold the values
// members may use; a read does not.
func TestSecretChangesTellTheRedactors(t *testing.T) {
	e := newEnv(t, false)
	admin := e.as("admin")
	e.createSecret(t, "gh", "GH_TOKEN", true)
	before := e.changed.Load()
	_, err := e.secrets.SetSecretValue(admin, &apiv1.SetSecretValueRequest{Slug: "gh", Value: "v"})
	require.NoError(t, err)
	require.Equal(t, before+1, e.changed.Load())
	_, err = e.secrets.GetSecret(admin, &apiv1.GetSecretRequest{Slug: "gh"})
	require.NoError(t, err)
	_, err = e.secrets.ResolveSecrets(e.as("bob"), &apiv1.ResolveSecretsRequest{})
	require.NoError(t, err)
	require.Equal(t, before+1, e.changed.Load())
	_, err = e.secrets.DeleteSecretValue(admin, &apiv1.DeleteSecretValueRequest{Slug: "gh"})
	require.NoError(t, err)
	_, err = e.secrets.UpdateSecret(admin, &apiv1.UpdateSecretRequest{Slug: "gh", AllMembers: ptr(false)})
	require.NoError(t, err)
	require.Equal(t, before+3, e.changed.Load())
}
