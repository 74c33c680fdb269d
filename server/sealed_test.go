package server

import (
	"crypto/rand"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"svc/server/kek"
	"svc/server/notify"
	"svc/server/registry"
	"svc/store"
)

func randomKEK(t *testing.T) *kek.KEK {
	t.Helper()
	key := make([]byte, kek.KeySize)
	_, err := rand.Read(key)
	require.NoError(t, err)
	k, err := kek.New(key)
	require.NoError(t, err)
	return k
}

// mustSealedStore is an in-memory store holding one sealed value of every
// kind, sealed under k with the purpose its service uses, and the
// plaintexts by kind.
func mustSealedStore(t *testing.T, k *kek.KEK) (store.Store, map[store.SealedKind]string) {
	t.Helper()
	ctx := t.Context()
	st := mustMemStore(t)
	seal := func(plain, purpose string) []byte {
		b, err := registry.Seal(k, []byte(plain), purpose)
		require.NoError(t, err)
		return b
	}
	require.NoError(t, st.PutMember(ctx, store.Member{Name: "alice", Permissions: []string{}}))
	require.NoError(t, st.CreateSecret(ctx, store.Secret{Slug: "gh", EnvName: "GH", Enabled: true, Value: seal("secret value", registry.Secrets.PurposeOf("gh"))}))
	require.NoError(t, st.CreateToolSource(ctx, store.ToolSource{Slug: "api", Kind: "custom", Config: []byte(`{}`), Enabled: true,
		Credential: store.ToolCredential{Kind: "bearer", Secret: seal("tool secret", registry.ToolSources.PurposeOf("api"))}}))
	require.NoError(t, st.CreateHookProfile(ctx, store.HookProfile{Slug: "p", Auth: store.HookAuth{Kind: "header-secret"}, Secret: seal("profile secret", notify.ProfilePurpose("p"))}))
	require.NoError(t, st.CreateHookEndpoint(ctx, store.HookEndpoint{Slug: "gh", Targets: []byte(`[]`), Filters: []byte(`[]`), Policy: []byte(`{}`),
		Auth: store.HookAuth{Kind: "hmac-sha256"}, Enabled: true, Level: "info", Secret: seal("endpoint secret", notify.EndpointPurpose("gh"))}))
	require.NoError(t, st.CreateEnrollment(ctx, store.Enrollment{ID: "e1", UserCode: "BCDFGHJK", Status: store.EnrollmentApproved,
		Member: "alice", TokenID: "t1", SealedToken: string(seal("svc_token", enrollTokenPurpose("e1")))}))
	return st, map[store.SealedKind]string{
		store.SealedSecretValue:        "secret value",
		store.SealedToolCredential:     "tool secret",
		store.SealedHookProfileSecret:  "profile secret",
		store.SealedHookEndpointSecret: "endpoint secret",
		store.SealedEnrollmentToken:    "svc_token",
	}
}

func TestEverySealedKindHasAPurpose(t *testing.T) {
	for _, kind := range store.SealedKinds {
		p, err := sealedPurpose(store.SealedValue{Kind: kind, Key: "x"})
		require.NoError(t, err, "kind %s", kind)
		require.NotEmpty(t, p)
	}
	_, err := sealedPurpose(store.SealedValue{Kind: "new_column", Key: "x"})
	require.Error(t, err, "a kind without a purpose is an error, never skipped")
}

func TestResealMovesEveryValue(t *testing.T) {
	ctx := t.Context()
	from, to := randomKEK(t), randomKEK(t)
	st, want := mustSealedStore(t, from)
	require.NoError(t, CheckSealed(ctx, st, from))
	var sve *SealedValueError
	require.ErrorAs(t, CheckSealed(ctx, st, to), &sve)

	var n int
	require.NoError(t, st.WithTx(ctx, func(tx store.Tx) error {
		var err error
		n, err = Reseal(ctx, tx, from, to)
		return err
	}))
	require.Equal(t, len(store.SealedKinds), n)
	require.NoError(t, CheckSealed(ctx, st, to))
	require.Error(t, CheckSealed(ctx, st, from))
	fp, err := st.GetMeta(ctx, store.MetaKEKFingerprint)
	require.NoError(t, err)
	require.Equal(t, to.Fingerprint(), fp)

	vs, err := st.ListSealed(ctx)
	require.NoError(t, err)
	require.Len(t, vs, len(want))
	for _, v := range vs {
		pt, err := openStored(to, v)
		require.NoError(t, err)
		require.Equal(t, want[v.Kind], string(pt), "kind %s", v.Kind)
	}
}

func TestResealRefusesAValueItCannotOpen(t *testing.T) {
	ctx := t.Context()
	from, to := randomKEK(t), randomKEK(t)
	st, _ := mustSealedStore(t, from)
	stranger, err := registry.Seal(randomKEK(t), []byte("x"), registry.Secrets.PurposeOf("other"))
	require.NoError(t, err)
	require.NoError(t, st.CreateSecret(ctx, store.Secret{Slug: "other", EnvName: "OTHER", Enabled: true, Value: stranger}))
	before, err := st.ListSealed(ctx)
	require.NoError(t, err)

	err = st.WithTx(ctx, func(tx store.Tx) error {
		_, err := Reseal(ctx, tx, from, to)
		return err
	})
	var sve *SealedValueError
	require.ErrorAs(t, err, &sve)
	require.Equal(t, store.SealedSecretValue, sve.Kind)
	require.Equal(t, "other", sve.Key)
	require.ErrorIs(t, err, kek.ErrDecrypt)
	after, err := st.ListSealed(ctx)
	require.NoError(t, err)
	require.Equal(t, before, after, "nothing changed")
	_, err = st.GetMeta(ctx, store.MetaKEKFingerprint)
	require.ErrorIs(t, err, store.ErrNotFound)
}

func TestDropSealed(t *testing.T) {
	ctx := t.Context()
	lost, fresh := randomKEK(t), randomKEK(t)
	st, want := mustSealedStore(t, lost)
	var dropped []store.SealedValue
	require.NoError(t, st.WithTx(ctx, func(tx store.Tx) error {
		var err error
		dropped, err = DropSealed(ctx, tx, fresh)
		return err
	}))
	require.Len(t, dropped, len(want))
	vs, err := st.ListSealed(ctx)
	require.NoError(t, err)
	require.Empty(t, vs)
	fp, err := st.GetMeta(ctx, store.MetaKEKFingerprint)
	require.NoError(t, err)
	require.Equal(t, fresh.Fingerprint(), fp)
	sec, err := st.GetSecret(ctx, "gh")
	require.NoError(t, err)
	require.Nil(t, sec.Value, "the secret stays, to be set again")
}

func TestOpenStoredWithoutKEK(t *testing.T) {
	_, err := openStored(nil, store.SealedValue{Kind: store.SealedSecretValue, Key: "gh", Value: []byte(`{}`)})
	require.True(t, errors.Is(err, registry.ErrNoKEK))
}
