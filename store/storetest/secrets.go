package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/store"
)

// secretTests are the subtests of SecretStore; RunAll runs them.
var secretTests = []suiteTest{
	{"CreateGetSecret", testCreateGetSecret},
	{"CreateSecretConflicts", testCreateSecretConflicts},
	{"ListSecretsBySlug", testListSecretsBySlug},
	{"UpdateSecret", testUpdateSecret},
	{"SetSecretValue", testSetSecretValue},
	{"SecretBindings", testSecretBindings},
	{"DeleteSecretCascades", testDeleteSecretCascades},
	{"SecretMemberDeletedUnbinds", testSecretMemberDeletedUnbinds},
	{"SecretWithTxRollback", testSecretWithTxRollback},
}

func secret(slug, env string) store.Secret {
	return store.Secret{Slug: slug, EnvName: env, Description: "about " + slug, Enabled: true, CreatedAt: at(time.Minute), UpdatedAt: at(time.Minute)}
}

func testCreateGetSecret(t *testing.T, s store.Store) {
	ctx := t.Context()
	in := secret("gh", "GH_TOKEN")
	in.AllMembers, in.Value = true, []byte(`{"v":1}`)
	require.NoError(t, s.CreateSecret(ctx, in))
	got, err := s.GetSecret(ctx, "gh")
	require.NoError(t, err)
	require.Equal(t, "GH_TOKEN", got.EnvName)
	require.Equal(t, "about gh", got.Description)
	require.True(t, got.Enabled)
	require.True(t, got.AllMembers)
	require.Equal(t, []byte(`{"v":1}`), got.Value)
	require.Equal(t, ms(in.CreatedAt), ms(got.CreatedAt))
	require.Empty(t, got.Bound)
	_, err = s.GetSecret(ctx, "nope")
	require.ErrorIs(t, err, store.ErrNotFound)
}

func testCreateSecretConflicts(t *testing.T, s store.Store) {
	ctx := t.Context()
	require.NoError(t, s.CreateSecret(ctx, secret("a", "A")))
	require.ErrorIs(t, s.CreateSecret(ctx, secret("a", "B")), store.ErrConflict)
	require.ErrorIs(t, s.CreateSecret(ctx, secret("b", "A")), store.ErrConflict)
	list, err := s.ListSecrets(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
}

func testListSecretsBySlug(t *testing.T, s store.Store) {
	ctx := t.Context()
	for _, sl := range []string{"c", "a", "b"} {
		require.NoError(t, s.CreateSecret(ctx, secret(sl, "E_"+sl)))
	}
	list, err := s.ListSecrets(ctx)
	require.NoError(t, err)
	var slugs []string
	for _, x := range list {
		slugs = append(slugs, x.Slug)
	}
	require.Equal(t, []string{"a", "b", "c"}, slugs)
}

func testUpdateSecret(t *testing.T, s store.Store) {
	ctx := t.Context()
	require.NoError(t, s.CreateSecret(ctx, secret("a", "A")))
	require.NoError(t, s.CreateSecret(ctx, secret("b", "B")))
	u := secret("a", "A2")
	u.Description, u.Enabled, u.AllMembers, u.UpdatedAt = "", false, true, at(time.Hour)
	require.NoError(t, s.UpdateSecret(ctx, u))
	got, err := s.GetSecret(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, "A2", got.EnvName)
	require.Empty(t, got.Description)
	require.False(t, got.Enabled)
	require.True(t, got.AllMembers)
	require.Equal(t, ms(at(time.Hour)), ms(got.UpdatedAt))
	require.Equal(t, ms(at(time.Minute)), ms(got.CreatedAt))
	u.EnvName = "B"
	require.ErrorIs(t, s.UpdateSecret(ctx, u), store.ErrConflict)
	require.ErrorIs(t, s.UpdateSecret(ctx, secret("zz", "ZZ")), store.ErrNotFound)
}

func testSetSecretValue(t *testing.T, s store.Store) {
	ctx := t.Context()
	require.NoError(t, s.CreateSecret(ctx, secret("a", "A")))
	require.NoError(t, s.SetSecretValue(ctx, "a", []byte("sealed"), at(time.Hour)))
	got, err := s.GetSecret(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, []byte("sealed"), got.Value)
	require.Equal(t, ms(at(time.Hour)), ms(got.UpdatedAt))
	require.NoError(t, s.SetSecretValue(ctx, "a", nil, at(2*time.Hour)))
	got, err = s.GetSecret(ctx, "a")
	require.NoError(t, err)
	require.Nil(t, got.Value)
	require.ErrorIs(t, s.SetSecretValue(ctx, "b", []byte("x"), at(0)), store.ErrNotFound)
}

func testSecretBindings(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "bob", "alice")
	require.NoError(t, s.CreateSecret(ctx, secret("a", "A")))
	require.NoError(t, s.PutSecretBinding(ctx, "a", "bob"))
	require.NoError(t, s.PutSecretBinding(ctx, "a", "alice"))
	require.NoError(t, s.PutSecretBinding(ctx, "a", "bob"), "binding twice is no change")
	require.ErrorIs(t, s.PutSecretBinding(ctx, "nope", "bob"), store.ErrNotFound)
	require.ErrorIs(t, s.PutSecretBinding(ctx, "a", "ghost"), store.ErrPrecondition)
	got, err := s.GetSecret(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, []string{"alice", "bob"}, got.Bound)
	require.NoError(t, s.DeleteSecretBinding(ctx, "a", "bob"))
	require.ErrorIs(t, s.DeleteSecretBinding(ctx, "a", "bob"), store.ErrNotFound)
	list, err := s.ListSecrets(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"alice"}, list[0].Bound)
}

func testDeleteSecretCascades(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "bob")
	in := secret("a", "A")
	in.Value = []byte("sealed")
	require.NoError(t, s.CreateSecret(ctx, in))
	require.NoError(t, s.PutSecretBinding(ctx, "a", "bob"))
	require.NoError(t, s.DeleteSecret(ctx, "a"))
	require.ErrorIs(t, s.DeleteSecret(ctx, "a"), store.ErrNotFound)
	// Created again, it starts with no value and no bindings.
	require.NoError(t, s.CreateSecret(ctx, secret("a", "A")))
	got, err := s.GetSecret(ctx, "a")
	require.NoError(t, err)
	require.Nil(t, got.Value)
	require.Empty(t, got.Bound)
}

func testSecretMemberDeletedUnbinds(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "bob", "alice")
	require.NoError(t, s.CreateSecret(ctx, secret("a", "A")))
	require.NoError(t, s.PutSecretBinding(ctx, "a", "bob"))
	require.NoError(t, s.PutSecretBinding(ctx, "a", "alice"))
	require.NoError(t, s.DeleteMember(ctx, "bob"))
	got, err := s.GetSecret(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, []string{"alice"}, got.Bound)
}

func testSecretWithTxRollback(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "bob")
	err := s.WithTx(ctx, func(tx store.Tx) error {
		require.NoError(t, tx.CreateSecret(ctx, secret("a", "A")))
		require.NoError(t, tx.PutSecretBinding(ctx, "a", "bob"))
		return store.ErrConflict
	})
	require.ErrorIs(t, err, store.ErrConflict)
	_, err = s.GetSecret(ctx, "a")
	require.ErrorIs(t, err, store.ErrNotFound)
}
