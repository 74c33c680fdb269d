package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/store"
)

// memberTests are the subtests of MemberStore, with what removing a
// member takes along; RunAll runs them.
var memberTests = []suiteTest{
	{"PutGetMember", testPutGetMember},
	{"PutMemberUpdates", testPutMemberUpdates},
	{"RoleNilRoundTrip", testRoleNilRoundTrip},
	{"PermissionsNeverNil", testPermissionsNeverNil},
	{"GetMemberNotFound", testGetMemberNotFound},
	{"ListMembersByName", testListMembersByName},
	{"ReplaceMembers", testReplaceMembers},
	{"ReplaceMembersEmpty", testReplaceMembersEmpty},
	{"DeleteMember", testDeleteMember},
	{"MemberSinceSeq", testMemberSinceSeq},
	{"FormerMembers", testFormerMembers},
	{"MemberIDs", testMemberIDs},
	{"DeleteMemberCascades", testMemberRemovalCascades(func(t *testing.T, s store.Store) {
		require.NoError(t, s.DeleteMember(t.Context(), "bob"))
	})},
	{"DeleteMemberInTxCascades", testMemberRemovalCascades(func(t *testing.T, s store.Store) {
		require.NoError(t, s.WithTx(t.Context(), func(tx store.Tx) error {
			return tx.DeleteMember(t.Context(), "bob")
		}))
	})},
	{"ReplaceMembersCascades", testMemberRemovalCascades(func(t *testing.T, s store.Store) {
		require.NoError(t, s.ReplaceMembers(t.Context(), []store.Member{member("alice")}))
	})},
}

func testPutGetMember(t *testing.T, s store.Store) {
	full := member("alice")
	tests := []struct {
		name string
		m    store.Member
	}{
		{"full", full},
		{"nil role", store.Member{Name: "bob", Permissions: []string{"read"}}},
		{"empty role", store.Member{Name: "carol", Role: &store.Role{}}},
		{"unicode", store.Member{Name: "dörte", Role: &store.Role{Title: "ü\"'\\", Description: "line\nbreak"}, Instructions: "日本", Permissions: []string{"a b", "ç"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, s.PutMember(t.Context(), tc.m))
			got, err := s.GetMember(t.Context(), tc.m.Name)
			require.NoError(t, err)
			require.Equal(t, contentOf(tc.m), contentOf(got))
			require.NotNil(t, got.Permissions)
		})
	}
}

func testPutMemberUpdates(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice")
	changed := store.Member{
		Name:         "alice",
		Role:         &store.Role{Title: "New title", Description: "New description."},
		Instructions: "New instructions.",
		Permissions:  []string{"admin"},
	}
	require.NoError(t, s.PutMember(ctx, changed))
	got, err := s.GetMember(ctx, "alice")
	require.NoError(t, err)
	require.Equal(t, contentOf(changed), contentOf(got))

	changed.Role = nil
	changed.Permissions = nil
	require.NoError(t, s.PutMember(ctx, changed))
	got, err = s.GetMember(ctx, "alice")
	require.NoError(t, err)
	require.Equal(t, contentOf(changed), contentOf(got))

	all, err := s.ListMembers(ctx)
	require.NoError(t, err)
	require.Len(t, all, 1)
}

func testRoleNilRoundTrip(t *testing.T, s store.Store) {
	ctx := t.Context()
	require.NoError(t, s.PutMember(ctx, store.Member{Name: "put"}))
	require.NoError(t, s.WithTx(ctx, func(tx store.Tx) error {
		return tx.PutMember(ctx, store.Member{Name: "tx"})
	}))
	got, err := s.GetMember(ctx, "put")
	require.NoError(t, err)
	require.Nil(t, got.Role)

	all, err := s.ListMembers(ctx)
	require.NoError(t, err)
	require.Len(t, all, 2)
	for _, m := range all {
		require.Nil(t, m.Role, m.Name)
	}

	require.NoError(t, s.ReplaceMembers(ctx, []store.Member{{Name: "replaced"}}))
	got, err = s.GetMember(ctx, "replaced")
	require.NoError(t, err)
	require.Nil(t, got.Role)

	// A role set back to nil on update reads back as nil too.
	require.NoError(t, s.PutMember(ctx, member("alice")))
	require.NoError(t, s.PutMember(ctx, store.Member{Name: "alice"}))
	got, err = s.GetMember(ctx, "alice")
	require.NoError(t, err)
	require.Nil(t, got.Role)
}

func testPermissionsNeverNil(t *testing.T, s store.Store) {
	tests := []struct {
		name  string
		perms []string
	}{
		{"nil", nil},
		{"empty", []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, s.PutMember(t.Context(), store.Member{Name: tc.name, Permissions: tc.perms}))
			got, err := s.GetMember(t.Context(), tc.name)
			require.NoError(t, err)
			require.NotNil(t, got.Permissions)
			require.Empty(t, got.Permissions)
		})
	}
	all, err := s.ListMembers(t.Context())
	require.NoError(t, err)
	for _, m := range all {
		require.NotNil(t, m.Permissions, m.Name)
	}
}

func testGetMemberNotFound(t *testing.T, s store.Store) {
	mustPutMembers(t, s, "alice")
	_, err := s.GetMember(t.Context(), "bob")
	require.ErrorIs(t, err, store.ErrNotFound)
}

func testListMembersByName(t *testing.T, s store.Store) {
	ctx := t.Context()
	all, err := s.ListMembers(ctx)
	require.NoError(t, err)
	require.Empty(t, all)

	mustPutMembers(t, s, "carol", "alice", "bob")
	all, err = s.ListMembers(ctx)
	require.NoError(t, err)
	require.Equal(t, []memberContent{
		contentOf(member("alice")), contentOf(member("bob")), contentOf(member("carol")),
	}, contentsOf(all))
}

func testReplaceMembers(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice", "bob", "carol")
	mustCreateTokens(t, s, token("a1", "alice"), token("b1", "bob"), token("b2", "bob"))
	require.NoError(t, s.CreateSession(ctx, session("alice", "alice")))
	require.NoError(t, s.CreateSession(ctx, session("bob", "bob")))

	alice := member("alice")
	alice.Instructions = "Changed."
	alice.Permissions = []string{"admin"}
	dave := member("dave")
	require.NoError(t, s.ReplaceMembers(ctx, []store.Member{dave, alice}))

	all, err := s.ListMembers(ctx)
	require.NoError(t, err)
	require.Equal(t, []memberContent{contentOf(alice), contentOf(dave)}, contentsOf(all))

	// bob's tokens and session went with him; alice's stay.
	for _, id := range []string{"b1", "b2"} {
		_, err = s.GetTokenByHash(ctx, tokenHash(id))
		require.ErrorIs(t, err, store.ErrNotFound, id)
	}
	_, err = s.GetSession(ctx, sessionHash("bob"))
	require.ErrorIs(t, err, store.ErrNotFound)
	toks, err := s.ListTokens(ctx, "bob")
	require.NoError(t, err)
	require.Empty(t, toks)

	_, err = s.GetTokenByHash(ctx, tokenHash("a1"))
	require.NoError(t, err)
	_, err = s.GetSession(ctx, sessionHash("alice"))
	require.NoError(t, err)
}

func testReplaceMembersEmpty(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice", "bob")
	mustCreateTokens(t, s, token("a1", "alice"))
	require.NoError(t, s.CreateSession(ctx, session("bob", "bob")))

	require.NoError(t, s.ReplaceMembers(ctx, nil))
	all, err := s.ListMembers(ctx)
	require.NoError(t, err)
	require.Empty(t, all)
	_, err = s.GetTokenByHash(ctx, tokenHash("a1"))
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.GetSession(ctx, sessionHash("bob"))
	require.ErrorIs(t, err, store.ErrNotFound)
}

func testDeleteMember(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice", "bob")
	mustCreateTokens(t, s, token("a1", "alice"), token("a2", "alice"), token("b1", "bob"))
	require.NoError(t, s.CreateSession(ctx, session("alice", "alice")))
	require.NoError(t, s.CreateSession(ctx, session("bob", "bob")))

	require.NoError(t, s.DeleteMember(ctx, "alice"))
	_, err := s.GetMember(ctx, "alice")
	require.ErrorIs(t, err, store.ErrNotFound)
	for _, id := range []string{"a1", "a2"} {
		_, err = s.GetTokenByHash(ctx, tokenHash(id))
		require.ErrorIs(t, err, store.ErrNotFound, id)
	}
	_, err = s.GetSession(ctx, sessionHash("alice"))
	require.ErrorIs(t, err, store.ErrNotFound)

	// bob is untouched.
	_, err = s.GetMember(ctx, "bob")
	require.NoError(t, err)
	_, err = s.GetTokenByHash(ctx, tokenHash("b1"))
	require.NoError(t, err)
	_, err = s.GetSession(ctx, sessionHash("bob"))
	require.NoError(t, err)

	tests := []struct {
		name   string
		member string
	}{
		{"already deleted", "alice"},
		{"never existed", "nobody"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, s.DeleteMember(t.Context(), tc.member), store.ErrNotFound)
		})
	}
}

// testMemberRemovalCascades returns a subtest checking that removing bob
// with remove takes his channel memberships and push subscriptions with him.
func testMemberRemovalCascades(remove func(t *testing.T, s store.Store)) func(t *testing.T, s store.Store) {
	return func(t *testing.T, s store.Store) {
		ctx := t.Context()
		mustPutMembers(t, s, "alice", "bob")
		mustCreateChannels(t, s, channel("c1", "eng", "alice"), channel("c2", "ops", "bob"))
		mustPutChannelMembers(t, s, store.ChannelMember{Channel: "c1", Member: "bob", Role: "member"})
		a := pushSub("pa", "alice", "https://push.example/a")
		mustPutPushSubs(t, s, a, pushSub("pb", "bob", "https://push.example/b"))
		sent := mustAppend(t, s, message("bob", "chan:c1", "bye", 0))[0]

		remove(t, s)

		requireChannelMembers(t, s, "c1", store.ChannelMember{Channel: "c1", Member: "alice", Role: "admin"})
		requireChannelMembers(t, s, "c2")
		mine, err := s.MemberChannels(ctx, "bob")
		require.NoError(t, err)
		require.Empty(t, mine)
		subs, err := s.ListPushSubscriptions(ctx, "bob")
		require.NoError(t, err)
		require.Empty(t, subs)
		subs, err = s.ListPushSubscriptions(ctx, "")
		require.NoError(t, err)
		require.Equal(t, []pushSubView{viewPushSub(a)}, viewPushSubs(subs))

		// Channels and history outlive the member.
		_, err = s.GetChannel(ctx, "c2")
		require.NoError(t, err)
		list, err := s.ListMessages(ctx, store.MessageFilter{Thread: "chan:c1"})
		require.NoError(t, err)
		require.Equal(t, []int64{sent.Seq}, seqsOf(list))

		// A returning member starts without memberships or subscriptions.
		mustPutMembers(t, s, "bob")
		mine, err = s.MemberChannels(ctx, "bob")
		require.NoError(t, err)
		require.Empty(t, mine)
		subs, err = s.ListPushSubscriptions(ctx, "bob")
		require.NoError(t, err)
		require.Empty(t, subs)
	}
}

// A member's SinceSeq is the newest message when it was inserted; updates
// keep it, and a member deleted and inserted again gets a new one.
func testMemberSinceSeq(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice", "bob")
	since := func(name string) int64 {
		m, err := s.GetMember(ctx, name)
		require.NoError(t, err)
		return m.SinceSeq
	}
	require.Zero(t, since("alice"), "no message yet")
	sent := mustAppend(t, s, message("bob", "dm:alice:bob", "one", 0), message("bob", "dm:alice:bob", "two", 0))
	newest := sent[1].Seq

	updated := member("alice")
	updated.Instructions = "changed"
	require.NoError(t, s.PutMember(ctx, updated))
	require.Zero(t, since("alice"), "an update keeps it")

	require.NoError(t, s.DeleteMember(ctx, "alice"))
	require.NoError(t, s.PutMember(ctx, member("alice")))
	require.Equal(t, newest, since("alice"), "a new member starts after every message so far")
	require.NoError(t, s.ReplaceMembers(ctx, []store.Member{member("alice"), member("carol")}))
	require.Equal(t, newest, since("alice"))
	require.Equal(t, newest, since("carol"))
	list, err := s.ListMembers(ctx)
	require.NoError(t, err)
	for _, m := range list {
		require.Equal(t, newest, m.SinceSeq, m.Name)
	}
}

// A deleted member is recorded once per id, and listed by deletion time.
func testFormerMembers(t *testing.T, s store.Store) {
	ctx := t.Context()
	got, err := s.ListFormerMembers(ctx)
	require.NoError(t, err)
	require.Empty(t, got)
	require.NoError(t, s.PutFormerMember(ctx, store.FormerMember{ID: "id-2", Name: "bob", DeletedAt: at(2 * time.Second), DeletedBy: "admin"}))
	require.NoError(t, s.WithTx(ctx, func(tx store.Tx) error {
		return tx.PutFormerMember(ctx, store.FormerMember{ID: "id-1", Name: "bob", DeletedAt: at(time.Second), DeletedBy: "root"})
	}))
	// Recording an id again changes nothing.
	require.NoError(t, s.PutFormerMember(ctx, store.FormerMember{ID: "id-2", Name: "carol", DeletedAt: at(time.Hour), DeletedBy: "x"}))
	require.ErrorIs(t, s.PutFormerMember(ctx, store.FormerMember{Name: "bob"}), store.ErrPrecondition)
	got, err = s.ListFormerMembers(ctx)
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, "id-1", got[0].ID)
	require.Equal(t, "root", got[0].DeletedBy)
	require.Equal(t, ms(at(time.Second)), ms(got[0].DeletedAt))
	require.Equal(t, store.FormerMember{ID: "id-2", Name: "bob", DeletedAt: got[1].DeletedAt, DeletedBy: "admin"}, got[1])
	require.Equal(t, ms(at(2*time.Second)), ms(got[1].DeletedAt))
}

// The mirror keeps each member's id: written when given, kept when an
// update gives none, replaced by another one given, and an id change alone
// does not move UpdatedAt.
func testMemberIDs(t *testing.T, s store.Store) {
	ctx := t.Context()
	idOf := func(name string) (string, time.Time) {
		t.Helper()
		got, err := s.GetMember(ctx, name)
		require.NoError(t, err)
		return got.ID, got.UpdatedAt
	}
	require.NoError(t, s.PutMember(ctx, store.Member{Name: "old"}))
	id, _ := idOf("old")
	require.Empty(t, id, "from before ids")

	alice := member("alice")
	alice.ID = "a-1"
	alice.UpdatedAt = at(time.Second)
	require.NoError(t, s.PutMember(ctx, alice))
	id, updated := idOf("alice")
	require.Equal(t, "a-1", id)

	same := alice
	same.ID, same.UpdatedAt = "", at(time.Hour)
	require.NoError(t, s.PutMember(ctx, same))
	id, again := idOf("alice")
	require.Equal(t, "a-1", id, "no id given keeps the stored one")
	require.Equal(t, ms(updated), ms(again))
	same.Instructions = "Changed."
	require.NoError(t, s.PutMember(ctx, same))
	id, _ = idOf("alice")
	require.Equal(t, "a-1", id, "nor does a change of content with no id")
	alice.Instructions = same.Instructions
	updated = at(time.Hour)

	other := alice
	other.ID, other.UpdatedAt = "a-2", at(2*time.Hour)
	require.NoError(t, s.ReplaceMembers(ctx, []store.Member{other, {Name: "old", ID: "o-1"}}))
	id, again = idOf("alice")
	require.Equal(t, "a-2", id)
	require.Equal(t, ms(updated), ms(again), "an id alone is no change of the member's content")
	id, _ = idOf("old")
	require.Equal(t, "o-1", id)
	all, err := s.ListMembers(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"a-2", "o-1"}, []string{all[0].ID, all[1].ID})
}
