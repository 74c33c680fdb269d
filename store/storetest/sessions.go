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
	{"CreateSessionIDs", testCreateSessionIDs},
	{"ListSessions", testListSessions},
	{"DeleteSessionByID", testDeleteSessionByID},
	{"DeleteMemberSessions", testDeleteMemberSessions},
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

func testCreateSessionIDs(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice")
	require.NoError(t, s.CreateSession(ctx, session("s1", "alice")))
	noID := session("s2", "alice")
	noID.ID = ""
	require.ErrorIs(t, s.CreateSession(ctx, noID), store.ErrPrecondition, "a session needs an id")
	dup := session("s3", "alice")
	dup.ID = "id-s1"
	require.ErrorIs(t, s.CreateSession(ctx, dup), store.ErrConflict, "ids are unique")
	for _, h := range []store.SessionHash{sessionHash("s2"), sessionHash("s3")} {
		_, err := s.GetSession(ctx, h)
		require.ErrorIs(t, err, store.ErrNotFound)
	}
}

func testListSessions(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice", "bob")
	a1, a2, b1 := session("a1", "alice"), session("a2", "alice"), session("b1", "bob")
	a2.CreatedAt, a2.ExpiresAt = at(time.Minute), at(-time.Hour) // expired: listed too
	for _, sess := range []store.Session{a2, b1, a1} {
		require.NoError(t, s.CreateSession(ctx, sess))
	}
	got, err := s.ListSessions(ctx, "alice")
	require.NoError(t, err)
	require.Equal(t, []sessionView{viewSession(a1), viewSession(a2)}, viewSessions(got), "oldest first")
	got, err = s.ListSessions(ctx, "nobody")
	require.NoError(t, err)
	require.NotNil(t, got)
	require.Empty(t, got)
}

func testDeleteSessionByID(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice", "bob")
	a1, a2, b1 := session("a1", "alice"), session("a2", "alice"), session("b1", "bob")
	for _, sess := range []store.Session{a1, a2, b1} {
		require.NoError(t, s.CreateSession(ctx, sess))
	}
	_, err := s.DeleteSessionByID(ctx, "bob", a1.ID)
	require.ErrorIs(t, err, store.ErrNotFound, "another member's session is not found")
	got, err := s.DeleteSessionByID(ctx, "alice", a1.ID)
	require.NoError(t, err)
	require.Equal(t, viewSession(a1), viewSession(got))
	_, err = s.GetSession(ctx, a1.Hash)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.DeleteSessionByID(ctx, "alice", a1.ID)
	require.ErrorIs(t, err, store.ErrNotFound)
	left, err := s.ListSessions(ctx, "alice")
	require.NoError(t, err)
	require.Equal(t, []sessionView{viewSession(a2)}, viewSessions(left))
}

func testDeleteMemberSessions(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice", "bob")
	for _, sess := range []store.Session{session("a1", "alice"), session("a2", "alice"), session("b1", "bob")} {
		require.NoError(t, s.CreateSession(ctx, sess))
	}
	n, err := s.DeleteMemberSessions(ctx, "alice")
	require.NoError(t, err)
	require.Equal(t, 2, n)
	left, err := s.ListSessions(ctx, "alice")
	require.NoError(t, err)
	require.Empty(t, left)
	_, err = s.GetSession(ctx, sessionHash("b1"))
	require.NoError(t, err, "other members keep theirs")
	n, err = s.DeleteMemberSessions(ctx, "alice")
	require.NoError(t, err)
	require.Zero(t, n)
}

func viewSessions(ss []store.Session) []sessionView {
	out := make([]sessionView, len(ss))
	for i, s := range ss {
		out[i] = viewSession(s)
	}
	return out
}
