package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	apiv1 "svc/gen/svc/v1"
)

func init() {
	for name, spec := range map[string]rpcSpec{
		"ListSecrets":         {http.MethodGet, "/secrets", http.StatusOK, "", unaryOn(apiv1.NewSecretsClient, apiv1.SecretsClient.ListSecrets)},
		"CreateSecret":        {http.MethodPost, "/secrets", http.StatusCreated, "secret", unaryOn(apiv1.NewSecretsClient, apiv1.SecretsClient.CreateSecret)},
		"GetSecret":           {http.MethodGet, "/secrets/{slug}", http.StatusOK, "secret", unaryOn(apiv1.NewSecretsClient, apiv1.SecretsClient.GetSecret)},
		"ResolveSecrets":      {http.MethodGet, "/secrets/resolve", http.StatusOK, "", unaryOn(apiv1.NewSecretsClient, apiv1.SecretsClient.ResolveSecrets)},
		"UpdateSecret":        {http.MethodPatch, "/secrets/{slug}", http.StatusOK, "secret", unaryOn(apiv1.NewSecretsClient, apiv1.SecretsClient.UpdateSecret)},
		"DeleteSecret":        {http.MethodDelete, "/secrets/{slug}", http.StatusNoContent, "", unaryOn(apiv1.NewSecretsClient, apiv1.SecretsClient.DeleteSecret)},
		"SetSecretValue":      {http.MethodPut, "/secrets/{slug}/value", http.StatusOK, "secret", unaryOn(apiv1.NewSecretsClient, apiv1.SecretsClient.SetSecretValue)},
		"DeleteSecretValue":   {http.MethodDelete, "/secrets/{slug}/value", http.StatusNoContent, "", unaryOn(apiv1.NewSecretsClient, apiv1.SecretsClient.DeleteSecretValue)},
		"AddSecretBinding":    {http.MethodPost, "/secrets/{slug}/bindings", http.StatusOK, "secret", unaryOn(apiv1.NewSecretsClient, apiv1.SecretsClient.AddSecretBinding)},
		"RemoveSecretBinding": {http.MethodDelete, "/secrets/{slug}/bindings/{name}", http.StatusNoContent, "", unaryOn(apiv1.NewSecretsClient, apiv1.SecretsClient.RemoveSecretBinding)},
	} {
		rpcs[name] = spec
	}
}

// TestE2ESecretGates calls every secrets route as nobody, as a plain
// member and as a secrets.manage holder.
func TestE2ESecretGates(t *testing.T) {
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		bob := bearer(createMember(t, d, admin, "bob"))
		mustCall(t, d, admin, "CreateSecret", obj{"slug": "gh", "envName": "GH_TOKEN"})
		manageOnly := []struct {
			op  string
			req obj
		}{
			{"CreateSecret", obj{"slug": "x", "envName": "X"}},
			{"UpdateSecret", obj{"slug": "gh", "enabled": false}},
			{"DeleteSecret", obj{"slug": "gh"}},
			{"SetSecretValue", obj{"slug": "gh", "value": "v"}},
			{"DeleteSecretValue", obj{"slug": "gh"}},
			{"AddSecretBinding", obj{"slug": "gh", "member": "bob"}},
			{"RemoveSecretBinding", obj{"slug": "gh", "name": "bob"}},
		}
		anyMember := []struct {
			op  string
			req obj
		}{
			{"ListSecrets", nil}, {"GetSecret", obj{"slug": "gh"}}, {"ResolveSecrets", nil},
		}
		for _, c := range append(manageOnly, anyMember...) {
			mustFail(t, d, anonymous, c.op, c.req, "unauthenticated")
		}
		for _, c := range manageOnly {
			mustFail(t, d, bob, c.op, c.req, "forbidden")
		}
		for _, c := range anyMember {
			mustCall(t, d, bob, c.op, c.req)
		}
		got := mustCall(t, d, bob, "GetSecret", obj{"slug": "gh"})
		require.NotContains(t, got, "boundMembers", "boundMembers for secrets.manage only")
		got = mustCall(t, d, admin, "GetSecret", obj{"slug": "gh"})
		require.Equal(t, []any{}, got["boundMembers"])
		// The admin's chain of changes, each answered as the table says.
		mustCall(t, d, admin, "UpdateSecret", obj{"slug": "gh", "description": "GitHub"})
		mustCall(t, d, admin, "SetSecretValue", obj{"slug": "gh", "value": "v"})
		mustCall(t, d, admin, "AddSecretBinding", obj{"slug": "gh", "member": "bob"})
		mustCall(t, d, admin, "RemoveSecretBinding", obj{"slug": "gh", "name": "bob"})
		mustFail(t, d, admin, "RemoveSecretBinding", obj{"slug": "gh", "name": "bob"}, "not_found")
		mustCall(t, d, admin, "DeleteSecretValue", obj{"slug": "gh"})
		mustFail(t, d, admin, "DeleteSecretValue", obj{"slug": "gh"}, "not_found")
		mustCall(t, d, admin, "DeleteSecret", obj{"slug": "gh"})
		mustFail(t, d, admin, "DeleteSecret", obj{"slug": "gh"}, "not_found")
		mustFail(t, d, bob, "GetSecret", obj{"slug": "gh"}, "not_found")
	})
}

// TestE2ESecretBadInput refuses what the spec refuses, storing nothing.
func TestE2ESecretBadInput(t *testing.T) {
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		mustCall(t, d, admin, "CreateSecret", obj{"slug": "gh", "envName": "GH_TOKEN"})
		for _, tc := range []struct {
			name string
			req  obj
			code string
		}{
			{"reserved envName", obj{"slug": "a", "envName": "PATH"}, "bad_request"},
			{"reserved prefix", obj{"slug": "a", "envName": "SVC_TOKEN"}, "bad_request"},
			{"malformed envName", obj{"slug": "a", "envName": "gh-token"}, "bad_request"},
			{"malformed slug", obj{"slug": "A B", "envName": "A"}, "bad_request"},
			{"taken slug", obj{"slug": "gh", "envName": "OTHER"}, "conflict"},
			{"taken envName", obj{"slug": "other", "envName": "GH_TOKEN"}, "conflict"},
		} {
			mustFail(t, d, admin, "CreateSecret", tc.req, tc.code)
		}
		mustFail(t, d, admin, "SetSecretValue", obj{"slug": "gh", "value": strings.Repeat("x", 33<<10)}, "payload_too_large")
		mustFail(t, d, admin, "AddSecretBinding", obj{"slug": "gh", "member": "ghost"}, "bad_request")
		mustFail(t, d, admin, "AddSecretBinding", obj{"slug": "nope", "member": "admin"}, "not_found")
		list := listOf(t, mustCall(t, d, admin, "ListSecrets", nil), "secrets")
		require.Len(t, list, 1)
		require.Equal(t, false, list[0]["hasValue"])
		mustCall(t, d, admin, "SetSecretValue", obj{"slug": "gh", "value": strings.Repeat("x", 32<<10)})
	})
}

// TestE2ESecretResolveAndEvents: a bound member resolves its environment,
// hears of the changes on secret:<slug> and reads that thread; another
// member does neither.
func TestE2ESecretResolveAndEvents(t *testing.T) {
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		bobTok := createMember(t, d, admin, "bob")
		bob, carol := bearer(bobTok), bearer(createMember(t, d, admin, "carol"))
		stream := p.subscribeSSE(t, bobTok, "bob", "")
		mustCall(t, d, admin, "CreateSecret", obj{"slug": "gh", "envName": "GH_TOKEN"})
		mustCall(t, d, admin, "SetSecretValue", obj{"slug": "gh", "value": "ghp-e2e-value"})
		require.Empty(t, mustCall(t, d, bob, "ResolveSecrets", nil)["env"])
		mustCall(t, d, admin, "AddSecretBinding", obj{"slug": "gh", "member": "bob"})
		require.Equal(t, obj{"GH_TOKEN": "ghp-e2e-value"}, mustCall(t, d, bob, "ResolveSecrets", nil)["env"])
		require.Empty(t, mustCall(t, d, carol, "ResolveSecrets", nil)["env"])
		require.Equal(t, true, mustCall(t, d, bob, "GetSecret", obj{"slug": "gh"})["bound"])

		m := stream.nextMessage(t)
		data, _ := m["data"].(obj)
		require.Equal(t, "secret:gh", data["thread"])
		require.Equal(t, "secret", data["kind"])
		require.Equal(t, "binding_added", data["event"])
		require.NotContains(t, m["body"], "ghp-e2e-value")

		h := mustCall(t, d, bob, "History", obj{"thread": "secret:gh"})
		require.Len(t, listOf(t, h, "messages"), 1)
		mustFail(t, d, carol, "History", obj{"thread": "secret:gh"}, "forbidden")
		h = mustCall(t, d, admin, "History", obj{"thread": "secret:gh"})
		require.Len(t, listOf(t, h, "messages"), 3)

		mustCall(t, d, admin, "RemoveSecretBinding", obj{"slug": "gh", "name": "bob"})
		m = stream.nextMessage(t)
		data, _ = m["data"].(obj)
		require.Equal(t, "binding_removed", data["event"], "the unbound member is told")
		require.Empty(t, mustCall(t, d, bob, "ResolveSecrets", nil)["env"])
	})
}
