package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/store"
)

// toolSourceTests are the subtests of ToolSourceStore; RunAll runs them.
var toolSourceTests = []suiteTest{
	{"CreateGetToolSource", testCreateGetToolSource},
	{"CreateToolSourceConflict", testCreateToolSourceConflict},
	{"ListToolSourcesBySlug", testListToolSourcesBySlug},
	{"UpdateToolSource", testUpdateToolSource},
	{"SetToolCredential", testSetToolCredential},
	{"ToolBindings", testToolBindings},
	{"PutDeleteTool", testPutDeleteTool},
	{"ReplaceTools", testReplaceTools},
	{"DeleteToolSourceCascades", testDeleteToolSourceCascades},
	{"ToolSourceWithTxRollback", testToolSourceWithTxRollback},
}

func toolSource(slug, kind string) store.ToolSource {
	return store.ToolSource{
		Slug: slug, Kind: kind, DisplayName: "The " + slug, Config: []byte(`{"url":"https://example.com/mcp"}`),
		Enabled: true, CreatedAt: at(time.Minute), UpdatedAt: at(time.Minute),
	}
}

func customTool(name string) store.Tool {
	return store.Tool{
		Name: name, Description: "does " + name,
		InputSchema: []byte(`{"type":"object"}`),
		Binding:     []byte(`{"method":"GET","url":"https://api.example.com/` + name + `"}`),
	}
}

func testCreateGetToolSource(t *testing.T, s store.Store) {
	ctx := t.Context()
	in := toolSource("gh", "mcp")
	in.AllMembers = true
	in.Credential = store.ToolCredential{Kind: "header", HeaderName: "X-Key", Secret: []byte("sealed")}
	require.NoError(t, s.CreateToolSource(ctx, in))
	got, err := s.GetToolSource(ctx, "gh")
	require.NoError(t, err)
	require.Equal(t, "mcp", got.Kind)
	require.Equal(t, "The gh", got.DisplayName)
	require.JSONEq(t, `{"url":"https://example.com/mcp"}`, string(got.Config))
	require.True(t, got.Enabled)
	require.True(t, got.AllMembers)
	require.Equal(t, in.Credential, got.Credential)
	require.Equal(t, ms(in.CreatedAt), ms(got.CreatedAt))
	require.Empty(t, got.Bound)
	require.Empty(t, got.Tools)
	_, err = s.GetToolSource(ctx, "nope")
	require.ErrorIs(t, err, store.ErrNotFound)
}

func testCreateToolSourceConflict(t *testing.T, s store.Store) {
	ctx := t.Context()
	require.NoError(t, s.CreateToolSource(ctx, toolSource("a", "custom")))
	require.ErrorIs(t, s.CreateToolSource(ctx, toolSource("a", "mcp")), store.ErrConflict)
}

func testListToolSourcesBySlug(t *testing.T, s store.Store) {
	ctx := t.Context()
	for _, sl := range []string{"c", "a", "b"} {
		require.NoError(t, s.CreateToolSource(ctx, toolSource(sl, "custom")))
	}
	require.NoError(t, s.PutTool(ctx, "b", customTool("x"), at(time.Hour)))
	list, err := s.ListToolSources(ctx)
	require.NoError(t, err)
	var slugs []string
	for _, x := range list {
		slugs = append(slugs, x.Slug)
	}
	require.Equal(t, []string{"a", "b", "c"}, slugs)
	require.Len(t, list[1].Tools, 1)
}

func testUpdateToolSource(t *testing.T, s store.Store) {
	ctx := t.Context()
	require.NoError(t, s.CreateToolSource(ctx, toolSource("a", "custom")))
	u := toolSource("a", "mcp")
	u.DisplayName, u.Config, u.Enabled, u.AllMembers, u.UpdatedAt = "A", []byte(`{"k":1}`), false, true, at(time.Hour)
	require.NoError(t, s.UpdateToolSource(ctx, u))
	got, err := s.GetToolSource(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, "custom", got.Kind, "the kind is immutable")
	require.Equal(t, "A", got.DisplayName)
	require.JSONEq(t, `{"k":1}`, string(got.Config))
	require.False(t, got.Enabled)
	require.True(t, got.AllMembers)
	require.Equal(t, ms(at(time.Hour)), ms(got.UpdatedAt))
	require.ErrorIs(t, s.UpdateToolSource(ctx, toolSource("zz", "mcp")), store.ErrNotFound)
}

func testSetToolCredential(t *testing.T, s store.Store) {
	ctx := t.Context()
	require.NoError(t, s.CreateToolSource(ctx, toolSource("a", "custom")))
	c := store.ToolCredential{Kind: "bearer", Secret: []byte("sealed")}
	require.NoError(t, s.SetToolCredential(ctx, "a", c, at(time.Hour)))
	got, err := s.GetToolSource(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, c, got.Credential)
	require.Equal(t, ms(at(time.Hour)), ms(got.UpdatedAt))
	require.NoError(t, s.SetToolCredential(ctx, "a", store.ToolCredential{}, at(2*time.Hour)))
	got, err = s.GetToolSource(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, store.ToolCredential{}, got.Credential)
	require.ErrorIs(t, s.SetToolCredential(ctx, "b", c, at(0)), store.ErrNotFound)
}

func testToolBindings(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "bob", "alice")
	require.NoError(t, s.CreateToolSource(ctx, toolSource("a", "custom")))
	require.NoError(t, s.PutToolBinding(ctx, "a", "bob"))
	require.NoError(t, s.PutToolBinding(ctx, "a", "alice"))
	require.NoError(t, s.PutToolBinding(ctx, "a", "bob"), "binding twice is no change")
	require.ErrorIs(t, s.PutToolBinding(ctx, "nope", "bob"), store.ErrNotFound)
	require.ErrorIs(t, s.PutToolBinding(ctx, "a", "ghost"), store.ErrPrecondition)
	got, err := s.GetToolSource(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, []string{"alice", "bob"}, got.Bound)
	require.NoError(t, s.DeleteToolBinding(ctx, "a", "bob"))
	require.ErrorIs(t, s.DeleteToolBinding(ctx, "a", "bob"), store.ErrNotFound)
	require.NoError(t, s.DeleteMember(ctx, "alice"))
	got, err = s.GetToolSource(ctx, "a")
	require.NoError(t, err)
	require.Empty(t, got.Bound, "a deleted member is unbound")
}

func testPutDeleteTool(t *testing.T, s store.Store) {
	ctx := t.Context()
	require.NoError(t, s.CreateToolSource(ctx, toolSource("a", "custom")))
	require.NoError(t, s.PutTool(ctx, "a", customTool("zeta"), at(time.Hour)))
	require.NoError(t, s.PutTool(ctx, "a", customTool("alpha"), at(time.Hour)))
	changed := customTool("zeta")
	changed.Description = "changed"
	require.NoError(t, s.PutTool(ctx, "a", changed, at(2*time.Hour)))
	require.ErrorIs(t, s.PutTool(ctx, "nope", customTool("x"), at(0)), store.ErrNotFound)
	got, err := s.GetToolSource(ctx, "a")
	require.NoError(t, err)
	require.Len(t, got.Tools, 2)
	require.Equal(t, "alpha", got.Tools[0].Name)
	require.Equal(t, "changed", got.Tools[1].Description)
	require.JSONEq(t, `{"type":"object"}`, string(got.Tools[1].InputSchema))
	require.JSONEq(t, `{"method":"GET","url":"https://api.example.com/zeta"}`, string(got.Tools[1].Binding))
	require.Equal(t, ms(at(2*time.Hour)), ms(got.UpdatedAt))
	require.NoError(t, s.DeleteTool(ctx, "a", "zeta", at(3*time.Hour)))
	require.ErrorIs(t, s.DeleteTool(ctx, "a", "zeta", at(3*time.Hour)), store.ErrNotFound)
	got, err = s.GetToolSource(ctx, "a")
	require.NoError(t, err)
	require.Len(t, got.Tools, 1)
}

func testReplaceTools(t *testing.T, s store.Store) {
	ctx := t.Context()
	require.NoError(t, s.CreateToolSource(ctx, toolSource("m", "mcp")))
	require.NoError(t, s.ReplaceTools(ctx, "m", []store.Tool{
		{Name: "b", Description: "B", InputSchema: []byte(`{"type":"object"}`)},
		{Name: "a", InputSchema: []byte(`{}`)},
	}, at(time.Hour)))
	got, err := s.GetToolSource(ctx, "m")
	require.NoError(t, err)
	require.Len(t, got.Tools, 2)
	require.Equal(t, "a", got.Tools[0].Name)
	require.Nil(t, got.Tools[0].Binding)
	require.NoError(t, s.ReplaceTools(ctx, "m", nil, at(2*time.Hour)))
	got, err = s.GetToolSource(ctx, "m")
	require.NoError(t, err)
	require.Empty(t, got.Tools)
	require.ErrorIs(t, s.ReplaceTools(ctx, "nope", nil, at(0)), store.ErrNotFound)
}

func testDeleteToolSourceCascades(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "bob")
	in := toolSource("a", "custom")
	in.Credential = store.ToolCredential{Kind: "bearer", Secret: []byte("sealed")}
	require.NoError(t, s.CreateToolSource(ctx, in))
	require.NoError(t, s.PutToolBinding(ctx, "a", "bob"))
	require.NoError(t, s.PutTool(ctx, "a", customTool("x"), at(time.Hour)))
	require.NoError(t, s.DeleteToolSource(ctx, "a"))
	require.ErrorIs(t, s.DeleteToolSource(ctx, "a"), store.ErrNotFound)
	require.NoError(t, s.CreateToolSource(ctx, toolSource("a", "custom")))
	got, err := s.GetToolSource(ctx, "a")
	require.NoError(t, err)
	require.Empty(t, got.Bound)
	require.Empty(t, got.Tools)
	require.Equal(t, store.ToolCredential{}, got.Credential)
}

func testToolSourceWithTxRollback(t *testing.T, s store.Store) {
	ctx := t.Context()
	err := s.WithTx(ctx, func(tx store.Tx) error {
		require.NoError(t, tx.CreateToolSource(ctx, toolSource("a", "custom")))
		require.NoError(t, tx.PutTool(ctx, "a", customTool("x"), at(0)))
		return store.ErrConflict
	})
	require.ErrorIs(t, err, store.ErrConflict)
	_, err = s.GetToolSource(ctx, "a")
	require.ErrorIs(t, err, store.ErrNotFound)
}
