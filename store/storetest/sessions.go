package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/store"
)

// sessionTests are the subtests of SessionStore; RunAll runs them.
var sessionTests = []suiteTest{
	{"CreateGetSession", testCreateGetSession},
	{"CreateSessionUnknownMember", testCreateSessionUnknownMember},
	{"GetSessionNotFound", testGetSessionNotFound},
	{"TouchSession", testTouchSession},
	{"DeleteSession", testDeleteSession},
	{"DeleteExpiredSessions", testDeleteExpiredSessions},
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
