package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/store"
)

// metaTests are the subtests of MetaStore; RunAll runs them.
var metaTests = []suiteTest{
	{"MetaGetPut", testMetaGetPut},
	{"CensusCounts", testCensusCounts},
	{"ListSealedEveryKind", testListSealedEveryKind},
	{"SetSealedReplaces", testSetSealedReplaces},
	{"SetSealedClears", testSetSealedClears},
	{"SetSealedRollsBack", testSetSealedRollsBack},
}

func testMetaGetPut(t *testing.T, s store.Store) {
	ctx := t.Context()
	_, err := s.GetMeta(ctx, store.MetaTeamID)
	require.ErrorIs(t, err, store.ErrNotFound)
	require.NoError(t, s.PutMeta(ctx, store.MetaTeamID, "t1"))
	require.NoError(t, s.PutMeta(ctx, store.MetaKEKFingerprint, "f1"))
	require.NoError(t, s.PutMeta(ctx, store.MetaTeamID, "t2"))
	got, err := s.GetMeta(ctx, store.MetaTeamID)
	require.NoError(t, err)
	require.Equal(t, "t2", got, "a put replaces")
	got, err = s.GetMeta(ctx, store.MetaKEKFingerprint)
	require.NoError(t, err)
	require.Equal(t, "f1", got)
}

func testCensusCounts(t *testing.T, s store.Store) {
	ctx := t.Context()
	c, err := s.Census(ctx)
	require.NoError(t, err)
	require.Equal(t, store.Census{}, c, "a fresh store holds nothing")
	require.True(t, c.Empty())
	require.NoError(t, s.PutMeta(ctx, store.MetaTeamID, "t1"))
	c, err = s.Census(ctx)
	require.NoError(t, err)
	require.True(t, c.Empty(), "facts about the store are no data")

	mustPutMembers(t, s, "alice", "bob")
	mustAppend(t, s, message("alice", "general", "hi", 0), message("bob", "general", "yo", time.Second))
	mustCreateEntries(t, s, fsFile("alice", "/alice/a.txt", "a"))
	require.NoError(t, s.CreateSecret(ctx, store.Secret{Slug: "gh", EnvName: "GH", Enabled: true, Value: []byte(`{"v":1}`), CreatedAt: at(0)}))
	require.NoError(t, s.CreateSecret(ctx, store.Secret{Slug: "empty", EnvName: "EMPTY", Enabled: true, CreatedAt: at(0)}))
	c, err = s.Census(ctx)
	require.NoError(t, err)
	require.Equal(t, store.Census{Members: 2, Messages: 2, FileEntries: 1, Sealed: 1}, c)
	require.False(t, c.Empty())
}

// mustSealEveryKind creates one row of each sealed column, its value
// "sealed:<kind>", and one row of each without a value.
func mustSealEveryKind(t *testing.T, s store.Store) []store.SealedValue {
	t.Helper()
	ctx := t.Context()
	mustPutMembers(t, s, "alice")
	require.NoError(t, s.CreateSecret(ctx, store.Secret{Slug: "gh", EnvName: "GH", Enabled: true, Value: []byte("sealed:secret_value"), CreatedAt: at(0)}))
	require.NoError(t, s.CreateSecret(ctx, store.Secret{Slug: "none", EnvName: "NONE", Enabled: true, CreatedAt: at(0)}))
	ts := toolSource("api", "custom")
	ts.Credential = store.ToolCredential{Kind: "header", HeaderName: "X-Key", Secret: []byte("sealed:tool_credential")}
	require.NoError(t, s.CreateToolSource(ctx, ts))
	require.NoError(t, s.CreateToolSource(ctx, toolSource("open", "custom")))
	require.NoError(t, s.CreateHookProfile(ctx, store.HookProfile{Slug: "p", Auth: store.HookAuth{Kind: "header-secret"}, Secret: []byte("sealed:hook_profile_secret"), CreatedAt: at(0), UpdatedAt: at(0)}))
	require.NoError(t, s.CreateHookProfile(ctx, store.HookProfile{Slug: "q", Auth: store.HookAuth{Kind: "header-secret"}, CreatedAt: at(0), UpdatedAt: at(0)}))
	he := hookEndpoint("gh")
	he.Secret = []byte("sealed:hook_endpoint_secret")
	require.NoError(t, s.CreateHookEndpoint(ctx, he))
	require.NoError(t, s.CreateHookEndpoint(ctx, hookEndpoint("plain")))
	approved := enrollment("e1", "BCDFGHJK", 0)
	approved.Status, approved.Member, approved.TokenID, approved.SealedToken = store.EnrollmentApproved, "alice", "tok1", "sealed:enrollment_token"
	require.NoError(t, s.CreateEnrollment(ctx, approved))
	require.NoError(t, s.CreateEnrollment(ctx, enrollment("e2", "LMNPQRST", 0)))
	return []store.SealedValue{
		{Kind: store.SealedEnrollmentToken, Key: "e1", Value: []byte("sealed:enrollment_token")},
		{Kind: store.SealedHookEndpointSecret, Key: "gh", Value: []byte("sealed:hook_endpoint_secret")},
		{Kind: store.SealedHookProfileSecret, Key: "p", Value: []byte("sealed:hook_profile_secret")},
		{Kind: store.SealedSecretValue, Key: "gh", Value: []byte("sealed:secret_value")},
		{Kind: store.SealedToolCredential, Key: "api", Value: []byte("sealed:tool_credential")},
	}
}

func testListSealedEveryKind(t *testing.T, s store.Store) {
	ctx := t.Context()
	got, err := s.ListSealed(ctx)
	require.NoError(t, err)
	require.Empty(t, got)
	want := mustSealEveryKind(t, s)
	got, err = s.ListSealed(ctx)
	require.NoError(t, err)
	require.Equal(t, want, got, "every sealed column, by kind and key, valueless rows left out")
	kinds := map[store.SealedKind]bool{}
	for _, v := range got {
		kinds[v.Kind] = true
	}
	require.Len(t, kinds, len(store.SealedKinds), "one of each kind")
	c, err := s.Census(ctx)
	require.NoError(t, err)
	require.Equal(t, len(want), c.Sealed)
}

func testSetSealedReplaces(t *testing.T, s store.Store) {
	ctx := t.Context()
	want := mustSealEveryKind(t, s)
	for i := range want {
		want[i].Value = append([]byte("resealed:"), want[i].Value...)
		require.NoError(t, s.SetSealed(ctx, want[i]))
	}
	got, err := s.ListSealed(ctx)
	require.NoError(t, err)
	require.Equal(t, want, got)

	sec, err := s.GetSecret(ctx, "gh")
	require.NoError(t, err)
	require.Equal(t, []byte("resealed:sealed:secret_value"), sec.Value)
	require.Equal(t, ms(at(0)), ms(sec.UpdatedAt), "re-sealing changes no setting")
	ts, err := s.GetToolSource(ctx, "api")
	require.NoError(t, err)
	require.Equal(t, store.ToolCredential{Kind: "header", HeaderName: "X-Key", Secret: []byte("resealed:sealed:tool_credential")}, ts.Credential)
	e, err := s.GetEnrollmentByUserCode(ctx, "BCDFGHJK")
	require.NoError(t, err)
	require.Equal(t, "resealed:sealed:enrollment_token", e.SealedToken)

	for _, v := range []store.SealedValue{
		{Kind: store.SealedSecretValue, Key: "none", Value: []byte("x")},
		{Kind: store.SealedSecretValue, Key: "absent", Value: []byte("x")},
		{Kind: store.SealedToolCredential, Key: "open", Value: []byte("x")},
		{Kind: store.SealedHookEndpointSecret, Key: "plain", Value: []byte("x")},
		{Kind: store.SealedHookProfileSecret, Key: "q", Value: []byte("x")},
		{Kind: store.SealedEnrollmentToken, Key: "e2", Value: []byte("x")},
	} {
		require.ErrorIs(t, s.SetSealed(ctx, v), store.ErrNotFound, "%s %s has no sealed value to replace", v.Kind, v.Key)
	}
	require.Error(t, s.SetSealed(ctx, store.SealedValue{Kind: "nope", Key: "gh", Value: []byte("x")}))
}

func testSetSealedClears(t *testing.T, s store.Store) {
	ctx := t.Context()
	for _, v := range mustSealEveryKind(t, s) {
		v.Value = nil
		require.NoError(t, s.SetSealed(ctx, v))
		require.ErrorIs(t, s.SetSealed(ctx, v), store.ErrNotFound, "%s %s is gone", v.Kind, v.Key)
	}
	got, err := s.ListSealed(ctx)
	require.NoError(t, err)
	require.Empty(t, got)

	sec, err := s.GetSecret(ctx, "gh")
	require.NoError(t, err)
	require.Nil(t, sec.Value, "the secret stays, valueless")
	ts, err := s.GetToolSource(ctx, "api")
	require.NoError(t, err)
	require.Equal(t, store.ToolCredential{}, ts.Credential, "the source has no credential")
	he, err := s.GetHookEndpoint(ctx, "gh")
	require.NoError(t, err)
	require.Nil(t, he.Secret)
	hp, err := s.GetHookProfile(ctx, "p")
	require.NoError(t, err)
	require.Nil(t, hp.Secret)
	_, err = s.GetEnrollmentByUserCode(ctx, "BCDFGHJK")
	require.ErrorIs(t, err, store.ErrNotFound, "an approved enrollment without its token is gone")
	_, err = s.GetEnrollmentByUserCode(ctx, "LMNPQRST")
	require.NoError(t, err, "a pending enrollment had nothing sealed and stays")
}

func testSetSealedRollsBack(t *testing.T, s store.Store) {
	ctx := t.Context()
	want := mustSealEveryKind(t, s)
	boom := errors.New("boom")
	err := s.WithTx(ctx, func(tx store.Tx) error {
		for _, v := range want {
			v.Value = []byte("other")
			if err := tx.SetSealed(ctx, v); err != nil {
				return err
			}
		}
		if err := tx.PutMeta(ctx, store.MetaKEKFingerprint, "new"); err != nil {
			return err
		}
		return boom
	})
	require.ErrorIs(t, err, boom)
	got, err := s.ListSealed(ctx)
	require.NoError(t, err)
	require.Equal(t, want, got, "nothing of a rolled-back re-seal stays")
	_, err = s.GetMeta(ctx, store.MetaKEKFingerprint)
	require.ErrorIs(t, err, store.ErrNotFound)
}
