package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/store"
)

// revocationTests are the subtests of RevocationStore and LimitStore;
// RunAll runs them.
var revocationTests = []suiteTest{
	{"RevocationLogInOrder", testRevocationLogInOrder},
	{"RevocationRolledBackIsAbsent", testRevocationRolledBackIsAbsent},
	{"RevocationPruneKeepsNewest", testRevocationPruneKeepsNewest},
	{"LimitHitsWindow", testLimitHitsWindow},
	{"TOTPStepClaimedOnce", testTOTPStepClaimedOnce},
}

func testRevocationLogInOrder(t *testing.T, s store.Store) {
	ctx := t.Context()
	last, err := s.LastRevocationID(ctx)
	require.NoError(t, err)
	require.Zero(t, last)
	var ids []int64
	for i, what := range []string{"all", "tokens", "cred:token:t1"} {
		var r store.Revocation
		require.NoError(t, s.WithTx(ctx, func(tx store.Tx) error {
			var err error
			r, err = tx.AddRevocation(ctx, store.Revocation{Member: "alice", What: what, At: at(time.Duration(i) * time.Second)})
			return err
		}))
		require.Equal(t, ms(at(time.Duration(i)*time.Second)), ms(r.At))
		ids = append(ids, r.ID)
	}
	require.Less(t, ids[0], ids[1])
	require.Less(t, ids[1], ids[2])
	got, err := s.RevocationsBetween(ctx, ids[0], ids[2])
	require.NoError(t, err)
	require.Len(t, got, 2, "after is excluded, upTo included")
	require.Equal(t, ids[1], got[0].ID)
	require.Equal(t, "tokens", got[0].What)
	require.Equal(t, "alice", got[0].Member)
	require.Equal(t, ms(at(time.Second)), ms(got[0].At))
	require.Equal(t, "cred:token:t1", got[1].What)
	last, err = s.LastRevocationID(ctx)
	require.NoError(t, err)
	require.Equal(t, ids[2], last)
}

func testRevocationRolledBackIsAbsent(t *testing.T, s store.Store) {
	ctx := t.Context()
	boom := errors.New("boom")
	require.ErrorIs(t, s.WithTx(ctx, func(tx store.Tx) error {
		if _, err := tx.AddRevocation(ctx, store.Revocation{Member: "alice", What: "all"}); err != nil {
			return err
		}
		return boom
	}), boom)
	got, err := s.RevocationsBetween(ctx, 0, 1<<40)
	require.NoError(t, err)
	require.Empty(t, got, "a revoke that rolled back is not in the log")
	r, err := s.AddRevocation(ctx, store.Revocation{Member: "bob", What: "sessions"})
	require.NoError(t, err)
	require.False(t, r.At.IsZero(), "a zero At is now")
	got, err = s.RevocationsBetween(ctx, 0, r.ID)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, "bob", got[0].Member)
}

func testRevocationPruneKeepsNewest(t *testing.T, s store.Store) {
	ctx := t.Context()
	var last store.Revocation
	for i := range 3 {
		var err error
		last, err = s.AddRevocation(ctx, store.Revocation{Member: "alice", What: "all", At: at(time.Duration(i) * time.Minute)})
		require.NoError(t, err)
	}
	n, err := s.PruneRevocations(ctx, at(time.Hour))
	require.NoError(t, err)
	require.Equal(t, 2, n, "every entry before the cut but the newest")
	id, err := s.LastRevocationID(ctx)
	require.NoError(t, err)
	require.Equal(t, last.ID, id, "the newest id never goes back")
	next, err := s.AddRevocation(ctx, store.Revocation{Member: "alice", What: "all", At: at(2 * time.Hour)})
	require.NoError(t, err)
	require.Greater(t, next.ID, last.ID, "ids are never reused")
	n, err = s.PruneRevocations(ctx, at(time.Hour))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	got, err := s.RevocationsBetween(ctx, 0, next.ID)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, next.ID, got[0].ID)
}

func testLimitHitsWindow(t *testing.T, s store.Store) {
	ctx := t.Context()
	for i := range 4 {
		require.NoError(t, s.AddLimitHit(ctx, "login:member:alice", at(time.Duration(i)*time.Minute)))
	}
	require.NoError(t, s.AddLimitHit(ctx, "login:member:bob", at(0)))
	hits, err := s.LimitHits(ctx, "login:member:alice", at(0), 10)
	require.NoError(t, err)
	require.Len(t, hits, 3, "since is excluded")
	require.Equal(t, ms(at(3*time.Minute)), ms(hits[0]), "newest first")
	require.Equal(t, ms(at(time.Minute)), ms(hits[2]))
	hits, err = s.LimitHits(ctx, "login:member:alice", at(-time.Second), 2)
	require.NoError(t, err)
	require.Len(t, hits, 2, "at most limit")
	n, err := s.PruneLimitHits(ctx, at(2*time.Minute))
	require.NoError(t, err)
	require.Equal(t, 3, n)
	hits, err = s.LimitHits(ctx, "login:member:alice", at(-time.Hour), 10)
	require.NoError(t, err)
	require.Len(t, hits, 2)
	hits, err = s.LimitHits(ctx, "login:member:bob", at(-time.Hour), 10)
	require.NoError(t, err)
	require.Empty(t, hits)
}

func testTOTPStepClaimedOnce(t *testing.T, s store.Store) {
	ctx := t.Context()
	for _, tc := range []struct {
		member string
		step   int64
		want   bool
	}{
		{"alice", 100, true},
		{"alice", 100, false},
		{"alice", 99, false},
		{"bob", 100, true},
		{"alice", 101, true},
		{"alice", 101, false},
	} {
		ok, err := s.ClaimTOTPStep(ctx, tc.member, tc.step)
		require.NoError(t, err)
		require.Equal(t, tc.want, ok, "%s step %d", tc.member, tc.step)
	}
	require.NoError(t, s.ForgetTOTPStep(ctx, "alice"))
	ok, err := s.ClaimTOTPStep(ctx, "alice", 50)
	require.NoError(t, err)
	require.True(t, ok, "a new authenticator starts afresh")
}
