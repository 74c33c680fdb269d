package storetest

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/store"
)

// pushSubTests are the subtests of PushSubscriptionStore; RunAll runs
// them.
var pushSubTests = []suiteTest{
	{"PutListPushSubscriptions", testPutListPushSubscriptions},
	{"PutPushSubscriptionOwned", testPutPushSubscriptionOwned},
	{"MovePushSubscription", testMovePushSubscription},
	{"PutPushSubscriptionUnknownMember", testPutPushSubscriptionUnknownMember},
	{"DeletePushSubscription", testDeletePushSubscription},
}

func pushSub(id, memberName, endpoint string) store.PushSubscription {
	return store.PushSubscription{
		ID:        id,
		Member:    memberName,
		Endpoint:  endpoint,
		P256dh:    "p256dh-" + id,
		Auth:      "auth-" + id,
		CreatedAt: at(time.Minute),
	}
}

func mustPutPushSubs(t *testing.T, s store.PushSubscriptionStore, subs ...store.PushSubscription) {
	t.Helper()
	for _, sub := range subs {
		got, err := s.PutPushSubscription(t.Context(), sub)
		require.NoError(t, err)
		require.Equal(t, viewPushSub(sub), viewPushSub(got))
	}
}

// pushSubView is a PushSubscription with a comparable time.
type pushSubView struct {
	ID, Member, Endpoint, P256dh, Auth string
	CreatedAt                          int64
}

func viewPushSub(p store.PushSubscription) pushSubView {
	return pushSubView{p.ID, p.Member, p.Endpoint, p.P256dh, p.Auth, ms(p.CreatedAt)}
}

// viewPushSubs returns views ordered by id: the order of a list is not part
// of the contract.
func viewPushSubs(ps []store.PushSubscription) []pushSubView {
	out := make([]pushSubView, 0, len(ps))
	for _, p := range ps {
		out = append(out, viewPushSub(p))
	}
	slices.SortFunc(out, func(a, b pushSubView) int { return strings.Compare(a.ID, b.ID) })
	return out
}

func testPutListPushSubscriptions(t *testing.T, s store.Store) {
	mustPutMembers(t, s, "alice", "bob", "carol")
	a1 := pushSub("a1", "alice", "https://push.example/1")
	a1.CreatedAt = at(time.Hour).Add(789 * time.Microsecond).In(time.FixedZone("east", 3600))
	a2 := pushSub("a2", "alice", "https://push.example/2?x=y&z=ü")
	b1 := pushSub("b1", "bob", "https://other.example/3")
	mustPutPushSubs(t, s, a1, b1, a2)

	tests := []struct {
		name   string
		member string
		want   []store.PushSubscription
	}{
		{"member", "alice", []store.PushSubscription{a1, a2}},
		{"other member", "bob", []store.PushSubscription{b1}},
		{"everyone", "", []store.PushSubscription{a1, a2, b1}},
		{"none", "carol", nil},
		{"unknown member", "nobody", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.ListPushSubscriptions(t.Context(), tc.member)
			require.NoError(t, err)
			require.NotNil(t, got)
			require.Equal(t, viewPushSubs(tc.want), viewPushSubs(got))
		})
	}
}

func testPutPushSubscriptionOwned(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice", "bob")
	const endpoint = "https://push.example/shared"
	orig := pushSub("p1", "alice", endpoint)
	other := pushSub("p2", "alice", "https://push.example/other")
	mustPutPushSubs(t, s, orig, other)
	current := orig

	steps := []struct {
		name     string
		put      store.PushSubscription
		conflict bool
	}{
		{name: "same member, new keys", put: store.PushSubscription{ID: "p3", Member: "alice", Endpoint: endpoint, P256dh: "k2", Auth: "a2", CreatedAt: at(time.Hour)}},
		{name: "other member", put: store.PushSubscription{ID: "p4", Member: "bob", Endpoint: endpoint, P256dh: "k3", Auth: "a3", CreatedAt: at(2 * time.Hour)}, conflict: true},
		{name: "same member again", put: store.PushSubscription{ID: "p5", Member: "alice", Endpoint: endpoint, P256dh: "k4", Auth: "a4"}},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			got, err := s.PutPushSubscription(t.Context(), step.put)
			if step.conflict {
				require.ErrorIs(t, err, store.ErrConflict)
			} else {
				require.NoError(t, err)
				// The id and creation time stay; the keys are the new ones.
				current.P256dh, current.Auth = step.put.P256dh, step.put.Auth
				require.Equal(t, viewPushSub(current), viewPushSub(got))
			}
			all, err := s.ListPushSubscriptions(t.Context(), "")
			require.NoError(t, err)
			require.Equal(t, viewPushSubs([]store.PushSubscription{current, other}), viewPushSubs(all))
			bobs, err := s.ListPushSubscriptions(t.Context(), "bob")
			require.NoError(t, err)
			require.Empty(t, bobs, "another member's endpoint is never moved")
		})
	}
	// The ids the later puts offered were not stored.
	for _, id := range []string{"p3", "p4", "p5"} {
		require.ErrorIs(t, s.DeletePushSubscription(ctx, "", id), store.ErrNotFound, id)
	}
}

func testPutPushSubscriptionUnknownMember(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice")
	orig := pushSub("p1", "alice", "https://push.example/1")
	mustPutPushSubs(t, s, orig)

	tests := []struct {
		name string
		sub  store.PushSubscription
		want error
	}{
		{"new endpoint", pushSub("p2", "nobody", "https://push.example/2"), store.ErrPrecondition},
		// The endpoint is alice's, whoever asks.
		{"known endpoint by nobody", pushSub("p3", "nobody", orig.Endpoint), store.ErrConflict},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.PutPushSubscription(t.Context(), tc.sub)
			require.ErrorIs(t, err, tc.want)
		})
	}
	all, err := s.ListPushSubscriptions(ctx, "")
	require.NoError(t, err)
	require.Equal(t, []pushSubView{viewPushSub(orig)}, viewPushSubs(all))
}

func testDeletePushSubscription(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice", "bob")
	a1, a2 := pushSub("a1", "alice", "https://push.example/a1"), pushSub("a2", "alice", "https://push.example/a2")
	b1, b2 := pushSub("b1", "bob", "https://push.example/b1"), pushSub("b2", "bob", "https://push.example/b2")
	mustPutPushSubs(t, s, a1, a2, b1, b2)

	notFound := []struct {
		name, member, id string
	}{
		{"other member's id", "bob", "a1"},
		{"unknown id", "alice", "nope"},
		{"unknown member", "nobody", "a1"},
		{"unknown id, any member", "", "nope"},
		{"endpoint is not an id", "alice", a1.Endpoint},
	}
	for _, tc := range notFound {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, s.DeletePushSubscription(t.Context(), tc.member, tc.id), store.ErrNotFound)
		})
	}
	all, err := s.ListPushSubscriptions(ctx, "")
	require.NoError(t, err)
	require.Equal(t, viewPushSubs([]store.PushSubscription{a1, a2, b1, b2}), viewPushSubs(all))

	require.NoError(t, s.DeletePushSubscription(ctx, "alice", "a1"))
	require.NoError(t, s.DeletePushSubscription(ctx, "", "b2")) // any member's
	all, err = s.ListPushSubscriptions(ctx, "")
	require.NoError(t, err)
	require.Equal(t, viewPushSubs([]store.PushSubscription{a2, b1}), viewPushSubs(all))

	for _, member := range []string{"alice", ""} {
		require.ErrorIs(t, s.DeletePushSubscription(ctx, member, "a1"), store.ErrNotFound, "already deleted, member %q", member)
	}
	// The endpoint of a deleted subscription can be subscribed again.
	again := pushSub("a3", "bob", a1.Endpoint)
	mustPutPushSubs(t, s, again)
}

func testMovePushSubscription(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice", "bob")
	sub := pushSub("p1", "alice", "https://push.example/shared")
	mustPutPushSubs(t, s, sub)

	got, err := s.GetPushSubscriptionByEndpoint(ctx, sub.Endpoint)
	require.NoError(t, err)
	require.Equal(t, viewPushSub(sub), viewPushSub(got))
	_, err = s.GetPushSubscriptionByEndpoint(ctx, "https://push.example/none")
	require.ErrorIs(t, err, store.ErrNotFound)

	moved, err := s.MovePushSubscription(ctx, sub.Endpoint, "bob")
	require.NoError(t, err)
	want := sub
	want.Member = "bob"
	require.Equal(t, viewPushSub(want), viewPushSub(moved), "id, keys and creation time stay")
	alices, err := s.ListPushSubscriptions(ctx, "alice")
	require.NoError(t, err)
	require.Empty(t, alices)

	_, err = s.MovePushSubscription(ctx, "https://push.example/none", "bob")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.MovePushSubscription(ctx, sub.Endpoint, "nobody")
	require.ErrorIs(t, err, store.ErrPrecondition)
}
