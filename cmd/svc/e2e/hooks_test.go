package e2e

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	apiv1 "svc/gen/svc/v1"
)

// The assertions of this file hold with the engine's placeholder (which
// refuses every config and rejects every delivery with "no_secret") and
// with the real engine alike: they never need a delivery to verify.
// Signature-dependent scenarios are in hooks_verified_test.go.

func init() {
	n := apiv1.NewNotificationsClient
	type C = apiv1.NotificationsClient
	for name, spec := range map[string]rpcSpec{
		"ListNotificationEndpoints":        {http.MethodGet, "/notifications/endpoints", http.StatusOK, "", unaryOn(n, C.ListNotificationEndpoints)},
		"CreateNotificationEndpoint":       {http.MethodPost, "/notifications/endpoints", http.StatusCreated, "endpoint", unaryOn(n, C.CreateNotificationEndpoint)},
		"GetNotificationEndpoint":          {http.MethodGet, "/notifications/endpoints/{slug}", http.StatusOK, "endpoint", unaryOn(n, C.GetNotificationEndpoint)},
		"UpdateNotificationEndpoint":       {http.MethodPatch, "/notifications/endpoints/{slug}", http.StatusOK, "endpoint", unaryOn(n, C.UpdateNotificationEndpoint)},
		"DeleteNotificationEndpoint":       {http.MethodDelete, "/notifications/endpoints/{slug}", http.StatusNoContent, "", unaryOn(n, C.DeleteNotificationEndpoint)},
		"SetNotificationEndpointSecret":    {http.MethodPut, "/notifications/endpoints/{slug}/secret", http.StatusOK, "endpoint", unaryOn(n, C.SetNotificationEndpointSecret)},
		"DeleteNotificationEndpointSecret": {http.MethodDelete, "/notifications/endpoints/{slug}/secret", http.StatusNoContent, "", unaryOn(n, C.DeleteNotificationEndpointSecret)},
		"ListNotificationDeliveries":       {http.MethodGet, "/notifications/endpoints/{slug}/deliveries", http.StatusOK, "", unaryOn(n, C.ListNotificationDeliveries)},
		"GetNotificationDelivery":          {http.MethodGet, "/notifications/deliveries/{id}", http.StatusOK, "delivery", unaryOn(n, C.GetNotificationDelivery)},
		"ReplayNotificationDelivery":       {http.MethodPost, "/notifications/deliveries/{id}/replay", http.StatusOK, "delivery", unaryOn(n, C.ReplayNotificationDelivery)},
		"ListNotificationProfiles":         {http.MethodGet, "/notifications/profiles", http.StatusOK, "", unaryOn(n, C.ListNotificationProfiles)},
		"CreateNotificationProfile":        {http.MethodPost, "/notifications/profiles", http.StatusCreated, "profile", unaryOn(n, C.CreateNotificationProfile)},
		"UpdateNotificationProfile":        {http.MethodPatch, "/notifications/profiles/{slug}", http.StatusOK, "profile", unaryOn(n, C.UpdateNotificationProfile)},
		"DeleteNotificationProfile":        {http.MethodDelete, "/notifications/profiles/{slug}", http.StatusNoContent, "", unaryOn(n, C.DeleteNotificationProfile)},
		"SetNotificationProfileSecret":     {http.MethodPut, "/notifications/profiles/{slug}/secret", http.StatusOK, "profile", unaryOn(n, C.SetNotificationProfileSecret)},
		"DeleteNotificationProfileSecret":  {http.MethodDelete, "/notifications/profiles/{slug}/secret", http.StatusNoContent, "", unaryOn(n, C.DeleteNotificationProfileSecret)},
	} {
		rpcs[name] = spec
	}
	queryOps["ListNotificationDeliveries"] = true
}

// TestE2EHookGates calls every notifications route as nobody, as a plain
// member and as a notifications.manage holder, and the visibility rule of
// list and view.
func TestE2EHookGates(t *testing.T) {
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		bob := bearer(createMember(t, d, admin, "bob"))
		got := mustCall(t, d, admin, "CreateNotificationEndpoint", obj{"slug": "gh", "displayName": "GitHub", "targets": []any{obj{"member": "bob"}}})
		require.Equal(t, "gh", got["slug"])
		require.Equal(t, false, got["hasSecret"])
		require.Equal(t, "/hooks/gh", got["ingressPath"])
		mustCall(t, d, admin, "CreateNotificationEndpoint", obj{"slug": "private", "targets": []any{obj{"member": "admin"}}})
		const someID = "00000000-0000-4000-8000-000000000000"
		manageOnly := []struct {
			op  string
			req obj
		}{
			{"CreateNotificationEndpoint", obj{"slug": "x", "targets": []any{obj{"member": "bob"}}}},
			{"UpdateNotificationEndpoint", obj{"slug": "gh", "enabled": false}},
			{"DeleteNotificationEndpoint", obj{"slug": "gh"}},
			{"SetNotificationEndpointSecret", obj{"slug": "gh", "secret": "s"}},
			{"DeleteNotificationEndpointSecret", obj{"slug": "gh"}},
			{"ListNotificationDeliveries", obj{"slug": "gh"}},
			{"GetNotificationDelivery", obj{"id": someID}},
			{"ReplayNotificationDelivery", obj{"id": someID}},
			{"ListNotificationProfiles", nil},
			{"CreateNotificationProfile", obj{"slug": "p", "auth": obj{"kind": "hmac-sha256"}}},
			{"UpdateNotificationProfile", obj{"slug": "p", "description": "d"}},
			{"DeleteNotificationProfile", obj{"slug": "p"}},
			{"SetNotificationProfileSecret", obj{"slug": "p", "secret": "s"}},
			{"DeleteNotificationProfileSecret", obj{"slug": "p"}},
		}
		anyMember := []struct {
			op  string
			req obj
		}{{"ListNotificationEndpoints", nil}, {"GetNotificationEndpoint", obj{"slug": "gh"}}}
		for _, c := range append(manageOnly, anyMember...) {
			mustFail(t, d, anonymous, c.op, c.req, "unauthenticated")
		}
		for _, c := range manageOnly {
			mustFail(t, d, bob, c.op, c.req, "forbidden")
		}
		for _, c := range anyMember {
			mustCall(t, d, bob, c.op, c.req)
		}
		var slugs []string
		for _, e := range listOf(t, mustCall(t, d, bob, "ListNotificationEndpoints", nil), "endpoints") {
			slugs = append(slugs, e["slug"].(string))
		}
		require.Equal(t, []string{"gh"}, slugs, "bob sees only what targets him")
		mustFail(t, d, bob, "GetNotificationEndpoint", obj{"slug": "private"}, "not_found")
		require.Len(t, listOf(t, mustCall(t, d, admin, "ListNotificationEndpoints", nil), "endpoints"), 2)

		// Admin refusals, each storing nothing.
		mustFail(t, d, admin, "CreateNotificationEndpoint", obj{"slug": "gh", "targets": []any{obj{"member": "bob"}}}, "conflict")
		mustFail(t, d, admin, "CreateNotificationEndpoint", obj{"slug": "n1", "targets": []any{obj{"member": "nobody"}}}, "bad_request")
		mustFail(t, d, admin, "CreateNotificationEndpoint", obj{"slug": "n2", "targets": []any{obj{"channel": "nochan"}}}, "bad_request")
		mustFail(t, d, admin, "CreateNotificationEndpoint", obj{"slug": "n3", "targets": []any{}}, "bad_request")
		mustFail(t, d, admin, "CreateNotificationEndpoint", obj{"slug": "n4", "targets": []any{obj{"member": "bob"}}, "authProfile": "nope"}, "bad_request")
		mustFail(t, d, admin, "CreateNotificationEndpoint", obj{"slug": "Bad_Slug", "targets": []any{obj{"member": "bob"}}}, "bad_request")
		mustFail(t, d, admin, "CreateNotificationEndpoint", obj{"slug": "n5", "targets": []any{obj{"member": "bob"}}, "policy": obj{"ifOffline": "later"}}, "bad_request")
		mustFail(t, d, admin, "CreateNotificationEndpoint", obj{"slug": "n6", "targets": []any{obj{"member": "bob"}}, "level": "loud"}, "bad_request")
		require.Len(t, listOf(t, mustCall(t, d, admin, "ListNotificationEndpoints", nil), "endpoints"), 2)

		// A channel target is stored with the channel's id.
		ch := mustCall(t, d, admin, "CreateChannel", obj{"slug": "ops"})
		got = mustCall(t, d, admin, "UpdateNotificationEndpoint", obj{"slug": "gh", "displayName": "GH", "targets": []any{obj{"channel": "ops"}},
			"policy": obj{"debounceMs": 250}})
		require.Equal(t, []any{obj{"channel": ch["id"]}}, got["targets"])
		require.Equal(t, "GH", got["displayName"])
		pol := got["policy"].(obj)
		require.Equal(t, float64(250), pol["debounceMs"])
		require.Equal(t, "drop", pol["ifOffline"])
		require.Equal(t, float64(20), pol["debounceMax"])

		mustFail(t, d, admin, "SetNotificationEndpointSecret", obj{"slug": "gh", "secret": strings.Repeat("x", 4<<10+1)}, "payload_too_large")
		mustFail(t, d, admin, "SetNotificationEndpointSecret", obj{"slug": "nope", "secret": "x"}, "not_found")
		mustFail(t, d, admin, "DeleteNotificationEndpointSecret", obj{"slug": "gh"}, "not_found")
		mustFail(t, d, admin, "ListNotificationDeliveries", obj{"slug": "gh", "limit": 501}, "bad_request")
		require.Equal(t, []obj{}, listOf(t, mustCall(t, d, admin, "ListNotificationDeliveries", obj{"slug": "gh"}), "deliveries"))
		mustFail(t, d, admin, "GetNotificationDelivery", obj{"id": someID}, "not_found")
		mustFail(t, d, admin, "ReplayNotificationDelivery", obj{"id": someID}, "not_found")
		require.Equal(t, []obj{}, listOf(t, mustCall(t, d, admin, "ListNotificationProfiles", nil), "profiles"))
		mustFail(t, d, admin, "DeleteNotificationProfile", obj{"slug": "nope"}, "not_found")

		mustCall(t, d, admin, "DeleteNotificationEndpoint", obj{"slug": "gh"})
		mustFail(t, d, admin, "GetNotificationEndpoint", obj{"slug": "gh"}, "not_found")
		mustFail(t, d, admin, "DeleteNotificationEndpoint", obj{"slug": "gh"}, "not_found")
	})
}

// TestE2EHookIngress drives POST /hooks/{slug} over HTTP: the status of
// each ingress check, the bare 401 with its rejected receipt (an endpoint
// without a secret rejects everything), the receipt's body, replay, the
// hook:<slug> history gate and the briefing section.
func TestE2EHookIngress(t *testing.T) {
	p := mustStartSvc(t, procOpts{})
	admin := p.adminToken(t)
	d := restDriver{p}
	ac := bearer(admin)
	bobTok := createMember(t, d, ac, "bob")
	carolTok := createMember(t, d, ac, "carol")
	mustCall(t, d, ac, "CreateNotificationEndpoint", obj{"slug": "in", "displayName": "Inbound", "targets": []any{obj{"member": "bob"}}})
	mustCall(t, d, ac, "CreateNotificationEndpoint", obj{"slug": "off", "targets": []any{obj{"member": "bob"}}, "enabled": false})

	r := p.do(t, http.MethodPost, "/hooks/nope", []byte(`{}`))
	requireRESTError(t, r, "not_found")
	r = p.do(t, http.MethodPost, "/hooks/off", []byte(`{}`))
	requireRESTError(t, r, "conflict")
	r = p.do(t, http.MethodPost, "/hooks/in", make([]byte, 256<<10+1))
	requireRESTError(t, r, "payload_too_large")
	r = p.do(t, http.MethodPost, "/hooks/in?if_offline=later", []byte(`{}`))
	requireRESTError(t, r, "bad_request")
	require.Equal(t, []obj{}, listOf(t, mustCall(t, d, ac, "ListNotificationDeliveries", obj{"slug": "in"}), "deliveries"), "no receipt before the rate limit")

	body := []byte(`{"hello":"world"}`)
	r = p.do(t, http.MethodPost, "/hooks/in", body, withHeader("X-Hub-Signature-256", "sha256=00"))
	require.Equal(t, http.StatusUnauthorized, r.status)
	require.Empty(t, r.raw, "a bare 401")
	r = p.do(t, http.MethodPost, "/hooks/in", make([]byte, 256<<10))
	require.Equal(t, http.StatusUnauthorized, r.status, "exactly 256 KiB clears the size check")
	require.Empty(t, r.raw)

	list := listOf(t, mustCall(t, d, ac, "ListNotificationDeliveries", obj{"slug": "in"}), "deliveries")
	require.Len(t, list, 2)
	first := list[1]
	require.Equal(t, "rejected", first["status"])
	require.Equal(t, "no_secret", first["reason"])
	require.Equal(t, "in", first["endpoint"])
	require.Equal(t, float64(len(body)), first["size"])
	require.NotContains(t, first, "body", "a list carries no bodies")
	one := mustCall(t, d, ac, "GetNotificationDelivery", obj{"id": first["id"]})
	require.Equal(t, base64.StdEncoding.EncodeToString(body), one["body"])
	require.Len(t, listOf(t, mustCall(t, d, ac, "ListNotificationDeliveries", obj{"slug": "in", "limit": 1}), "deliveries"), 1)
	older := listOf(t, mustCall(t, d, ac, "ListNotificationDeliveries", obj{"slug": "in", "before": first["receivedAt"].(float64) + 0}), "deliveries")
	for _, x := range older {
		require.Less(t, x["receivedAt"].(float64), first["receivedAt"].(float64))
	}

	// Replay skips verification: bob has no live stream and the default
	// policy drops offline members.
	rep := mustCall(t, d, ac, "ReplayNotificationDelivery", obj{"id": first["id"]})
	require.NotEqual(t, first["id"], rep["id"])
	require.Equal(t, "dropped", rep["status"])

	// hook:in is readable by its manager and its direct target, not carol.
	mustCall(t, d, ac, "History", obj{"thread": "hook:in"})
	mustCall(t, d, bearer(bobTok), "History", obj{"thread": "hook:in"})
	mustFail(t, d, bearer(carolTok), "History", obj{"thread": "hook:in"}, "forbidden")

	// The briefing tells bob which endpoints reach him, and carol nothing.
	b := mustCall(t, d, bearer(bobTok), "GetBriefing", nil)
	sec, ok := b["externalNotifications"].(obj)
	require.True(t, ok, "bob's briefing has the section: %v", keys(b))
	require.Contains(t, sec["contract"], "external_content")
	require.Equal(t, []any{obj{"slug": "in", "displayName": "Inbound"}}, sec["endpoints"])
	b = mustCall(t, d, bearer(carolTok), "GetBriefing", nil)
	require.Nil(t, b["externalNotifications"])
}

// TestE2EHookRateLimit: failed verifications from one address have their
// own budget (30 a minute, docs/HOOKS.md): past it, 429 with Retry-After
// and no receipt, while a signed request from the same address still
// lands (202), then 119 more; the 121st verified one is 429.
func TestE2EHookRateLimit(t *testing.T) {
	p := mustStartSvc(t, procOpts{})
	d := restDriver{p}
	ac := bearer(p.adminToken(t))
	mustCall(t, d, ac, "CreateNotificationEndpoint", obj{"slug": "rl", "targets": []any{obj{"member": "admin"}}, "auth": obj{"kind": "header-secret"}})
	mustCall(t, d, ac, "SetNotificationEndpointSecret", obj{"slug": "rl", "secret": "s3cret-rl"})
	for i := range 30 {
		r := p.do(t, http.MethodPost, "/hooks/rl", []byte(fmt.Sprint(i)))
		require.Equal(t, http.StatusUnauthorized, r.status, i)
	}
	r := p.do(t, http.MethodPost, "/hooks/rl", []byte(`x`))
	requireRESTError(t, r, "rate_limited")
	require.NotEmpty(t, r.header.Get("Retry-After"))
	for i := range 120 {
		r := p.do(t, http.MethodPost, "/hooks/rl", []byte(`{}`), withHeader("X-Hook-Secret", "s3cret-rl"))
		require.Equal(t, http.StatusAccepted, r.status, "%d %s", i, r.body)
	}
	r = p.do(t, http.MethodPost, "/hooks/rl", []byte(`{}`), withHeader("X-Hook-Secret", "s3cret-rl"))
	requireRESTError(t, r, "rate_limited")
	require.NotEmpty(t, r.header.Get("Retry-After"))
	require.Len(t, listOf(t, mustCall(t, d, ac, "ListNotificationDeliveries", obj{"slug": "rl", "limit": 500}), "deliveries"), 150)
}
