package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"

	apiv1 "svc/gen/svc/v1"
	"svc/server/apierr"
	"svc/server/hooks"
	"svc/store"
)

func TestHookPipelineOrder(t *testing.T) {
	e := newHookEnv(t, false)
	e.online(t, "alice")
	e.create(t, "gh", func(r *apiv1.CreateNotificationEndpointRequest) {
		r.DedupeHeader = ptr("x-delivery")
		r.Filters = targets(t, map[string]any{"path": "action", "op": "eq", "value": "opened"})
	})
	e.create(t, "off", nil)
	_, err := e.n.UpdateNotificationEndpoint(e.as("admin"), &apiv1.UpdateNotificationEndpointRequest{Slug: "off", Enabled: ptr(false)})
	require.NoError(t, err)
	ctx := context.Background()
	ok := []byte(`{"action":"opened"}`)

	_, err = e.s.Ingress(ctx, "", "nope", nil, signed(), ok)
	requireCode(t, err, apierr.CodeNotFound)
	_, err = e.s.Ingress(ctx, "", "Bad_Slug", nil, signed(), ok)
	requireCode(t, err, apierr.CodeNotFound)
	_, err = e.s.Ingress(ctx, "", "off", nil, signed(), make([]byte, MaxBody+1))
	requireCode(t, err, apierr.CodeConflict, "disabled comes before size")
	_, err = e.s.Ingress(ctx, "", "gh", nil, signed(), make([]byte, MaxBody+1))
	requireCode(t, err, apierr.CodePayloadTooLarge)
	for _, q := range []string{"if_offline=later", "if_busy=soon", "level=loud", "level=info&level=error"} {
		v, _ := url.ParseQuery(q)
		_, err = e.s.Ingress(ctx, "", "gh", v, signed(), ok)
		requireCode(t, err, apierr.CodeBadRequest, q)
	}
	require.Empty(t, e.receipts(t, "gh"), "refusals before the rate limit land no receipt")

	_, err = e.s.Ingress(ctx, "", "gh", nil, http.Header{}, ok)
	require.ErrorIs(t, err, ErrRejected)
	_, err = e.s.Ingress(ctx, "", "gh", nil, http.Header{"X-Hook-Secret": {"wrong"}}, ok)
	require.ErrorIs(t, err, ErrRejected)

	res, err := e.s.Ingress(ctx, "", "gh", url.Values{"level": {"error"}}, signed("x-delivery", "d-1"), ok)
	require.NoError(t, err)
	require.Equal(t, "delivered", res.Status)
	dup, err := e.s.Ingress(ctx, "", "gh", nil, signed("x-delivery", "d-1"), ok)
	require.NoError(t, err)
	require.Equal(t, "duplicate", dup.Status)
	filt, err := e.s.Ingress(ctx, "", "gh", nil, signed("x-delivery", "d-2"), []byte(`{"action":"closed"}`))
	require.NoError(t, err)
	require.Equal(t, "filtered", filt.Status)

	rs := e.receipts(t, "gh")
	var got []string
	for _, r := range rs {
		got = append(got, r.Status+"/"+r.Reason)
	}
	require.Equal(t, []string{"filtered/", "duplicate/", "delivered/", "rejected/" + hooks.ReasonSignatureMismatch, "rejected/" + hooks.ReasonMissingHeader}, got)

	d, err := e.st.GetHookDelivery(ctx, res.ID)
	require.NoError(t, err)
	require.Equal(t, ok, d.Body)
	require.Equal(t, "d-1", d.DedupeKey)
	require.Equal(t, "error", d.Level)
	require.Len(t, d.MessageIDs, 2, "alice's copy and the channel's message")

	// alice's own copy on hook:gh; bob and carol through the channel.
	for _, who := range []string{"alice", "bob", "carol"} {
		msgs, err := e.st.MessagesFor(ctx, who, 0, 100)
		require.NoError(t, err)
		var hookMsgs []store.Message
		for _, m := range msgs {
			if m.From == "hook:gh" {
				hookMsgs = append(hookMsgs, m)
			}
		}
		require.Len(t, hookMsgs, 1, who)
		m := hookMsgs[0]
		require.Contains(t, d.MessageIDs, msgID(m.Seq), who)
		require.Equal(t, "error", m.Level)
		require.Equal(t, "Hook gh", m.Title)
		require.Contains(t, m.Body, `<external_content endpoint="gh" delivery="`+res.ID+`"`)
		var data map[string]any
		require.NoError(t, json.Unmarshal(m.Data, &data))
		require.Equal(t, "hook_delivery", data["kind"])
		require.Equal(t, "gh", data["endpoint"])
		require.Equal(t, []any{res.ID}, data["deliveryIds"])
		if who == "alice" {
			require.Equal(t, "hook:gh", m.Thread)
			require.Equal(t, "alice", m.To)
		} else {
			require.Equal(t, "chan:c-ops", m.Thread)
		}
	}
}

func TestHookRateLimit(t *testing.T) {
	e := newHookEnv(t, false)
	e.create(t, "rl", nil)
	ctx := context.Background()
	for i := range RateLimit {
		_, err := e.s.Ingress(ctx, "192.0.2.1", "rl", nil, signed(), []byte("x"))
		require.NoError(t, err, i)
	}
	_, err := e.s.Ingress(ctx, "192.0.2.1", "rl", nil, signed(), []byte("x"))
	requireCode(t, err, apierr.CodeRateLimited)
	r := apierr.Render(err)
	require.Positive(t, r.RetryAfter)
	require.Len(t, e.receipts(t, "rl"), RateLimit, "the refused request is not receipted")
}

// TestHookRejectBudget: failed verifications have their own budgets, per
// client address and per endpoint, so a storm of unsigned requests
// neither spends the endpoint's rate limit nor keeps its real sender out.
func TestHookRejectBudget(t *testing.T) {
	e := newHookEnv(t, false)
	e.create(t, "rb", nil)
	ctx := context.Background()
	unsigned := func(addr string) error {
		_, err := e.s.Ingress(ctx, addr, "rb", nil, http.Header{"X-Hook-Secret": {"wrong"}}, []byte("x"))
		return err
	}
	accepted := func(addr string) {
		t.Helper()
		res, err := e.s.Ingress(ctx, addr, "rb", nil, signed(), []byte(`{"ok":1}`))
		require.NoError(t, err, "a signed request goes through the storm")
		require.Equal(t, StatusDelivered, res.Status)
	}
	// Each address gets its own budget: past it, 429 with a wait and no
	// receipt; the next address is not affected.
	addrs := RejectLimit / RejectAddrLimit
	for a := range addrs {
		addr := fmt.Sprintf("198.51.100.%d", a+1)
		for i := range RejectAddrLimit {
			require.ErrorIs(t, unsigned(addr), ErrRejected, "address %s request %d", addr, i)
		}
		err := unsigned(addr)
		requireCode(t, err, apierr.CodeRateLimited, "address %s past its budget", addr)
		require.Positive(t, apierr.Render(err).RetryAfter)
		accepted("203.0.113.9")
	}
	// The endpoint's failure budget is spent: a new address is refused too.
	requireCode(t, unsigned("198.51.100.200"), apierr.CodeRateLimited, "the endpoint's failure budget")
	accepted("198.51.100.200") // even from an address that failed
	require.Equal(t, RejectLimit+addrs+1, len(e.receipts(t, "rb")), "refused requests are not receipted")

	// A minute later the window has moved on.
	e.clock.Add(time.Minute)
	require.ErrorIs(t, unsigned("198.51.100.1"), ErrRejected)
}

func TestHookOfflineDrop(t *testing.T) {
	e := newHookEnv(t, false)
	e.create(t, "m", func(r *apiv1.CreateNotificationEndpointRequest) {
		r.Targets = targets(t, map[string]any{"member": "alice"})
	})
	ctx := context.Background()
	res, err := e.s.Ingress(ctx, "", "m", nil, signed(), []byte("{}"))
	require.NoError(t, err)
	require.Equal(t, "dropped", res.Status, "alice has no live stream")
	// queue holds it for the attach (hookpolicy_test.go).
	res, err = e.s.Ingress(ctx, "", "m", url.Values{"if_offline": {"queue"}}, signed(), []byte("{}"))
	require.NoError(t, err)
	require.Equal(t, "pending", res.Status)
	e.online(t, "alice")
	res, err = e.s.Ingress(ctx, "", "m", nil, signed(), []byte("{}"))
	require.NoError(t, err)
	require.Equal(t, "delivered", res.Status)
}

func TestHookReplay(t *testing.T) {
	e := newHookEnv(t, false)
	e.online(t, "alice")
	e.create(t, "r", func(r *apiv1.CreateNotificationEndpointRequest) { r.DedupeHeader = ptr("x-delivery") })
	ctx := context.Background()
	res, err := e.s.Ingress(ctx, "", "r", nil, signed("x-delivery", "k"), []byte(`{"a":1}`))
	require.NoError(t, err)
	_, err = e.s.Ingress(ctx, "", "r", nil, http.Header{}, []byte(`{"b":2}`))
	require.ErrorIs(t, err, ErrRejected)
	rej := e.receipts(t, "r")[0]
	require.Equal(t, "rejected", rej.Status)
	// The secret is gone: replay skips verification, and dedupe.
	_, err = e.n.DeleteNotificationEndpointSecret(e.as("admin"), &apiv1.DeleteNotificationEndpointSecretRequest{Slug: "r"})
	require.NoError(t, err)
	for _, id := range []string{res.ID, res.ID, rej.ID} {
		out, err := e.n.ReplayNotificationDelivery(e.as("admin"), &apiv1.ReplayNotificationDeliveryRequest{Id: id})
		require.NoError(t, err)
		require.Equal(t, "delivered", out.GetDelivery().GetStatus())
		require.NotEqual(t, id, out.GetDelivery().GetId())
		require.Len(t, out.GetDelivery().GetMessageIds(), 2)
		require.Equal(t, "replay of "+id, out.GetDelivery().GetReason())
	}
	_, err = e.n.ReplayNotificationDelivery(e.as("admin"), &apiv1.ReplayNotificationDeliveryRequest{Id: "00000000-0000-4000-8000-000000000000"})
	requireCode(t, err, apierr.CodeNotFound)
	_, err = e.n.ReplayNotificationDelivery(e.as("admin"), &apiv1.ReplayNotificationDeliveryRequest{Id: "../x"})
	requireCode(t, err, apierr.CodeBadRequest)
	// Filters still apply on replay.
	_, err = e.n.UpdateNotificationEndpoint(e.as("admin"), &apiv1.UpdateNotificationEndpointRequest{Slug: "r",
		Filters: targets(t, map[string]any{"path": "a", "op": "eq", "value": 2})})
	require.NoError(t, err)
	out, err := e.n.ReplayNotificationDelivery(e.as("admin"), &apiv1.ReplayNotificationDeliveryRequest{Id: res.ID})
	require.NoError(t, err)
	require.Equal(t, "filtered", out.GetDelivery().GetStatus())
}

func TestHookVisibility(t *testing.T) {
	e := newHookEnv(t, false)
	e.create(t, "both", nil) // alice directly, carol and bob through ops
	e.create(t, "solo", func(r *apiv1.CreateNotificationEndpointRequest) {
		r.Targets = targets(t, map[string]any{"member": "alice"})
	})
	for _, tc := range []struct {
		who  string
		want []string
	}{{"admin", []string{"both", "solo"}}, {"alice", []string{"both", "solo"}}, {"carol", []string{"both"}}, {"bob", []string{"both"}}} {
		list, err := e.n.ListNotificationEndpoints(e.as(tc.who), &apiv1.ListNotificationEndpointsRequest{})
		require.NoError(t, err)
		var got []string
		for _, x := range list.GetEndpoints() {
			got = append(got, x.GetSlug())
			require.True(t, x.GetHasSecret())
		}
		require.Equal(t, tc.want, got, tc.who)
	}
	_, err := e.n.GetNotificationEndpoint(e.as("carol"), &apiv1.GetNotificationEndpointRequest{Slug: "solo"})
	requireCode(t, err, apierr.CodeNotFound, "an endpoint that does not reach carol is 404 to her")
	got, err := e.n.GetNotificationEndpoint(e.as("carol"), &apiv1.GetNotificationEndpointRequest{Slug: "both"})
	require.NoError(t, err)
	require.Equal(t, "c-ops", got.GetEndpoint().GetTargets()[1].GetChannel(), "channels are stored by id")
	require.Equal(t, "/hooks/both", got.GetEndpoint().GetIngressPath())
	b, err := json.Marshal(got)
	require.NoError(t, err)
	require.NotContains(t, string(b), "s3cret")
}

func TestHookNoKEK(t *testing.T) {
	e := newHookEnv(t, true)
	_, err := e.n.CreateNotificationEndpoint(e.as("admin"), &apiv1.CreateNotificationEndpointRequest{
		Slug: "k", Targets: targets(t, map[string]any{"member": "alice"}),
	})
	require.NoError(t, err)
	_, err = e.n.SetNotificationEndpointSecret(e.as("admin"), &apiv1.SetNotificationEndpointSecretRequest{Slug: "k", Secret: "s"})
	requireCode(t, err, apierr.CodeUnavailable)
	_, err = e.n.CreateNotificationProfile(e.as("admin"), &apiv1.CreateNotificationProfileRequest{Slug: "p", Auth: &apiv1.NotificationAuth{Kind: "hmac-sha256"}})
	require.NoError(t, err)
	_, err = e.n.SetNotificationProfileSecret(e.as("admin"), &apiv1.SetNotificationProfileSecretRequest{Slug: "p", Secret: "s"})
	requireCode(t, err, apierr.CodeUnavailable)
	ep, err := e.st.GetHookEndpoint(context.Background(), "k")
	require.NoError(t, err)
	require.Nil(t, ep.Secret, "nothing stored on refusal")
}

func TestHookAdminValidation(t *testing.T) {
	e := newHookEnv(t, false)
	a := e.as("admin")
	base := func() *apiv1.CreateNotificationEndpointRequest {
		return &apiv1.CreateNotificationEndpointRequest{Slug: "v", Targets: targets(t, map[string]any{"member": "alice"})}
	}
	for name, tc := range map[string]struct {
		mod  func(*apiv1.CreateNotificationEndpointRequest)
		code apierr.Code
	}{
		"bad slug":   {func(r *apiv1.CreateNotificationEndpointRequest) { r.Slug = "A_b" }, apierr.CodeBadRequest},
		"no targets": {func(r *apiv1.CreateNotificationEndpointRequest) { r.Targets = nil }, apierr.CodeBadRequest},
		"unknown member": {func(r *apiv1.CreateNotificationEndpointRequest) {
			r.Targets = targets(t, map[string]any{"member": "zed"})
		}, apierr.CodeBadRequest},
		"unknown channel": {func(r *apiv1.CreateNotificationEndpointRequest) {
			r.Targets = targets(t, map[string]any{"channel": "zed"})
		}, apierr.CodeBadRequest},
		"both keys": {func(r *apiv1.CreateNotificationEndpointRequest) {
			r.Targets = targets(t, map[string]any{"member": "alice", "channel": "ops"})
		}, apierr.CodeBadRequest},
		"duplicate target": {func(r *apiv1.CreateNotificationEndpointRequest) {
			r.Targets = targets(t, map[string]any{"member": "alice"}, map[string]any{"member": "alice"})
		}, apierr.CodeBadRequest},
		"unknown profile": {func(r *apiv1.CreateNotificationEndpointRequest) { r.AuthProfile = ptr("nope") }, apierr.CodeBadRequest},
		"bad auth kind":   {func(r *apiv1.CreateNotificationEndpointRequest) { r.Auth = &apiv1.NotificationAuth{Kind: "md5"} }, apierr.CodeBadRequest},
		"bad filter": {func(r *apiv1.CreateNotificationEndpointRequest) {
			r.Filters = targets(t, map[string]any{"path": "a", "op": "regex"})
		}, apierr.CodeBadRequest},
		"bad template": {func(r *apiv1.CreateNotificationEndpointRequest) { r.Template = ptr("{{bad") }, apierr.CodeBadRequest},
		"bad level":    {func(r *apiv1.CreateNotificationEndpointRequest) { r.Level = ptr("loud") }, apierr.CodeBadRequest},
		"bad dedupe":   {func(r *apiv1.CreateNotificationEndpointRequest) { r.DedupeHeader = ptr("x y") }, apierr.CodeBadRequest},
		"bad ifOffline": {func(r *apiv1.CreateNotificationEndpointRequest) {
			r.Policy = &apiv1.NotificationPolicy{IfOffline: ptr("keep")}
		}, apierr.CodeBadRequest},
		"debounce bounds": {func(r *apiv1.CreateNotificationEndpointRequest) {
			r.Policy = &apiv1.NotificationPolicy{DebounceMs: ptr(int32(-1))}
		}, apierr.CodeBadRequest},
		"queueTtl bounds": {func(r *apiv1.CreateNotificationEndpointRequest) {
			r.Policy = &apiv1.NotificationPolicy{QueueTtlMs: ptr(int32(1))}
		}, apierr.CodeBadRequest},
	} {
		r := base()
		tc.mod(r)
		_, err := e.n.CreateNotificationEndpoint(a, r)
		requireCode(t, err, tc.code, name)
	}
	list, err := e.st.ListHookEndpoints(context.Background())
	require.NoError(t, err)
	require.Empty(t, list, "nothing stored on refusal")

	out, err := e.n.CreateNotificationEndpoint(a, base())
	require.NoError(t, err)
	pol := out.GetEndpoint().GetPolicy()
	require.Equal(t, []any{"drop", "now", int32(0), int32(20), int32(DefaultQueueTTLMs), int32(DefaultMaxWaitMs), "info"},
		[]any{pol.GetIfOffline(), pol.GetIfBusy(), pol.GetDebounceMs(), pol.GetDebounceMax(), pol.GetQueueTtlMs(), pol.GetMaxWaitMs(), pol.GetLevel()})
	require.Equal(t, "hmac-sha256", out.GetEndpoint().GetAuth().GetKind(), "the default inline kind")
	require.False(t, out.GetEndpoint().GetHasSecret())
	_, err = e.n.CreateNotificationEndpoint(a, base())
	requireCode(t, err, apierr.CodeConflict)

	_, err = e.n.SetNotificationEndpointSecret(a, &apiv1.SetNotificationEndpointSecretRequest{Slug: "v", Secret: strings.Repeat("x", maxSecret+1)})
	requireCode(t, err, apierr.CodePayloadTooLarge)
	_, err = e.n.SetNotificationEndpointSecret(a, &apiv1.SetNotificationEndpointSecretRequest{Slug: "v", Secret: "\xff"})
	requireCode(t, err, apierr.CodeBadRequest)
	_, err = e.n.DeleteNotificationEndpointSecret(a, &apiv1.DeleteNotificationEndpointSecretRequest{Slug: "v"})
	requireCode(t, err, apierr.CodeNotFound)

	// PATCH merges a policy subset and keeps the rest.
	up, err := e.n.UpdateNotificationEndpoint(a, &apiv1.UpdateNotificationEndpointRequest{Slug: "v",
		Policy: &apiv1.NotificationPolicy{DebounceMs: ptr(int32(500))}, Template: ptr("T:")})
	require.NoError(t, err)
	require.Equal(t, int32(500), up.GetEndpoint().GetPolicy().GetDebounceMs())
	require.Equal(t, "drop", up.GetEndpoint().GetPolicy().GetIfOffline())
	require.Equal(t, "T:", up.GetEndpoint().GetTemplate())
	require.Equal(t, "alice", up.GetEndpoint().GetTargets()[0].GetMember())

	_, err = e.n.ListNotificationDeliveries(a, &apiv1.ListNotificationDeliveriesRequest{Slug: "v", Limit: ptr(int32(501))})
	requireCode(t, err, apierr.CodeBadRequest)
	_, err = e.n.ListNotificationDeliveries(a, &apiv1.ListNotificationDeliveriesRequest{Slug: "zz"})
	requireCode(t, err, apierr.CodeNotFound)

	_, err = e.n.DeleteNotificationEndpoint(a, &apiv1.DeleteNotificationEndpointRequest{Slug: "v"})
	require.NoError(t, err)
	_, err = e.n.GetNotificationEndpoint(a, &apiv1.GetNotificationEndpointRequest{Slug: "v"})
	requireCode(t, err, apierr.CodeNotFound)
}

func TestHookProfiles(t *testing.T) {
	e := newHookEnv(t, false)
	e.online(t, "alice")
	a := e.as("admin")
	_, err := e.n.CreateNotificationProfile(a, &apiv1.CreateNotificationProfileRequest{Slug: "gh", Auth: &apiv1.NotificationAuth{Kind: "header-secret"}})
	require.NoError(t, err)
	_, err = e.n.CreateNotificationProfile(a, &apiv1.CreateNotificationProfileRequest{Slug: "gh", Auth: &apiv1.NotificationAuth{Kind: "header-secret"}})
	requireCode(t, err, apierr.CodeConflict)
	e.create(t, "one", func(r *apiv1.CreateNotificationEndpointRequest) { r.AuthProfile = ptr("gh") })
	e.create(t, "two", func(r *apiv1.CreateNotificationEndpointRequest) { r.AuthProfile = ptr("gh") })
	ctx := context.Background()
	// The endpoints' own secrets are ignored: the profile has none.
	_, err = e.s.Ingress(ctx, "", "one", nil, signed(), []byte("{}"))
	require.ErrorIs(t, err, ErrRejected)
	require.Equal(t, hooks.ReasonNoSecret, e.receipts(t, "one")[0].Reason)
	// One write rotates both.
	_, err = e.n.SetNotificationProfileSecret(a, &apiv1.SetNotificationProfileSecretRequest{Slug: "gh", Secret: "shared"})
	require.NoError(t, err)
	for _, slug := range []string{"one", "two"} {
		res, err := e.s.Ingress(ctx, "", slug, nil, http.Header{"X-Hook-Secret": {"shared"}}, []byte("{}"))
		require.NoError(t, err, slug)
		require.Equal(t, "delivered", res.Status)
	}
	list, err := e.n.ListNotificationProfiles(a, &apiv1.ListNotificationProfilesRequest{})
	require.NoError(t, err)
	require.Len(t, list.GetProfiles(), 1)
	require.Equal(t, int32(2), list.GetProfiles()[0].GetEndpointCount())
	require.True(t, list.GetProfiles()[0].GetHasSecret())
	_, err = e.n.DeleteNotificationProfile(a, &apiv1.DeleteNotificationProfileRequest{Slug: "gh"})
	requireCode(t, err, apierr.CodeConflict)
	for _, slug := range []string{"one", "two"} {
		_, err = e.n.UpdateNotificationEndpoint(a, &apiv1.UpdateNotificationEndpointRequest{Slug: slug, AuthProfile: ptr("")})
		require.NoError(t, err)
	}
	_, err = e.n.DeleteNotificationProfileSecret(a, &apiv1.DeleteNotificationProfileSecretRequest{Slug: "gh"})
	require.NoError(t, err)
	_, err = e.n.DeleteNotificationProfileSecret(a, &apiv1.DeleteNotificationProfileSecretRequest{Slug: "gh"})
	requireCode(t, err, apierr.CodeNotFound)
	_, err = e.n.DeleteNotificationProfile(a, &apiv1.DeleteNotificationProfileRequest{Slug: "gh"})
	require.NoError(t, err)
	_, err = e.n.DeleteNotificationProfile(a, &apiv1.DeleteNotificationProfileRequest{Slug: "gh"})
	requireCode(t, err, apierr.CodeNotFound)
}

// hookEvents are the endpoint events member received on thread.
func (e *hookEnv) hookEvents(t *testing.T, member, thread string) []string {
	t.Helper()
	return e.events(t, member, thread, "notification_endpoint")
}

// events are the registry events of kind member received on thread.
func (e *hookEnv) events(t *testing.T, member, thread, kind string) []string {
	t.Helper()
	msgs, err := e.st.MessagesFor(context.Background(), member, 0, 500)
	require.NoError(t, err)
	var out []string
	for _, m := range msgs {
		var d struct{ Kind, Event string }
		require.NoError(t, json.Unmarshal(m.Data, &d))
		if m.Thread == thread && d.Kind == kind {
			out = append(out, d.Event)
		}
	}
	return out
}

func TestHookRegistryEvents(t *testing.T) {
	e := newHookEnv(t, false)
	a := e.as("admin")
	e.create(t, "ev", nil) // created, secret_set
	_, err := e.n.UpdateNotificationEndpoint(a, &apiv1.UpdateNotificationEndpointRequest{Slug: "ev",
		Targets: targets(t, map[string]any{"member": "bob"})})
	require.NoError(t, err)
	_, err = e.n.UpdateNotificationEndpoint(a, &apiv1.UpdateNotificationEndpointRequest{Slug: "ev", Enabled: ptr(true)})
	require.NoError(t, err, "no change, no event")
	_, err = e.n.DeleteNotificationEndpoint(a, &apiv1.DeleteNotificationEndpointRequest{Slug: "ev"})
	require.NoError(t, err)

	require.Equal(t, []string{"created", "secret_set", "updated", "deleted"}, e.hookEvents(t, "admin", "hook:ev"))
	require.Equal(t, []string{"created", "secret_set", "updated"}, e.hookEvents(t, "alice", "hook:ev"), "alice is told she was removed")
	require.Equal(t, []string{"updated", "deleted"}, e.hookEvents(t, "bob", "hook:ev"))
	require.Empty(t, e.hookEvents(t, "carol", "hook:ev"), "channel members are not direct targets")

	// No event carries the secret.
	msgs, err := e.st.MessagesFor(context.Background(), "admin", 0, 500)
	require.NoError(t, err)
	b, err := json.Marshal(msgs)
	require.NoError(t, err)
	require.NotContains(t, string(b), "s3cret")
}

// A profile's changes are reported on hook-profile:<slug> to the managers
// alone: a profile reaches nobody until an endpoint names it, and the
// members an endpoint reaches are told of the endpoint's own changes.
func TestHookProfileEvents(t *testing.T) {
	e := newHookEnv(t, false)
	e.online(t, "alice")
	a := e.as("admin")
	_, err := e.n.CreateNotificationProfile(a, &apiv1.CreateNotificationProfileRequest{Slug: "gh", Auth: &apiv1.NotificationAuth{Kind: "header-secret"}})
	require.NoError(t, err)
	e.create(t, "one", func(r *apiv1.CreateNotificationEndpointRequest) { r.AuthProfile = ptr("gh") })
	_, err = e.n.UpdateNotificationProfile(a, &apiv1.UpdateNotificationProfileRequest{Slug: "gh", Auth: &apiv1.NotificationAuth{Kind: "header-secret"}})
	require.NoError(t, err, "no change, no event")
	up, err := e.n.UpdateNotificationProfile(a, &apiv1.UpdateNotificationProfileRequest{Slug: "gh", Description: ptr("GitHub")})
	require.NoError(t, err)
	require.Equal(t, "GitHub", up.GetProfile().GetDescription())
	_, err = e.n.SetNotificationProfileSecret(a, &apiv1.SetNotificationProfileSecretRequest{Slug: "gh", Secret: "pr0file-S3CRET"})
	require.NoError(t, err)
	_, err = e.n.DeleteNotificationProfileSecret(a, &apiv1.DeleteNotificationProfileSecretRequest{Slug: "gh"})
	require.NoError(t, err)
	_, err = e.n.UpdateNotificationEndpoint(a, &apiv1.UpdateNotificationEndpointRequest{Slug: "one", AuthProfile: ptr("")})
	require.NoError(t, err)
	_, err = e.n.DeleteNotificationProfile(a, &apiv1.DeleteNotificationProfileRequest{Slug: "gh"})
	require.NoError(t, err)
	_, err = e.n.DeleteNotificationProfile(a, &apiv1.DeleteNotificationProfileRequest{Slug: "gh"})
	requireCode(t, err, apierr.CodeNotFound, "gone: no second event")

	require.Equal(t, []string{"created", "updated", "secret_set", "secret_deleted", "deleted"}, e.events(t, "admin", "hook-profile:gh", "notification_profile"))
	for _, who := range []string{"alice", "bob", "carol"} {
		require.Empty(t, e.events(t, who, "hook-profile:gh", "notification_profile"), "%s is a target of an endpoint on the profile, not a manager", who)
	}
	msgs, err := e.st.MessagesFor(context.Background(), "admin", 0, 500)
	require.NoError(t, err)
	var m store.Message
	for _, x := range msgs {
		if x.Thread == "hook-profile:gh" {
			m = x
			break
		}
	}
	require.Equal(t, "admin", m.From)
	require.Equal(t, "notification profile gh", m.Title)
	require.Equal(t, "admin created notification profile gh", m.Body)
	b, err := json.Marshal(msgs)
	require.NoError(t, err)
	require.NotContains(t, string(b), "pr0file-S3CRET", "no event carries the secret")
}

func TestHookBriefing(t *testing.T) {
	e := newHookEnv(t, false)
	e.create(t, "solo", func(r *apiv1.CreateNotificationEndpointRequest) {
		r.Targets = targets(t, map[string]any{"member": "alice"})
	})
	e.create(t, "chan", func(r *apiv1.CreateNotificationEndpointRequest) {
		r.Targets = targets(t, map[string]any{"channel": "c-ops"})
	})
	e.create(t, "off", func(r *apiv1.CreateNotificationEndpointRequest) { r.Enabled = ptr(false) })
	for _, tc := range []struct {
		who  string
		want []string
	}{{"alice", []string{"solo"}}, {"carol", []string{"chan"}}, {"admin", nil}} {
		sec, err := e.s.Briefing(context.Background(), tc.who)
		require.NoError(t, err)
		if tc.want == nil {
			require.Nil(t, sec, tc.who)
			continue
		}
		require.Contains(t, sec.GetContract(), "<external_content")
		require.Contains(t, sec.GetContract(), "never instructions")
		var got []string
		for _, x := range sec.GetEndpoints() {
			got = append(got, x.GetSlug())
		}
		require.Equal(t, tc.want, got, tc.who)
	}
}

func FuzzParseTargets(f *testing.F) {
	for _, s := range []string{`[{"member":"alice"}]`, `[{"channel":"ops"}]`, `[{"member":"a","channel":"b"}]`, `[1]`, `[{"member":1}]`, `[]`, `[{"x":"y"}]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l := &structpb.ListValue{}
		if err := l.UnmarshalJSON([]byte(s)); err != nil {
			return
		}
		ts, err := ParseTargets(l, func(n string) bool { return n == "alice" }, func(ref string) (string, bool) {
			return "id-" + ref, ref == "ops"
		})
		if err != nil {
			require.Nil(t, ts)
			require.Equal(t, apierr.CodeBadRequest, apierr.Render(err).Body.Error)
			return
		}
		require.NotEmpty(t, ts)
		require.LessOrEqual(t, len(ts), maxTargets)
		for _, x := range ts {
			require.True(t, (x.Member == "alice") != (x.Channel == "id-ops"), "%+v", x)
		}
	})
}

// A dedupe header that is also the header verification reads would show
// the secret in every receipt: its key is kept only as a hash, and still
// dedupes.
func TestHookDedupeOnTheSecretHeader(t *testing.T) {
	e := newHookEnv(t, false)
	e.online(t, "alice")
	e.create(t, "sec", func(r *apiv1.CreateNotificationEndpointRequest) { r.DedupeHeader = ptr("X-Hook-Secret") })
	ctx := context.Background()
	first, err := e.s.Ingress(ctx, "", "sec", nil, signed(), []byte(`{}`))
	require.NoError(t, err)
	require.Equal(t, "delivered", first.Status)
	again, err := e.s.Ingress(ctx, "", "sec", nil, signed(), []byte(`{}`))
	require.NoError(t, err)
	require.Equal(t, "duplicate", again.Status)
	for _, r := range e.receipts(t, "sec") {
		require.NotContains(t, r.DedupeKey, "s3cret")
		require.True(t, strings.HasPrefix(r.DedupeKey, "sha256:"), r.DedupeKey)
	}
}

// An endpoint whose stored JSON column does not decode is an error
// wherever it is read: read as empty, it would deliver to nobody or past
// every filter without a word, and the sender would get a 202.
func TestHookCorruptEndpointColumn(t *testing.T) {
	tests := []struct {
		name    string
		corrupt func(*store.HookEndpoint)
	}{
		{name: "targets", corrupt: func(r *store.HookEndpoint) { r.Targets = []byte(`[{"member":`) }},
		{name: "filters", corrupt: func(r *store.HookEndpoint) { r.Filters = []byte(`{"not":"a list"}`) }},
		{name: "policy", corrupt: func(r *store.HookEndpoint) { r.Policy = []byte(`"queue"`) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newHookEnv(t, false)
			e.online(t, "alice")
			e.create(t, "c", nil)
			ctx := context.Background()
			rec, err := e.st.GetHookEndpoint(ctx, "c")
			require.NoError(t, err)
			tc.corrupt(&rec)
			require.NoError(t, e.st.UpdateHookEndpoint(ctx, rec))

			_, err = e.s.Ingress(ctx, "", "c", nil, signed(), []byte(`{"n":1}`))
			requireCode(t, err, apierr.CodeInternal)
			require.Empty(t, e.receipts(t, "c"), "no receipt claims a delivery that never ran")
			_, err = e.n.GetNotificationEndpoint(e.as("admin"), &apiv1.GetNotificationEndpointRequest{Slug: "c"})
			requireCode(t, err, apierr.CodeInternal)
			_, err = e.n.ListNotificationEndpoints(e.as("admin"), &apiv1.ListNotificationEndpointsRequest{})
			requireCode(t, err, apierr.CodeInternal)
			_, err = e.s.Briefing(ctx, "alice")
			requireCode(t, err, apierr.CodeInternal)
		})
	}
}

// TestHookReplayUnverifiedFrame: a replayed rejected delivery reaches its
// readers marked unverified and naming who replayed it; a replayed
// verified one is framed as before.
func TestHookReplayUnverifiedFrame(t *testing.T) {
	e := newHookEnv(t, false)
	e.online(t, "alice")
	e.create(t, "uv", nil)
	ctx := context.Background()
	res, err := e.s.Ingress(ctx, "", "uv", nil, signed(), []byte(`{"a":1}`))
	require.NoError(t, err)
	_, err = e.s.Ingress(ctx, "", "uv", nil, http.Header{}, []byte(`{"b":2}`))
	require.ErrorIs(t, err, ErrRejected)
	rej := e.receipts(t, "uv")[0]
	require.Equal(t, StatusRejected, rej.Status)

	bodies := func(ids []string) []string {
		t.Helper()
		msgs, err := e.st.MessagesFor(ctx, "alice", 0, 500)
		require.NoError(t, err)
		want := map[string]bool{}
		for _, id := range ids {
			want[id] = true
		}
		var out []string
		for _, m := range msgs {
			if want[msgID(m.Seq)] {
				out = append(out, m.Body)
			}
		}
		require.NotEmpty(t, out, "alice's copy")
		return out
	}
	for _, tc := range []struct {
		id       string
		unsigned bool
	}{{res.ID, false}, {rej.ID, true}} {
		out, err := e.n.ReplayNotificationDelivery(e.as("admin"), &apiv1.ReplayNotificationDeliveryRequest{Id: tc.id})
		require.NoError(t, err)
		for _, body := range bodies(out.GetDelivery().GetMessageIds()) {
			if tc.unsigned {
				require.Contains(t, body, `verification="unverified, replayed by admin"`)
				require.Contains(t, body, "failed the endpoint's verification")
			} else {
				require.NotContains(t, body, "unverified")
			}
		}
	}
}
