package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/store"
)

// txTests are the subtests of WithTx, and of times round-tripping; RunAll
// runs them.
var txTests = []suiteTest{
	{"WithTxCommit", testWithTxCommit},
	{"WithTxRollback", testWithTxRollback},
	{"WithTxPanic", testWithTxPanic},
	{"WithTxReplaceMembersRollback", testWithTxReplaceMembersRollback},
	{"TimeRoundTrip", testTimeRoundTrip},
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
