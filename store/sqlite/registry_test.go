package sqlite

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/store"
)

// The registries' errors keep the names each method had before they shared
// one kit: the noun makes the op ("list tool sources", "delete secret
// binding"), and a log reader still sees which write missed.
func TestRegistryErrorNames(t *testing.T) {
	ctx := context.Background()
	db := MustOpen(t, ":memory:")
	at := time.UnixMilli(1_700_000_000_000)
	cases := []struct {
		want string
		call func() error
	}{
		{"get secret: not found", func() error { _, err := db.GetSecret(ctx, "nope"); return err }},
		{"update secret: not found", func() error { return db.UpdateSecret(ctx, store.Secret{Slug: "nope"}) }},
		{"delete secret: not found", func() error { return db.DeleteSecret(ctx, "nope") }},
		{"set secret value: not found", func() error { return db.SetSecretValue(ctx, "nope", []byte("v"), at) }},
		{"put secret_bindings: not found", func() error { return db.PutSecretBinding(ctx, "nope", "alice") }},
		{"delete secret binding: not found", func() error { return db.DeleteSecretBinding(ctx, "nope", "alice") }},
		{"get tool source: not found", func() error { _, err := db.GetToolSource(ctx, "nope"); return err }},
		{"update tool source: not found", func() error { return db.UpdateToolSource(ctx, store.ToolSource{Slug: "nope"}) }},
		{"delete tool source: not found", func() error { return db.DeleteToolSource(ctx, "nope") }},
		{"set tool credential: not found", func() error { return db.SetToolCredential(ctx, "nope", store.ToolCredential{}, at) }},
		{"put tool_bindings: not found", func() error { return db.PutToolBinding(ctx, "nope", "alice") }},
		{"delete tool binding: not found", func() error { return db.DeleteToolBinding(ctx, "nope", "alice") }},
		{"put tool: not found", func() error { return db.PutTool(ctx, "nope", store.Tool{Name: "t"}, at) }},
		{"get hook endpoint: not found", func() error { _, err := db.GetHookEndpoint(ctx, "nope"); return err }},
		{"update hook endpoint: not found", func() error { return db.UpdateHookEndpoint(ctx, store.HookEndpoint{Slug: "nope"}) }},
		{"delete hook endpoint: not found", func() error { return db.DeleteHookEndpoint(ctx, "nope") }},
		{"set hook endpoint secret: not found", func() error { return db.SetHookEndpointSecret(ctx, "nope", nil, at) }},
		{"get hook profile: not found", func() error { _, err := db.GetHookProfile(ctx, "nope"); return err }},
		{"update hook profile: not found", func() error { return db.UpdateHookProfile(ctx, store.HookProfile{Slug: "nope"}) }},
		{"delete hook profile: not found", func() error { return db.DeleteHookProfile(ctx, "nope") }},
		{"set hook profile secret: not found", func() error { return db.SetHookProfileSecret(ctx, "nope", nil, at) }},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			err := tc.call()
			require.ErrorIs(t, err, store.ErrNotFound)
			require.EqualError(t, err, tc.want)
		})
	}
	require.NoError(t, db.CreateSecret(ctx, store.Secret{Slug: "gh", EnvName: "GH"}))
	require.EqualError(t, db.CreateSecret(ctx, store.Secret{Slug: "gh", EnvName: "GH2"}), "create secret: conflict")
	require.NoError(t, db.CreateToolSource(ctx, store.ToolSource{Slug: "x", Kind: "mcp"}))
	require.EqualError(t, db.CreateToolSource(ctx, store.ToolSource{Slug: "x", Kind: "mcp"}), "create tool source: conflict")
	require.NoError(t, db.CreateHookEndpoint(ctx, store.HookEndpoint{Slug: "h", Auth: store.HookAuth{Kind: "hmac-sha256"}}))
	require.EqualError(t, db.CreateHookEndpoint(ctx, store.HookEndpoint{Slug: "h", Auth: store.HookAuth{Kind: "hmac-sha256"}}), "create hook endpoint: conflict")
	require.NoError(t, db.CreateHookProfile(ctx, store.HookProfile{Slug: "p", Auth: store.HookAuth{Kind: "hmac-sha256"}}))
	require.EqualError(t, db.CreateHookProfile(ctx, store.HookProfile{Slug: "p", Auth: store.HookAuth{Kind: "hmac-sha256"}}), "create hook profile: conflict")
}
