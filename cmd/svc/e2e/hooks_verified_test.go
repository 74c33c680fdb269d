package e2e

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// These scenarios send deliveries that verify against the broker's real
// hook engine: the test signs them (sign) or sends the header secret.

func hookSecret(t *testing.T) string {
	t.Helper()
	b := make([]byte, 24)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

func sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// TestE2EHookVerifiedDelivery: a signed delivery reaches a channel target
// as a framed message from hook:<slug>, its receipt names the message; a
// repeated delivery id is a duplicate, a filtered payload is filtered, a
// wrong signature a bare 401 with the reason on its receipt.
func TestE2EHookVerifiedDelivery(t *testing.T) {
	p := mustStartSvc(t, procOpts{})
	d := restDriver{p}
	ac := bearer(p.adminToken(t))
	createMember(t, d, ac, "bob")
	ch := mustCall(t, d, ac, "CreateChannel", obj{"slug": "ops"})
	mustCall(t, d, ac, "CreateNotificationEndpoint", obj{
		"slug": "gh", "displayName": "GitHub", "targets": []any{obj{"channel": "ops"}, obj{"member": "bob"}},
		"auth": obj{"kind": "hmac-sha256"}, "dedupeHeader": "X-GitHub-Delivery",
		"filters": []any{obj{"path": "action", "op": "eq", "value": "opened"}},
	})
	secret := hookSecret(t)
	got := mustCall(t, d, ac, "SetNotificationEndpointSecret", obj{"slug": "gh", "secret": secret})
	require.Equal(t, true, got["hasSecret"])
	raw, err := json.Marshal(got)
	require.NoError(t, err)
	require.NotContains(t, string(raw), secret)

	body := []byte(`{"action":"opened","number":7}`)
	post := func(body []byte, sig, id string) httpResp {
		return p.do(t, http.MethodPost, "/hooks/gh", body, withHeader("X-Hub-Signature-256", sig), withHeader("X-GitHub-Delivery", id))
	}
	r := post(body, sign(secret, body), "d-1")
	require.Equal(t, http.StatusAccepted, r.status, string(r.raw))
	require.Equal(t, "delivered", r.body["status"])
	id := r.body["id"].(string)

	rec := mustCall(t, d, ac, "GetNotificationDelivery", obj{"id": id})
	ids := strs(t, rec["messageIds"])
	require.Len(t, ids, 1, "the channel's message; bob is offline and dropped")
	hist := listOf(t, mustCall(t, d, ac, "History", obj{"channel": ch["id"]}), "messages")
	require.NotEmpty(t, hist)
	m := hist[0]
	require.Equal(t, ids[0], m["id"])
	require.Equal(t, "hook:gh", m["from"])
	require.Contains(t, m["body"], `<external_content endpoint="gh" delivery="`+id+`"`)
	require.Contains(t, m["body"], "</external_content>")
	data := m["data"].(obj)
	require.Equal(t, "hook_delivery", data["kind"])
	require.Equal(t, []any{id}, data["deliveryIds"])

	r = post(body, sign(secret, body), "d-1")
	require.Equal(t, http.StatusAccepted, r.status)
	require.Equal(t, "duplicate", r.body["status"])
	closed := []byte(`{"action":"closed"}`)
	r = post(closed, sign(secret, closed), "d-2")
	require.Equal(t, http.StatusAccepted, r.status)
	require.Equal(t, "filtered", r.body["status"])
	r = post(body, sign("wrong", body), "d-3")
	require.Equal(t, http.StatusUnauthorized, r.status)
	require.Empty(t, r.raw)
	list := listOf(t, mustCall(t, d, ac, "ListNotificationDeliveries", obj{"slug": "gh"}), "deliveries")
	require.Equal(t, "rejected", list[0]["status"])
	require.Equal(t, "signature_mismatch", list[0]["reason"])

	// Without its secret the endpoint rejects everything.
	mustCall(t, d, ac, "DeleteNotificationEndpointSecret", obj{"slug": "gh"})
	r = post(body, sign(secret, body), "d-4")
	require.Equal(t, http.StatusUnauthorized, r.status)
}

// TestE2EHookProfiles: a profile's secret verifies every endpoint that
// references it, one write rotates it, and a referenced profile cannot be
// deleted.
func TestE2EHookProfiles(t *testing.T) {
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		mustCall(t, d, admin, "CreateNotificationProfile", obj{"slug": "shared", "description": "d", "auth": obj{"kind": "header-secret"}})
		mustFail(t, d, admin, "CreateNotificationProfile", obj{"slug": "shared", "auth": obj{"kind": "header-secret"}}, "conflict")
		mustCall(t, d, admin, "CreateChannel", obj{"slug": "ops"})
		for _, slug := range []string{"a", "b"} {
			mustCall(t, d, admin, "CreateNotificationEndpoint", obj{"slug": slug, "targets": []any{obj{"channel": "ops"}}, "authProfile": "shared"})
		}
		secret := hookSecret(t)
		got := mustCall(t, d, admin, "SetNotificationProfileSecret", obj{"slug": "shared", "secret": secret})
		require.Equal(t, true, got["hasSecret"])
		require.Equal(t, float64(2), got["endpointCount"])
		for _, slug := range []string{"a", "b"} {
			r := p.do(t, http.MethodPost, "/hooks/"+slug, []byte(`{}`), withHeader("X-Hook-Secret", secret))
			require.Equal(t, http.StatusAccepted, r.status, "%s %s", slug, r.raw)
			require.Equal(t, "delivered", r.body["status"])
		}
		next := hookSecret(t)
		mustCall(t, d, admin, "SetNotificationProfileSecret", obj{"slug": "shared", "secret": next})
		r := p.do(t, http.MethodPost, "/hooks/a", []byte(`{}`), withHeader("X-Hook-Secret", secret))
		require.Equal(t, http.StatusUnauthorized, r.status, "the old secret no longer verifies")
		mustFail(t, d, admin, "DeleteNotificationProfile", obj{"slug": "shared"}, "conflict")
		list := listOf(t, mustCall(t, d, admin, "ListNotificationProfiles", nil), "profiles")
		require.Len(t, list, 1)
		require.NotContains(t, string(mustJSON(t, list)), next)
	})
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}
