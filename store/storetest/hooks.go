package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/store"
)

// hookTests are the subtests of HookStore; RunAll runs them.
var hookTests = []suiteTest{
	{"CreateGetHookEndpoint", testCreateGetHookEndpoint},
	{"HookEndpointConflictsAndProfileRef", testHookEndpointConflicts},
	{"UpdateHookEndpoint", testUpdateHookEndpoint},
	{"HookEndpointSecret", testHookEndpointSecret},
	{"HookProfiles", testHookProfiles},
	{"HookProfileDeleteRefused", testHookProfileDeleteRefused},
	{"HookDeliveries", testHookDeliveries},
	{"HookDeliveriesCascade", testHookDeliveriesCascade},
	{"HookDedupeSeen", testHookDedupeSeen},
	{"HookWithTxRollback", testHookWithTxRollback},
	{"HookPending", testHookPending},
	{"HookPendingCascade", testHookPendingCascade},
	{"PruneHookDeliveries", testPruneHookDeliveries},
	{"PruneRejectedHookDeliveries", testPruneRejectedHookDeliveries},
}

func hookEndpoint(slug string) store.HookEndpoint {
	return store.HookEndpoint{
		Slug: slug, DisplayName: "Hook " + slug, Targets: []byte(`[{"member":"alice"}]`),
		Auth: store.HookAuth{Kind: "hmac-sha256", HeaderName: "x-sig", Prefix: "sha256="}, Filters: []byte(`[]`),
		Policy: []byte(`{"ifOffline":"drop"}`), Enabled: true, Level: "info",
		CreatedAt: at(time.Minute), UpdatedAt: at(time.Minute),
	}
}

func testCreateGetHookEndpoint(t *testing.T, s store.Store) {
	ctx := t.Context()
	in := hookEndpoint("gh")
	in.Template, in.DedupeHeader, in.Secret = "{{payload.a}}", "x-id", []byte(`{"v":1}`)
	require.NoError(t, s.CreateHookEndpoint(ctx, in))
	got, err := s.GetHookEndpoint(ctx, "gh")
	require.NoError(t, err)
	require.Equal(t, "Hook gh", got.DisplayName)
	require.JSONEq(t, `[{"member":"alice"}]`, string(got.Targets))
	require.Equal(t, in.Auth, got.Auth)
	require.Empty(t, got.AuthProfile)
	require.JSONEq(t, `{"ifOffline":"drop"}`, string(got.Policy))
	require.Equal(t, "{{payload.a}}", got.Template)
	require.Equal(t, "x-id", got.DedupeHeader)
	require.True(t, got.Enabled)
	require.Equal(t, "info", got.Level)
	require.Equal(t, []byte(`{"v":1}`), got.Secret)
	require.Equal(t, ms(in.CreatedAt), ms(got.CreatedAt))
	_, err = s.GetHookEndpoint(ctx, "nope")
	require.ErrorIs(t, err, store.ErrNotFound)
}

func testHookEndpointConflicts(t *testing.T, s store.Store) {
	ctx := t.Context()
	require.NoError(t, s.CreateHookEndpoint(ctx, hookEndpoint("b")))
	require.NoError(t, s.CreateHookEndpoint(ctx, hookEndpoint("a")))
	require.ErrorIs(t, s.CreateHookEndpoint(ctx, hookEndpoint("a")), store.ErrConflict)
	e := hookEndpoint("c")
	e.AuthProfile = "missing"
	require.ErrorIs(t, s.CreateHookEndpoint(ctx, e), store.ErrPrecondition)
	list, err := s.ListHookEndpoints(ctx)
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, "a", list[0].Slug)
	require.Equal(t, "b", list[1].Slug)
}

func testUpdateHookEndpoint(t *testing.T, s store.Store) {
	ctx := t.Context()
	in := hookEndpoint("a")
	in.Secret = []byte("sealed")
	require.NoError(t, s.CreateHookEndpoint(ctx, in))
	require.NoError(t, s.CreateHookProfile(ctx, store.HookProfile{Slug: "p", Auth: store.HookAuth{Kind: "header-secret"}}))
	up := in
	up.Secret = nil
	up.DisplayName, up.Targets, up.AuthProfile, up.Enabled, up.Level = "New", []byte(`[{"channel":"c1"}]`), "p", false, "error"
	up.UpdatedAt = at(2 * time.Minute)
	require.NoError(t, s.UpdateHookEndpoint(ctx, up))
	got, err := s.GetHookEndpoint(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, "New", got.DisplayName)
	require.JSONEq(t, `[{"channel":"c1"}]`, string(got.Targets))
	require.Equal(t, "p", got.AuthProfile)
	require.False(t, got.Enabled)
	require.Equal(t, "error", got.Level)
	require.Equal(t, []byte("sealed"), got.Secret, "update leaves the secret")
	require.Equal(t, ms(at(2*time.Minute)), ms(got.UpdatedAt))
	up.AuthProfile = "nope"
	require.ErrorIs(t, s.UpdateHookEndpoint(ctx, up), store.ErrPrecondition)
	up.Slug = "zz"
	up.AuthProfile = ""
	require.ErrorIs(t, s.UpdateHookEndpoint(ctx, up), store.ErrNotFound)
}

func testHookEndpointSecret(t *testing.T, s store.Store) {
	ctx := t.Context()
	require.NoError(t, s.CreateHookEndpoint(ctx, hookEndpoint("a")))
	require.NoError(t, s.SetHookEndpointSecret(ctx, "a", []byte("x"), at(time.Hour)))
	got, err := s.GetHookEndpoint(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, []byte("x"), got.Secret)
	require.NoError(t, s.SetHookEndpointSecret(ctx, "a", nil, at(time.Hour)))
	got, err = s.GetHookEndpoint(ctx, "a")
	require.NoError(t, err)
	require.Nil(t, got.Secret)
	require.ErrorIs(t, s.SetHookEndpointSecret(ctx, "b", []byte("x"), at(time.Hour)), store.ErrNotFound)
}

func testHookProfiles(t *testing.T, s store.Store) {
	ctx := t.Context()
	require.NoError(t, s.CreateHookProfile(ctx, store.HookProfile{Slug: "p", Description: "d", Auth: store.HookAuth{Kind: "hmac-sha256", HeaderName: "h", Prefix: "x="}}))
	require.ErrorIs(t, s.CreateHookProfile(ctx, store.HookProfile{Slug: "p", Auth: store.HookAuth{Kind: "hmac-sha256"}}), store.ErrConflict)
	e := hookEndpoint("a")
	e.AuthProfile = "p"
	require.NoError(t, s.CreateHookEndpoint(ctx, e))
	got, err := s.GetHookProfile(ctx, "p")
	require.NoError(t, err)
	require.Equal(t, "d", got.Description)
	require.Equal(t, store.HookAuth{Kind: "hmac-sha256", HeaderName: "h", Prefix: "x="}, got.Auth)
	require.Equal(t, 1, got.EndpointCount)
	require.Nil(t, got.Secret)
	require.NoError(t, s.SetHookProfileSecret(ctx, "p", []byte("sealed"), at(time.Hour)))
	require.NoError(t, s.UpdateHookProfile(ctx, store.HookProfile{Slug: "p", Description: "", Auth: store.HookAuth{Kind: "header-secret"}}))
	list, err := s.ListHookProfiles(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, []byte("sealed"), list[0].Secret)
	require.Equal(t, "header-secret", list[0].Auth.Kind)
	require.Empty(t, list[0].Description)
	require.Equal(t, 1, list[0].EndpointCount)
	_, err = s.GetHookProfile(ctx, "q")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.ErrorIs(t, s.UpdateHookProfile(ctx, store.HookProfile{Slug: "q"}), store.ErrNotFound)
	require.ErrorIs(t, s.SetHookProfileSecret(ctx, "q", nil, at(0)), store.ErrNotFound)
}

func testHookProfileDeleteRefused(t *testing.T, s store.Store) {
	ctx := t.Context()
	require.NoError(t, s.CreateHookProfile(ctx, store.HookProfile{Slug: "p", Auth: store.HookAuth{Kind: "header-secret"}}))
	e := hookEndpoint("a")
	e.AuthProfile = "p"
	require.NoError(t, s.CreateHookEndpoint(ctx, e))
	require.ErrorIs(t, s.DeleteHookProfile(ctx, "p"), store.ErrConflict)
	_, err := s.GetHookProfile(ctx, "p")
	require.NoError(t, err)
	require.NoError(t, s.DeleteHookEndpoint(ctx, "a"))
	require.NoError(t, s.DeleteHookProfile(ctx, "p"))
	require.ErrorIs(t, s.DeleteHookProfile(ctx, "p"), store.ErrNotFound)
}

func delivery(id, endpoint string, received time.Duration) store.HookDelivery {
	return store.HookDelivery{ID: id, Endpoint: endpoint, Status: "delivered", ReceivedAt: at(received), Size: 3, Body: []byte("abc")}
}

func testHookDeliveries(t *testing.T, s store.Store) {
	ctx := t.Context()
	require.NoError(t, s.CreateHookEndpoint(ctx, hookEndpoint("a")))
	require.NoError(t, s.CreateHookEndpoint(ctx, hookEndpoint("b")))
	for i, id := range []string{"d1", "d2", "d3"} {
		require.NoError(t, s.AddHookDelivery(ctx, delivery(id, "a", time.Duration(i)*time.Second)))
	}
	require.NoError(t, s.AddHookDelivery(ctx, delivery("o1", "b", 0)))
	require.ErrorIs(t, s.AddHookDelivery(ctx, delivery("d1", "a", 0)), store.ErrConflict)
	require.ErrorIs(t, s.AddHookDelivery(ctx, delivery("x", "nope", 0)), store.ErrPrecondition)
	r := delivery("d4", "a", 10*time.Second)
	r.Status, r.Reason, r.DedupeKey, r.IfOffline, r.IfBusy, r.Level, r.Body, r.Size = "rejected", "missing header", "k", "queue", "wait", "error", []byte{}, 0
	require.NoError(t, s.AddHookDelivery(ctx, r))
	require.NoError(t, s.SetHookDeliveryMessages(ctx, "d1", []string{"0000000000000001", "0000000000000002"}))
	require.ErrorIs(t, s.SetHookDeliveryMessages(ctx, "zz", nil), store.ErrNotFound)

	got, err := s.GetHookDelivery(ctx, "d1")
	require.NoError(t, err)
	require.Equal(t, []byte("abc"), got.Body)
	require.Equal(t, []string{"0000000000000001", "0000000000000002"}, got.MessageIDs)
	require.Equal(t, 3, got.Size)
	got, err = s.GetHookDelivery(ctx, "d4")
	require.NoError(t, err)
	require.Equal(t, []byte{}, got.Body)
	require.Equal(t, "missing header", got.Reason)
	require.Equal(t, []string{"queue", "wait", "error", "k"}, []string{got.IfOffline, got.IfBusy, got.Level, got.DedupeKey})
	require.Empty(t, got.MessageIDs)
	_, err = s.GetHookDelivery(ctx, "nope")
	require.ErrorIs(t, err, store.ErrNotFound)

	list, err := s.ListHookDeliveries(ctx, store.HookDeliveryFilter{Endpoint: "a"})
	require.NoError(t, err)
	var ids []string
	for _, d := range list {
		ids = append(ids, d.ID)
		require.Nil(t, d.Body, "a list leaves bodies out")
	}
	require.Equal(t, []string{"d4", "d3", "d2", "d1"}, ids)
	list, err = s.ListHookDeliveries(ctx, store.HookDeliveryFilter{Endpoint: "a", Before: at(2 * time.Second), Limit: 1, WithBody: true})
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, "d2", list[0].ID)
	require.Equal(t, []byte("abc"), list[0].Body)
}

func testHookDeliveriesCascade(t *testing.T, s store.Store) {
	ctx := t.Context()
	require.NoError(t, s.CreateHookEndpoint(ctx, hookEndpoint("a")))
	require.NoError(t, s.AddHookDelivery(ctx, delivery("d1", "a", 0)))
	require.NoError(t, s.DeleteHookEndpoint(ctx, "a"))
	_, err := s.GetHookDelivery(ctx, "d1")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.ErrorIs(t, s.DeleteHookEndpoint(ctx, "a"), store.ErrNotFound)
	// A new endpoint of the same slug starts with no receipts.
	require.NoError(t, s.CreateHookEndpoint(ctx, hookEndpoint("a")))
	list, err := s.ListHookDeliveries(ctx, store.HookDeliveryFilter{Endpoint: "a"})
	require.NoError(t, err)
	require.Empty(t, list)
}

func testHookDedupeSeen(t *testing.T, s store.Store) {
	ctx := t.Context()
	require.NoError(t, s.CreateHookEndpoint(ctx, hookEndpoint("a")))
	require.NoError(t, s.CreateHookEndpoint(ctx, hookEndpoint("b")))
	add := func(id, ep, status, key string, when time.Duration) {
		d := delivery(id, ep, when)
		d.Status, d.DedupeKey = status, key
		require.NoError(t, s.AddHookDelivery(ctx, d))
	}
	add("r", "a", "rejected", "k-rej", time.Hour)
	add("u", "a", "duplicate", "k-dup", time.Hour)
	add("f", "a", "filtered", "k-f", time.Hour)
	add("o", "a", "delivered", "k-old", 0)
	add("x", "b", "delivered", "k-b", time.Hour)
	for _, tc := range []struct {
		key  string
		want bool
	}{{"k-rej", false}, {"k-dup", false}, {"k-f", true}, {"k-old", false}, {"k-b", false}, {"none", false}} {
		got, err := s.HookDedupeSeen(ctx, "a", tc.key, at(time.Minute))
		require.NoError(t, err)
		require.Equal(t, tc.want, got, tc.key)
	}
	got, err := s.HookDedupeSeen(ctx, "a", "k-old", at(0))
	require.NoError(t, err)
	require.True(t, got, "the window's start is inclusive")
}

func testHookWithTxRollback(t *testing.T, s store.Store) {
	ctx := t.Context()
	require.NoError(t, s.CreateHookEndpoint(ctx, hookEndpoint("a")))
	err := s.WithTx(ctx, func(tx store.Tx) error {
		require.NoError(t, tx.AddHookDelivery(ctx, delivery("d1", "a", 0)))
		require.NoError(t, tx.SetHookDeliveryMessages(ctx, "d1", []string{"1"}))
		seen, err := tx.HookDedupeSeen(ctx, "a", "k", at(0))
		require.NoError(t, err)
		require.False(t, seen)
		return store.ErrConflict
	})
	require.ErrorIs(t, err, store.ErrConflict)
	_, err = s.GetHookDelivery(ctx, "d1")
	require.ErrorIs(t, err, store.ErrNotFound)
}

func pending(delivery, ep, member, kind string, received, due time.Duration) store.HookPending {
	return store.HookPending{
		Delivery: delivery, Endpoint: ep, Member: member, Kind: kind,
		ReceivedAt: at(received), DueAt: at(due), Level: "info", Items: []byte(`[{"id":"` + delivery + `"}]`),
	}
}

func testHookPending(t *testing.T, s store.Store) {
	ctx := t.Context()
	require.NoError(t, s.CreateHookEndpoint(ctx, hookEndpoint("a")))
	require.NoError(t, s.CreateHookEndpoint(ctx, hookEndpoint("b")))
	_, ok, err := s.NextHookPendingDue(ctx)
	require.NoError(t, err)
	require.False(t, ok)
	for _, d := range []store.HookDelivery{delivery("d1", "a", 0), delivery("d2", "a", time.Minute), delivery("d3", "b", 2*time.Minute)} {
		d.Status = "pending"
		require.NoError(t, s.AddHookDelivery(ctx, d))
	}
	require.NoError(t, s.AddHookPending(ctx, pending("d1", "a", "alice", store.HookQueue, 0, time.Hour)))
	require.NoError(t, s.AddHookPending(ctx, pending("d1", "a", "bob", store.HookWait, 0, 10*time.Minute)))
	require.NoError(t, s.AddHookPending(ctx, pending("d2", "a", "alice", store.HookQueue, time.Minute, 2*time.Hour)))
	require.NoError(t, s.AddHookPending(ctx, pending("d3", "b", "", store.HookDebounce, 2*time.Minute, 3*time.Minute)))
	require.ErrorIs(t, s.AddHookPending(ctx, pending("d1", "a", "alice", store.HookQueue, 0, time.Hour)), store.ErrConflict)
	require.ErrorIs(t, s.AddHookPending(ctx, pending("nope", "a", "alice", store.HookQueue, 0, time.Hour)), store.ErrPrecondition)

	got, err := s.ListHookPending(ctx, store.HookPendingFilter{Kind: store.HookQueue, Member: "alice"})
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, []string{"d2", "d1"}, []string{got[0].Delivery, got[1].Delivery}, "newest first")
	want := pending("d2", "a", "alice", store.HookQueue, time.Minute, 2*time.Hour)
	want.ReceivedAt, want.DueAt = want.ReceivedAt.Truncate(time.Millisecond), want.DueAt.Truncate(time.Millisecond)
	require.Equal(t, want, got[0])
	got, err = s.ListHookPending(ctx, store.HookPendingFilter{DueBy: at(10 * time.Minute)})
	require.NoError(t, err)
	require.Len(t, got, 2, "the wait row and the debounce row are due")
	require.Equal(t, "a", got[0].Endpoint, "by endpoint")
	got, err = s.ListHookPending(ctx, store.HookPendingFilter{Endpoint: "b", Kind: store.HookDebounce})
	require.NoError(t, err)
	require.Len(t, got, 1)

	members, err := s.HookPendingMembers(ctx, store.HookQueue)
	require.NoError(t, err)
	require.Equal(t, []string{"alice"}, members)
	members, err = s.HookPendingMembers(ctx, store.HookDebounce)
	require.NoError(t, err)
	require.Empty(t, members, "a debounce row names no member")
	due, ok, err := s.NextHookPendingDue(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, at(3*time.Minute).Truncate(time.Millisecond), due)
	n, err := s.CountHookPending(ctx, "d1")
	require.NoError(t, err)
	require.Equal(t, 2, n)

	require.NoError(t, s.DeleteHookPending(ctx, "d1", "bob", store.HookWait))
	require.ErrorIs(t, s.DeleteHookPending(ctx, "d1", "bob", store.HookWait), store.ErrNotFound)
	n, err = s.CountHookPending(ctx, "d1")
	require.NoError(t, err)
	require.Equal(t, 1, n)

	require.NoError(t, s.SetHookDeliveryMessages(ctx, "d1", []string{"m1"}))
	require.NoError(t, s.SetHookDeliveryStatus(ctx, "d1", "delivered", "why", []string{"m2"}))
	d, err := s.GetHookDelivery(ctx, "d1")
	require.NoError(t, err)
	require.Equal(t, "delivered", d.Status)
	require.Equal(t, "why", d.Reason)
	require.Equal(t, []string{"m1", "m2"}, d.MessageIDs)
	require.ErrorIs(t, s.SetHookDeliveryStatus(ctx, "nope", "delivered", "", nil), store.ErrNotFound)
}

func testHookPendingCascade(t *testing.T, s store.Store) {
	ctx := t.Context()
	require.NoError(t, s.CreateHookEndpoint(ctx, hookEndpoint("a")))
	require.NoError(t, s.AddHookDelivery(ctx, delivery("d1", "a", 0)))
	require.NoError(t, s.AddHookPending(ctx, pending("d1", "a", "alice", store.HookQueue, 0, time.Hour)))
	require.NoError(t, s.DeleteHookEndpoint(ctx, "a"))
	got, err := s.ListHookPending(ctx, store.HookPendingFilter{})
	require.NoError(t, err)
	require.Empty(t, got, "deleting the endpoint deletes its queued rows")
	_, ok, err := s.NextHookPendingDue(ctx)
	require.NoError(t, err)
	require.False(t, ok)
}

func testPruneHookDeliveries(t *testing.T, s store.Store) {
	ctx := t.Context()
	require.NoError(t, s.CreateHookEndpoint(ctx, hookEndpoint("a")))
	for i, id := range []string{"old1", "old2", "old3", "held", "new"} {
		d := delivery(id, "a", time.Duration(i)*time.Minute)
		if id == "new" {
			d.ReceivedAt = at(time.Hour)
		}
		require.NoError(t, s.AddHookDelivery(ctx, d))
	}
	require.NoError(t, s.AddHookPending(ctx, pending("held", "a", "alice", store.HookQueue, 3*time.Minute, time.Hour)))

	n, err := s.PruneHookDeliveries(ctx, at(30*time.Minute), 2)
	require.NoError(t, err)
	require.Equal(t, 2, n, "a batch at most")
	n, err = s.PruneHookDeliveries(ctx, at(30*time.Minute), 2)
	require.NoError(t, err)
	require.Equal(t, 1, n, "old3; held has a pending row")
	list, err := s.ListHookDeliveries(ctx, store.HookDeliveryFilter{Endpoint: "a", Limit: 10})
	require.NoError(t, err)
	var ids []string
	for _, d := range list {
		ids = append(ids, d.ID)
	}
	require.ElementsMatch(t, []string{"held", "new"}, ids)
}

func testPruneRejectedHookDeliveries(t *testing.T, s store.Store) {
	ctx := t.Context()
	require.NoError(t, s.CreateHookEndpoint(ctx, hookEndpoint("a")))
	require.NoError(t, s.CreateHookEndpoint(ctx, hookEndpoint("b")))
	add := func(id, endpoint, status string, received time.Duration) {
		d := delivery(id, endpoint, received)
		d.Status = status
		require.NoError(t, s.AddHookDelivery(ctx, d))
	}
	add("ok-old", "a", "delivered", 0)
	for i, id := range []string{"r1", "r2", "r3", "r4"} {
		add(id, "a", "rejected", time.Duration(i+1)*time.Minute)
	}
	add("b-old", "b", "rejected", 0)
	add("b-new", "b", "rejected", time.Hour)

	// Endpoint a: the newest two rejected, and none before 90 s.
	n, err := s.PruneRejectedHookDeliveries(ctx, "a", at(90*time.Second), 2)
	require.NoError(t, err)
	require.Equal(t, 2, n, "r1 by age, r2 past the newest two")
	// Every endpoint, by age only.
	n, err = s.PruneRejectedHookDeliveries(ctx, "", at(30*time.Minute), 0)
	require.NoError(t, err)
	require.Equal(t, 3, n, "r3, r4 and b-old; never a delivered one")
	var ids []string
	for _, e := range []string{"a", "b"} {
		list, err := s.ListHookDeliveries(ctx, store.HookDeliveryFilter{Endpoint: e, Limit: 10})
		require.NoError(t, err)
		for _, d := range list {
			ids = append(ids, d.ID)
		}
	}
	require.ElementsMatch(t, []string{"ok-old", "b-new"}, ids)
}
