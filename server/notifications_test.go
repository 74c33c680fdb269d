package server

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"svc/server/apierr"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"

	apiv1 "svc/gen/svc/v1"
	"svc/server/auth"
	"svc/server/kek"
	"svc/server/notify"
	"svc/store"
)

// The inbound-hook capability's own behaviour is tested in server/notify
// over fakes of what it is given; these tests hold the wiring New makes:
// the message committer (receipts name the stored messages' ids), the
// hub and presence as its member reach, the manage holders its events go
// to, the briefing section and the history of hook: threads.

// hookEnv is a running server with members admin (notifications.manage),
// alice, bob and carol, channel ops (bob, carol) and a KEK unless noKEK.
type hookEnv struct {
	srv    *Server
	st     store.Store
	n      *notify.Admin
	broker *Broker
	perms  map[string][]string
	chanID string
}

func newHookEnv(t *testing.T, noKEK bool, opts ...Option) *hookEnv {
	t.Helper()
	return newHookEnvOn(t, mustMemStore(t), noKEK, opts...)
}

// newHookEnvOn is newHookEnv over st.
func newHookEnvOn(t *testing.T, st store.Store, noKEK bool, opts ...Option) *hookEnv {
	t.Helper()
	perms := map[string][]string{"admin": {auth.NotificationsManage}, "alice": {}, "bob": {}, "carol": {}, "expired": {}}
	var k *kek.KEK
	if !noKEK {
		key := make([]byte, kek.KeySize)
		_, err := rand.Read(key)
		require.NoError(t, err)
		k, err = kek.New(key)
		require.NoError(t, err)
	}
	srv := startTestServer(t, st, perms, Deps{KEK: k}, opts...)
	ctx := context.Background()
	require.NoError(t, st.CreateChannel(ctx, store.Channel{ID: "c-ops", Slug: "ops", CreatedBy: "bob"}))
	require.NoError(t, st.PutChannelMember(ctx, store.ChannelMember{Channel: "c-ops", Member: "carol", Role: "member"}))
	return &hookEnv{srv: srv, st: st, n: srv.notify.Admin(), broker: newBroker(srv.core, nil), perms: perms, chanID: "c-ops"}
}

func (e *hookEnv) as(name string) context.Context {
	return auth.WithPrincipal(context.Background(), &auth.Principal{Member: name, Permissions: e.perms[name]})
}

// online keeps a live subscription of member until the test ends.
func (e *hookEnv) online(t *testing.T, member string) {
	t.Helper()
	sub, err := e.srv.core.hub.Subscribe(member, "test")
	require.NoError(t, err)
	t.Cleanup(sub.Close)
}

func targets(t *testing.T, ts ...map[string]any) *structpb.ListValue {
	t.Helper()
	var vals []any
	for _, x := range ts {
		vals = append(vals, x)
	}
	l, err := structpb.NewList(vals)
	require.NoError(t, err)
	return l
}

// create makes endpoint slug targeting alice and channel ops, with
// header-secret auth and secret s3cret.
func (e *hookEnv) create(t *testing.T, slug string, mod func(*apiv1.CreateNotificationEndpointRequest)) {
	t.Helper()
	req := &apiv1.CreateNotificationEndpointRequest{
		Slug: slug, DisplayName: ptr("Hook " + slug),
		Targets: targets(t, map[string]any{"member": "alice"}, map[string]any{"channel": "ops"}),
		Auth:    &apiv1.NotificationAuth{Kind: "header-secret"},
	}
	if mod != nil {
		mod(req)
	}
	_, err := e.n.CreateNotificationEndpoint(e.as("admin"), req)
	require.NoError(t, err)
	_, err = e.n.SetNotificationEndpointSecret(e.as("admin"), &apiv1.SetNotificationEndpointSecretRequest{Slug: slug, Secret: "s3cret"})
	require.NoError(t, err)
}

func signed(extra ...string) http.Header {
	h := http.Header{"X-Hook-Secret": {"s3cret"}}
	for i := 0; i+1 < len(extra); i += 2 {
		h.Set(extra[i], extra[i+1])
	}
	return h
}

func TestHookWiringDelivery(t *testing.T) {
	e := newHookEnv(t, false)
	e.create(t, "gh", nil)
	e.create(t, "w", func(r *apiv1.CreateNotificationEndpointRequest) {
		r.Targets = targets(t, map[string]any{"member": "alice"})
		r.Policy = &apiv1.NotificationPolicy{IfBusy: ptr("wait")}
	})
	ctx := context.Background()

	// Offline by the hub: alice's copy is dropped.
	res, err := e.srv.notify.Ingress(ctx, "", "w", nil, signed(), []byte("{}"))
	require.NoError(t, err)
	require.Equal(t, "dropped", res.Status, "alice has no live stream")

	e.online(t, "alice")
	res, err = e.srv.notify.Ingress(ctx, "", "gh", nil, signed(), []byte(`{"n":1}`))
	require.NoError(t, err)
	require.Equal(t, "delivered", res.Status)
	d, err := e.st.GetHookDelivery(ctx, res.ID)
	require.NoError(t, err)
	require.Len(t, d.MessageIDs, 2, "alice's copy and the channel's message")
	for _, who := range []string{"alice", "carol"} {
		msgs, err := e.st.MessagesFor(ctx, who, 0, 100)
		require.NoError(t, err)
		var ids []string
		for _, m := range msgs {
			if m.From == "hook:gh" {
				ids = append(ids, formatMessageID(m.Seq))
			}
		}
		require.Len(t, ids, 1, who)
		require.Contains(t, d.MessageIDs, ids[0], "the receipt names the committed message's id (%s)", who)
	}

	// Working by presence: the copy waits; idle, it goes.
	e.srv.core.presence.setActivity("alice", stateWorking)
	res, err = e.srv.notify.Ingress(ctx, "", "w", nil, signed(), []byte("{}"))
	require.NoError(t, err)
	require.Equal(t, "pending", res.Status)
	e.srv.core.presence.setActivity("alice", stateIdle)
	_, err = e.srv.notify.Pass(ctx)
	require.NoError(t, err)
	d, err = e.st.GetHookDelivery(ctx, res.ID)
	require.NoError(t, err)
	require.Equal(t, "delivered", d.Status)
}

// hookEvents are the registry events member received on thread.
func (e *hookEnv) hookEvents(t *testing.T, member, thread string) []string {
	t.Helper()
	msgs, err := e.st.MessagesFor(context.Background(), member, 0, 500)
	require.NoError(t, err)
	var out []string
	for _, m := range msgs {
		var d struct{ Kind, Event string }
		require.NoError(t, json.Unmarshal(m.Data, &d))
		if m.Thread == thread && d.Kind == "notification_endpoint" {
			out = append(out, d.Event)
		}
	}
	return out
}

// The events of an endpoint reach the managers (the team's
// notifications.manage holders) and its direct targets, and its hook:
// thread is read by them alone.
func TestHookWiringEvents(t *testing.T) {
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

	for _, tc := range []struct {
		who string
		ok  bool
	}{{"admin", true}, {"alice", true}, {"bob", true}, {"carol", false}} {
		_, err := e.broker.History(e.as(tc.who), &apiv1.HistoryRequest{Thread: "hook:ev"})
		if tc.ok {
			require.NoError(t, err, tc.who)
		} else {
			requireCode(t, err, apierr.CodeForbidden, tc.who)
		}
	}
	// A profile's thread is the managers'.
	_, err = e.n.CreateNotificationProfile(a, &apiv1.CreateNotificationProfileRequest{Slug: "gh", Auth: &apiv1.NotificationAuth{Kind: "header-secret"}})
	require.NoError(t, err)
	_, err = e.broker.History(a, &apiv1.HistoryRequest{Thread: "hook-profile:gh"})
	require.NoError(t, err)
	_, err = e.broker.History(e.as("alice"), &apiv1.HistoryRequest{Thread: "hook-profile:gh"})
	requireCode(t, err, apierr.CodeForbidden)
	// No event carries the secret.
	msgs, err := e.st.MessagesFor(context.Background(), "admin", 0, 500)
	require.NoError(t, err)
	b, err := json.Marshal(msgs)
	require.NoError(t, err)
	require.NotContains(t, string(b), "s3cret")
}

func TestHookWiringBriefing(t *testing.T) {
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
		b, err := e.broker.GetBriefing(e.as(tc.who), &apiv1.GetBriefingRequest{})
		require.NoError(t, err)
		sec := b.GetExternalNotifications()
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
