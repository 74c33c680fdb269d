package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/store"
)

// tokenTests are the subtests of TokenStore; RunAll runs them.
var tokenTests = []suiteTest{
	{"CreateTokenErrors", testCreateTokenErrors},
	{"GetTokenByHash", testGetTokenByHash},
	{"ListTokensOldestFirst", testListTokensOldestFirst},
	{"RevokeToken", testRevokeToken},
	{"RevokeTokenNotFound", testRevokeTokenNotFound},
	{"RevokeMemberTokens", testRevokeMemberTokens},
	{"TouchToken", testTouchToken},
	{"TokenActive", testTokenActive},
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
