package toolsources

import (
	"bytes"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	apiv1 "svc/gen/svc/v1"
	"svc/server/registry"
	"svc/store"
)

// syncBuffer is a log sink safe for the service's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestBindLegacyCredentials: a credential sealed before origins were
// recorded (the bare secret) is bound at start to the origin its source
// is configured for: an mcp source's config.url, a custom source's one
// origin; it is then sent there. A custom source with no tool or tools on
// two origins keeps it withheld, with a warning. One write per bound
// credential, none on a second start; the secret is never logged.
func TestBindLegacyCredentials(t *testing.T) {
	e := newEnv(t, false, nil)
	var logs syncBuffer
	e.deps.Log = slog.New(slog.NewTextHandler(&logs, nil))
	svc := realEngine(e)
	admin := e.as("admin")
	mcpUp, one, twoA, twoB := newSeen(t), newSeen(t), newSeen(t), newSeen(t)
	all := true
	create := func(slug, kind, mcpURL string) {
		req := &apiv1.CreateToolSourceRequest{Slug: slug, Kind: kind, AllMembers: &all}
		if mcpURL != "" {
			req.Config = mcpConfig(mcpURL)
		}
		_, err := svc.CreateToolSource(admin, req)
		require.NoError(t, err)
	}
	put := func(slug, name, base string) {
		_, err := svc.PutTool(admin, &apiv1.PutToolRequest{
			Slug: slug, Name: name, Description: "d", InputSchema: objectSchema(),
			Binding: &apiv1.ToolBinding{Method: "GET", Url: base + "/" + name},
		})
		require.NoError(t, err)
	}
	// legacy stores the credential as it was sealed before origins were
	// recorded: the bare secret.
	legacy := func(slug string) {
		sealed, err := e.deps.Registry.Seal([]byte(originSecret), registry.ToolSources.PurposeOf(slug))
		require.NoError(t, err)
		require.NoError(t, e.st.WithTx(t.Context(), func(tx store.Tx) error {
			return tx.SetToolCredential(t.Context(), slug, store.ToolCredential{Kind: "bearer", Secret: sealed}, time.Now())
		}))
	}
	create("mcp", KindMCP, mcpUp.srv.URL+"/mcp")
	create("one", KindCustom, "")
	put("one", "t", one.srv.URL)
	put("one", "u", one.srv.URL)
	create("two", KindCustom, "")
	put("two", "t", twoA.srv.URL)
	put("two", "u", twoB.srv.URL)
	create("none", KindCustom, "")
	for _, slug := range []string{"mcp", "one", "two", "none"} {
		legacy(slug)
	}
	before := map[string]store.ToolSource{}
	for _, slug := range []string{"mcp", "one", "two", "none"} {
		x, err := e.st.GetToolSource(t.Context(), slug)
		require.NoError(t, err)
		before[slug] = x
	}

	n, err := svc.BindLegacyCredentials(t.Context())
	require.NoError(t, err)
	require.Equal(t, 2, n)

	for slug, want := range map[string]string{"mcp": origin(mcpUp.srv.URL), "one": origin(one.srv.URL), "two": "", "none": ""} {
		x, err := e.st.GetToolSource(t.Context(), slug)
		require.NoError(t, err)
		require.Equal(t, before[slug].UpdatedAt, x.UpdatedAt, "%s: a re-seal is no change a member made", slug)
		c, isLegacy, err := svc.openCred(x)
		require.NoError(t, err)
		require.Equal(t, originSecret, c.Secret)
		if want == "" {
			require.True(t, isLegacy, "%s stays as it was", slug)
			require.Equal(t, before[slug].Credential, x.Credential)
			continue
		}
		require.False(t, isLegacy, slug)
		require.Equal(t, want, c.Origin, slug)
	}

	// The bound ones are sent to their origin; the others to no one.
	_, _ = svc.RefreshToolSource(admin, &apiv1.RefreshToolSourceRequest{Slug: "mcp"})
	require.True(t, leaked(mcpUp), "mcp: %v", mcpUp.requests())
	_, err = svc.InvokeTool(admin, &apiv1.InvokeToolRequest{Slug: "one", Name: "u"})
	require.NoError(t, err)
	require.True(t, leaked(one), "one: %v", one.requests())
	for _, name := range []string{"t", "u"} {
		_, err = svc.InvokeTool(admin, &apiv1.InvokeToolRequest{Slug: "two", Name: name})
		require.NoError(t, err)
	}
	require.NotEmpty(t, twoA.requests())
	require.NotEmpty(t, twoB.requests())
	require.False(t, leaked(twoA) || leaked(twoB), "tools on two origins: withheld")

	out := logs.String()
	require.NotContains(t, out, originSecret)
	require.Contains(t, out, "source=mcp")
	require.Contains(t, out, "source=one")
	require.Regexp(t, `level=WARN msg="tool credential sealed without an origin stays withheld[^\n]*source=two`, out)
	require.Regexp(t, `level=WARN msg="tool credential sealed without an origin stays withheld[^\n]*source=none`, out)

	// A second start finds nothing left to bind.
	n, err = svc.BindLegacyCredentials(t.Context())
	require.NoError(t, err)
	require.Equal(t, 0, n)
}

// TestBindLegacyCredentialsNoKEK: without a KEK nothing can be opened;
// the start goes on and nothing is written.
func TestBindLegacyCredentialsNoKEK(t *testing.T) {
	e := newEnv(t, true, nil)
	n, err := e.tools.BindLegacyCredentials(t.Context())
	require.NoError(t, err)
	require.Zero(t, n)
}
