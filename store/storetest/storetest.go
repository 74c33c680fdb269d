package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/store"
)

// RunAll runs the conformance suite of store.Store, one subtest per
// behaviour. newStore must return a fresh, empty store on every call and
// close it when t ends.
func RunAll(t *testing.T, newStore func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		run  func(t *testing.T, s store.Store)
	}{
		{"PutGetMember", testPutGetMember},
		{"PutMemberUpdates", testPutMemberUpdates},
		{"RoleNilRoundTrip", testRoleNilRoundTrip},
		{"PermissionsNeverNil", testPermissionsNeverNil},
		{"GetMemberNotFound", testGetMemberNotFound},
		{"ListMembersByName", testListMembersByName},
		{"ReplaceMembers", testReplaceMembers},
		{"ReplaceMembersEmpty", testReplaceMembersEmpty},
		{"DeleteMember", testDeleteMember},
		{"CreateTokenErrors", testCreateTokenErrors},
		{"GetTokenByHash", testGetTokenByHash},
		{"ListTokensOldestFirst", testListTokensOldestFirst},
		{"RevokeToken", testRevokeToken},
		{"RevokeTokenNotFound", testRevokeTokenNotFound},
		{"RevokeMemberTokens", testRevokeMemberTokens},
		{"TouchToken", testTouchToken},
		{"TokenActive", testTokenActive},
		{"CreateGetSession", testCreateGetSession},
		{"CreateSessionUnknownMember", testCreateSessionUnknownMember},
		{"GetSessionNotFound", testGetSessionNotFound},
		{"TouchSession", testTouchSession},
		{"DeleteSession", testDeleteSession},
		{"DeleteExpiredSessions", testDeleteExpiredSessions},
		{"WithTxCommit", testWithTxCommit},
		{"WithTxRollback", testWithTxRollback},
		{"WithTxPanic", testWithTxPanic},
		{"WithTxReplaceMembersRollback", testWithTxReplaceMembersRollback},
		{"TimeRoundTrip", testTimeRoundTrip},
	}
	for _, tc := range append(append(append(tests, messagingTests...), fsTests...), objectiveTests...) {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t, newStore(t))
		})
	}
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

func testCreateTokenErrors(t *testing.T, s store.Store) {
	mustPutMembers(t, s, "alice", "bob")
	orig := token("t1", "alice")
	mustCreateTokens(t, s, orig)

	sameID := token("t1", "bob")
	sameID.Hash = tokenHash("other")
	sameHash := token("t2", "bob")
	sameHash.Hash = orig.Hash

	tests := []struct {
		name string
		tok  store.Token
		want error
	}{
		{"duplicate id", sameID, store.ErrConflict},
		{"duplicate hash", sameHash, store.ErrConflict},
		{"unknown member", token("t3", "nobody"), store.ErrPrecondition},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, s.CreateToken(t.Context(), tc.tok), tc.want)
		})
	}

	got, err := s.GetTokenByHash(t.Context(), orig.Hash)
	require.NoError(t, err)
	require.Equal(t, viewToken(orig), viewToken(got))
	toks, err := s.ListTokens(t.Context(), "bob")
	require.NoError(t, err)
	require.Empty(t, toks)
}

func testGetTokenByHash(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice")
	full := token("t1", "alice")
	full.LastUsedAt = at(2 * time.Minute)
	full.ExpiresAt = at(24 * time.Hour)
	mustCreateTokens(t, s, full, token("t2", "alice"))

	got, err := s.GetTokenByHash(ctx, full.Hash)
	require.NoError(t, err)
	require.Equal(t, viewToken(full), viewToken(got))

	_, err = s.GetTokenByHash(ctx, tokenHash("unknown"))
	require.ErrorIs(t, err, store.ErrNotFound)

	// Revoked tokens are still found, so a revoked hash is never reseeded.
	_, err = s.RevokeToken(ctx, "alice", "t1", at(time.Hour))
	require.NoError(t, err)
	got, err = s.GetTokenByHash(ctx, full.Hash)
	require.NoError(t, err)
	require.Equal(t, ms(at(time.Hour)), ms(got.RevokedAt))
	require.False(t, got.Active(at(time.Hour)))
}

func testListTokensOldestFirst(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice", "bob")
	tNew, tOld, tMid := token("new", "alice"), token("old", "alice"), token("mid", "alice")
	tNew.CreatedAt = at(3 * time.Minute)
	tOld.CreatedAt = at(1 * time.Minute)
	tMid.CreatedAt = at(2 * time.Minute)
	mustCreateTokens(t, s, tNew, tOld, token("b1", "bob"), tMid)
	_, err := s.RevokeToken(ctx, "alice", "mid", at(time.Hour))
	require.NoError(t, err)

	tests := []struct {
		name   string
		member string
		want   []string
	}{
		{"oldest first, revoked included", "alice", []string{"old", "mid", "new"}},
		{"only the member's", "bob", []string{"b1"}},
		{"unknown member", "nobody", []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.ListTokens(t.Context(), tc.member)
			require.NoError(t, err)
			require.Equal(t, tc.want, tokenIDs(got))
		})
	}
	got, err := s.ListTokens(ctx, "alice")
	require.NoError(t, err)
	require.Equal(t, viewToken(tOld), viewToken(got[0]))
}

func testRevokeToken(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice")
	orig := token("t1", "alice")
	orig.ExpiresAt = at(24 * time.Hour)
	mustCreateTokens(t, s, orig, token("t2", "alice"))

	revokedAt := at(time.Hour)
	got, err := s.RevokeToken(ctx, "alice", "t1", revokedAt)
	require.NoError(t, err)
	want := orig
	want.RevokedAt = revokedAt
	require.Equal(t, viewToken(want), viewToken(got))

	stored, err := s.GetTokenByHash(ctx, orig.Hash)
	require.NoError(t, err)
	require.Equal(t, viewToken(want), viewToken(stored))
	require.False(t, stored.Active(at(time.Minute)))

	other, err := s.GetTokenByHash(ctx, tokenHash("t2"))
	require.NoError(t, err)
	require.True(t, other.RevokedAt.IsZero())
}

func testRevokeTokenNotFound(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice", "bob")
	mustCreateTokens(t, s, token("a1", "alice"), token("b1", "bob"), token("a-revoked", "alice"))
	_, err := s.RevokeToken(ctx, "alice", "a-revoked", at(time.Hour))
	require.NoError(t, err)

	tests := []struct {
		name   string
		member string
		id     string
	}{
		{"other member's token", "alice", "b1"},
		{"already revoked", "alice", "a-revoked"},
		{"unknown id", "alice", "nope"},
		{"unknown member", "nobody", "a1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.RevokeToken(t.Context(), tc.member, tc.id, at(2*time.Hour))
			require.ErrorIs(t, err, store.ErrNotFound)
		})
	}

	// Nothing changed: bob's token is active, the revoked one kept its time.
	b1, err := s.GetTokenByHash(ctx, tokenHash("b1"))
	require.NoError(t, err)
	require.True(t, b1.RevokedAt.IsZero())
	revoked, err := s.GetTokenByHash(ctx, tokenHash("a-revoked"))
	require.NoError(t, err)
	require.Equal(t, ms(at(time.Hour)), ms(revoked.RevokedAt))
}

func testRevokeMemberTokens(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice", "bob")
	mustCreateTokens(t, s, token("a1", "alice"), token("a2", "alice"), token("a3", "alice"), token("b1", "bob"))
	_, err := s.RevokeToken(ctx, "alice", "a3", at(time.Hour))
	require.NoError(t, err)

	n, err := s.RevokeMemberTokens(ctx, "alice", at(2*time.Hour))
	require.NoError(t, err)
	require.Equal(t, 2, n)

	wantRevokedAt := map[string]time.Time{
		"a1": at(2 * time.Hour),
		"a2": at(2 * time.Hour),
		"a3": at(time.Hour), // already revoked: keeps its time
		"b1": {},
	}
	for id, want := range wantRevokedAt {
		got, err := s.GetTokenByHash(ctx, tokenHash(id))
		require.NoError(t, err)
		require.Equal(t, ms(want), ms(got.RevokedAt), id)
	}

	tests := []struct {
		name   string
		member string
		want   int
	}{
		{"again", "alice", 0},
		{"unknown member", "nobody", 0},
		{"other member", "bob", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, err := s.RevokeMemberTokens(t.Context(), tc.member, at(3*time.Hour))
			require.NoError(t, err)
			require.Equal(t, tc.want, n)
		})
	}
}

func testTouchToken(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice")
	orig := token("t1", "alice")
	mustCreateTokens(t, s, orig, token("t2", "alice"))

	for _, used := range []time.Time{at(time.Hour), at(2 * time.Hour)} {
		require.NoError(t, s.TouchToken(ctx, "t1", used))
		got, err := s.GetTokenByHash(ctx, orig.Hash)
		require.NoError(t, err)
		want := orig
		want.LastUsedAt = used
		require.Equal(t, viewToken(want), viewToken(got))
	}
	other, err := s.GetTokenByHash(ctx, tokenHash("t2"))
	require.NoError(t, err)
	require.True(t, other.LastUsedAt.IsZero())
}

func testTokenActive(t *testing.T, s store.Store) {
	ctx := t.Context()
	now := at(time.Hour)
	tests := []struct {
		name    string
		expires time.Time
		revoked time.Time
		want    bool
	}{
		{"no expiry", time.Time{}, time.Time{}, true},
		{"expires later", now.Add(time.Second), time.Time{}, true},
		{"expires now", now, time.Time{}, false},
		{"expired", now.Add(-time.Second), time.Time{}, false},
		{"revoked", time.Time{}, now.Add(-time.Second), false},
		{"revoked later", time.Time{}, now.Add(time.Second), false},
		{"revoked and expires later", now.Add(time.Hour), now.Add(-time.Hour), false},
	}
	mustPutMembers(t, s, "alice")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tok := token(tc.name, "alice")
			tok.ExpiresAt = tc.expires
			tok.RevokedAt = tc.revoked
			require.Equal(t, tc.want, tok.Active(now))

			// The same holds for the stored copy.
			require.NoError(t, s.CreateToken(ctx, tok))
			got, err := s.GetTokenByHash(ctx, tok.Hash)
			require.NoError(t, err)
			require.Equal(t, tc.want, got.Active(now))
		})
	}
}

func testCreateGetSession(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice")
	sess := session("s1", "alice")
	require.NoError(t, s.CreateSession(ctx, sess))
	require.NoError(t, s.CreateSession(ctx, session("s2", "alice")))

	got, err := s.GetSession(ctx, sess.Hash)
	require.NoError(t, err)
	require.Equal(t, viewSession(sess), viewSession(got))
}

func testCreateSessionUnknownMember(t *testing.T, s store.Store) {
	mustPutMembers(t, s, "alice")
	sess := session("s1", "nobody")
	require.ErrorIs(t, s.CreateSession(t.Context(), sess), store.ErrPrecondition)
	_, err := s.GetSession(t.Context(), sess.Hash)
	require.ErrorIs(t, err, store.ErrNotFound)
}

func testGetSessionNotFound(t *testing.T, s store.Store) {
	mustPutMembers(t, s, "alice")
	require.NoError(t, s.CreateSession(t.Context(), session("s1", "alice")))
	_, err := s.GetSession(t.Context(), sessionHash("s2"))
	require.ErrorIs(t, err, store.ErrNotFound)
}

func testTouchSession(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice")
	sess := session("s1", "alice")
	require.NoError(t, s.CreateSession(ctx, sess))

	seen, expires := at(2*time.Hour), at(3*time.Hour)
	require.NoError(t, s.TouchSession(ctx, sess.Hash, seen, expires))
	got, err := s.GetSession(ctx, sess.Hash)
	require.NoError(t, err)
	want := sess
	want.LastSeenAt, want.ExpiresAt = seen, expires
	require.Equal(t, viewSession(want), viewSession(got))

	err = s.TouchSession(ctx, sessionHash("absent"), seen, expires)
	require.ErrorIs(t, err, store.ErrNotFound)
}

func testDeleteSession(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice")
	require.NoError(t, s.CreateSession(ctx, session("s1", "alice")))
	require.NoError(t, s.CreateSession(ctx, session("s2", "alice")))

	require.NoError(t, s.DeleteSession(ctx, sessionHash("s1")))
	_, err := s.GetSession(ctx, sessionHash("s1"))
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.GetSession(ctx, sessionHash("s2"))
	require.NoError(t, err)

	tests := []struct {
		name string
		hash store.SessionHash
	}{
		{"already deleted", sessionHash("s1")},
		{"never existed", sessionHash("s3")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, s.DeleteSession(t.Context(), tc.hash), store.ErrNotFound)
		})
	}
	// The member stays.
	_, err = s.GetMember(ctx, "alice")
	require.NoError(t, err)
}

func testDeleteExpiredSessions(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice")
	now := at(time.Hour)
	expiries := map[string]time.Time{
		"before":   now.Add(-time.Minute),
		"just":     now.Add(-time.Millisecond),
		"at":       now,
		"after":    now.Add(time.Millisecond),
		"tomorrow": now.Add(24 * time.Hour),
	}
	for key, exp := range expiries {
		sess := session(key, "alice")
		sess.ExpiresAt = exp
		require.NoError(t, s.CreateSession(ctx, sess))
	}

	n, err := s.DeleteExpiredSessions(ctx, now)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	for key := range expiries {
		_, err := s.GetSession(ctx, sessionHash(key))
		if key == "after" || key == "tomorrow" {
			require.NoError(t, err, key)
		} else {
			require.ErrorIs(t, err, store.ErrNotFound, key)
		}
	}

	n, err = s.DeleteExpiredSessions(ctx, now)
	require.NoError(t, err)
	require.Zero(t, n)
}

func testWithTxCommit(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "bob")
	err := s.WithTx(ctx, func(tx store.Tx) error {
		if err := tx.PutMember(ctx, member("alice")); err != nil {
			return err
		}
		// The transaction reads its own writes.
		if _, err := tx.GetMember(ctx, "alice"); err != nil {
			return err
		}
		if err := tx.CreateToken(ctx, token("a1", "alice")); err != nil {
			return err
		}
		if _, err := tx.RevokeMemberTokens(ctx, "alice", at(time.Hour)); err != nil {
			return err
		}
		if err := tx.CreateSession(ctx, session("alice", "alice")); err != nil {
			return err
		}
		return tx.DeleteMember(ctx, "bob")
	})
	require.NoError(t, err)

	_, err = s.GetMember(ctx, "alice")
	require.NoError(t, err)
	tok, err := s.GetTokenByHash(ctx, tokenHash("a1"))
	require.NoError(t, err)
	require.Equal(t, ms(at(time.Hour)), ms(tok.RevokedAt))
	_, err = s.GetSession(ctx, sessionHash("alice"))
	require.NoError(t, err)
	_, err = s.GetMember(ctx, "bob")
	require.ErrorIs(t, err, store.ErrNotFound)
}

var errAbort = errors.New("abort")

// requireUntouched checks that the transaction ended and left the state
// testWithTxRollback and testWithTxPanic start from.
func requireUntouched(t *testing.T, s store.Store) {
	t.Helper()
	requireWritable(t, s)
	ctx := t.Context()
	_, err := s.GetMember(ctx, "alice")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.GetTokenByHash(ctx, tokenHash("a1"))
	require.ErrorIs(t, err, store.ErrNotFound)
	bob, err := s.GetMember(ctx, "bob")
	require.NoError(t, err)
	require.Equal(t, contentOf(member("bob")), contentOf(bob))
	b1, err := s.GetTokenByHash(ctx, tokenHash("b1"))
	require.NoError(t, err)
	require.True(t, b1.RevokedAt.IsZero())
}

// writeAll makes writes that requireUntouched would notice.
func writeAll(t *testing.T, tx store.Tx) {
	t.Helper()
	ctx := t.Context()
	require.NoError(t, tx.PutMember(ctx, member("alice")))
	require.NoError(t, tx.CreateToken(ctx, token("a1", "alice")))
	_, err := tx.RevokeToken(ctx, "bob", "b1", at(time.Hour))
	require.NoError(t, err)
	changed := member("bob")
	changed.Instructions = "Changed."
	require.NoError(t, tx.PutMember(ctx, changed))
}

func testWithTxRollback(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "bob")
	mustCreateTokens(t, s, token("b1", "bob"))

	err := s.WithTx(ctx, func(tx store.Tx) error {
		writeAll(t, tx)
		return errAbort
	})
	require.ErrorIs(t, err, errAbort)
	requireUntouched(t, s)

	// A store error returned from the closure keeps its sentinel.
	err = s.WithTx(ctx, func(tx store.Tx) error {
		writeAll(t, tx)
		_, err := tx.GetMember(ctx, "nobody")
		return err
	})
	require.ErrorIs(t, err, store.ErrNotFound)
	requireUntouched(t, s)
}

// requireWritable fails fast, instead of hanging, when a transaction that
// should have ended still holds the store's write lock.
func requireWritable(t *testing.T, s store.Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	require.NoError(t, s.PutMember(ctx, member("carol")), "the failed transaction still blocks writes")
	require.NoError(t, s.WithTx(ctx, func(tx store.Tx) error {
		return tx.PutMember(ctx, member("dave"))
	}))
	for _, name := range []string{"carol", "dave"} {
		require.NoError(t, s.DeleteMember(ctx, name))
	}
}

func testWithTxPanic(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "bob")
	mustCreateTokens(t, s, token("b1", "bob"))

	require.PanicsWithValue(t, "boom", func() {
		_ = s.WithTx(ctx, func(tx store.Tx) error {
			writeAll(t, tx)
			panic("boom")
		})
	})
	requireUntouched(t, s)
}

func testWithTxReplaceMembersRollback(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "bob")
	mustCreateTokens(t, s, token("b1", "bob"))

	err := s.WithTx(ctx, func(tx store.Tx) error {
		if err := tx.ReplaceMembers(ctx, []store.Member{member("alice")}); err != nil {
			return err
		}
		all, err := tx.ListMembers(ctx)
		if err != nil {
			return err
		}
		if len(all) != 1 || all[0].Name != "alice" {
			return errors.New("replace not visible inside the transaction")
		}
		return errAbort
	})
	require.ErrorIs(t, err, errAbort)
	requireUntouched(t, s)
}

func testTimeRoundTrip(t *testing.T, s store.Store) {
	ctx := t.Context()
	// Sub-millisecond parts everywhere, and a zone other than UTC.
	zone := time.FixedZone("east", 5*3600+1800)
	ts := func(d time.Duration) time.Time { return at(d).Add(123 * time.Microsecond).In(zone) }

	m := member("alice")
	m.CreatedAt, m.UpdatedAt = ts(0), ts(time.Second)
	require.NoError(t, s.PutMember(ctx, m))
	gotM, err := s.GetMember(ctx, "alice")
	require.NoError(t, err)
	require.Equal(t, viewMember(m), viewMember(gotM))

	full := token("full", "alice")
	full.CreatedAt, full.LastUsedAt, full.ExpiresAt, full.RevokedAt = ts(1), ts(2), ts(3), ts(4)
	zero := token("zero", "alice")
	zero.CreatedAt = ts(5)
	mustCreateTokens(t, s, full, zero)
	for _, want := range []store.Token{full, zero} {
		got, err := s.GetTokenByHash(ctx, want.Hash)
		require.NoError(t, err)
		require.Equal(t, viewToken(want), viewToken(got), want.ID)
	}
	gotZero, err := s.GetTokenByHash(ctx, zero.Hash)
	require.NoError(t, err)
	require.True(t, gotZero.LastUsedAt.IsZero())
	require.True(t, gotZero.ExpiresAt.IsZero())
	require.True(t, gotZero.RevokedAt.IsZero())

	sess := session("s1", "alice")
	sess.CreatedAt, sess.LastSeenAt, sess.ExpiresAt = ts(6), ts(7), ts(8)
	require.NoError(t, s.CreateSession(ctx, sess))
	gotS, err := s.GetSession(ctx, sess.Hash)
	require.NoError(t, err)
	require.Equal(t, viewSession(sess), viewSession(gotS))
}
