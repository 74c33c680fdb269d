package storetest

import (
	"crypto/sha256"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/store"
)

// platformTests are the subtests of PlatformStore; RunAll runs them.
var platformTests = []suiteTest{
	{"ConsumePairingCodeOnce", testConsumePairingCodeOnce},
	{"PairingCodeExpires", testPairingCodeExpires},
	{"PairingCodeBound", testPairingCodeBound},
	{"PairingCodeConflict", testPairingCodeConflict},
	{"ConsumePairingCodeConcurrently", testConsumePairingCodeConcurrently},
}

func pairingHash(s string) store.PairingHash { return sha256.Sum256([]byte("pairing:" + s)) }

func pairingCode(name string, created time.Time) store.PairingCode {
	return store.PairingCode{
		Hash: pairingHash(name), Issuer: "https://platform/" + name, Audience: "aud-" + name,
		JWKSURL: "https://platform/" + name + "/jwks", CreatedBy: "alice",
		CreatedAt: created, ExpiresAt: created.Add(5 * time.Minute),
	}
}

func testConsumePairingCodeOnce(t *testing.T, s store.Store) {
	ctx := t.Context()
	c := pairingCode("a", at(0))
	require.NoError(t, s.CreatePairingCode(ctx, c, 10))
	require.NoError(t, s.CreatePairingCode(ctx, pairingCode("b", at(0)), 10))

	_, err := s.ConsumePairingCode(ctx, pairingHash("unknown"), at(time.Second))
	require.ErrorIs(t, err, store.ErrNotFound)

	got, err := s.ConsumePairingCode(ctx, c.Hash, at(time.Second))
	require.NoError(t, err)
	require.Equal(t, c.Hash, got.Hash)
	require.Equal(t, c.Issuer, got.Issuer)
	require.Equal(t, c.Audience, got.Audience)
	require.Equal(t, c.JWKSURL, got.JWKSURL)
	require.Equal(t, c.CreatedBy, got.CreatedBy)
	require.Equal(t, ms(c.CreatedAt), ms(got.CreatedAt))
	require.Equal(t, ms(c.ExpiresAt), ms(got.ExpiresAt))

	_, err = s.ConsumePairingCode(ctx, c.Hash, at(time.Second))
	require.ErrorIs(t, err, store.ErrNotFound, "a code is answered once")

	// The other code is untouched.
	got, err = s.ConsumePairingCode(ctx, pairingHash("b"), at(time.Second))
	require.NoError(t, err)
	require.Equal(t, "aud-b", got.Audience)
}

func testPairingCodeExpires(t *testing.T, s store.Store) {
	ctx := t.Context()
	c := pairingCode("a", at(0))
	require.NoError(t, s.CreatePairingCode(ctx, c, 10))
	_, err := s.ConsumePairingCode(ctx, c.Hash, c.ExpiresAt)
	require.ErrorIs(t, err, store.ErrNotFound, "expired at ExpiresAt")

	c2 := pairingCode("b", at(0))
	require.NoError(t, s.CreatePairingCode(ctx, c2, 10))
	got, err := s.ConsumePairingCode(ctx, c2.Hash, c2.ExpiresAt.Add(-time.Millisecond))
	require.NoError(t, err)
	require.Equal(t, c2.Issuer, got.Issuer)
}

func testPairingCodeBound(t *testing.T, s store.Store) {
	ctx := t.Context()
	require.NoError(t, s.CreatePairingCode(ctx, pairingCode("a", at(0)), 2))
	require.NoError(t, s.CreatePairingCode(ctx, pairingCode("b", at(time.Minute)), 2))
	err := s.CreatePairingCode(ctx, pairingCode("c", at(2*time.Minute)), 2)
	require.ErrorIs(t, err, store.ErrPrecondition)
	_, err = s.ConsumePairingCode(ctx, pairingHash("c"), at(2*time.Minute))
	require.ErrorIs(t, err, store.ErrNotFound, "a refused code is not stored")

	// Once "a" has expired it no longer counts, and is gone.
	require.NoError(t, s.CreatePairingCode(ctx, pairingCode("c", at(5*time.Minute)), 2))
	_, err = s.ConsumePairingCode(ctx, pairingHash("a"), at(0))
	require.ErrorIs(t, err, store.ErrNotFound, "expired codes are deleted by the next create")

	// A consumed code frees its place.
	_, err = s.ConsumePairingCode(ctx, pairingHash("b"), at(5*time.Minute))
	require.NoError(t, err)
	require.NoError(t, s.CreatePairingCode(ctx, pairingCode("d", at(5*time.Minute)), 2))
}

func testPairingCodeConflict(t *testing.T, s store.Store) {
	ctx := t.Context()
	c := pairingCode("a", at(0))
	require.NoError(t, s.CreatePairingCode(ctx, c, 10))
	dup := pairingCode("a", at(time.Second))
	dup.Issuer = "other"
	require.ErrorIs(t, s.CreatePairingCode(ctx, dup, 10), store.ErrConflict)
	got, err := s.ConsumePairingCode(ctx, c.Hash, at(time.Second))
	require.NoError(t, err)
	require.Equal(t, c.Issuer, got.Issuer)
}

func testConsumePairingCodeConcurrently(t *testing.T, s store.Store) {
	ctx := t.Context()
	c := pairingCode("a", at(0))
	require.NoError(t, s.CreatePairingCode(ctx, c, 10))
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.ConsumePairingCode(ctx, c.Hash, at(time.Second))
		}()
	}
	wg.Wait()
	wins := 0
	for _, err := range errs {
		if err == nil {
			wins++
			continue
		}
		require.ErrorIs(t, err, store.ErrNotFound)
	}
	require.Equal(t, 1, wins)
}
