package toolsources

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	apiv1 "svc/gen/svc/v1"
	"svc/server/apierr"
	"svc/server/registry"
	"svc/server/toolcall"
	"svc/store"
)

// seen is an upstream that records every request's Authorization and
// X-Key headers and answers a small JSON body (not MCP: a refresh fails,
// after its first request has shown what it carried).
type seen struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []string
}

func newSeen(t *testing.T) *seen {
	s := &seen{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.got = append(s.got, r.Header.Get("Authorization")+"|"+r.Header.Get("X-Key"))
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *seen) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got...)
}

// realEngine is env's service over the real toolcall engine on a plain
// loopback client, so the credential crosses a real connection or not.
func realEngine(e *env) *Service {
	d := e.deps
	d.Engine = NewEngine(toolcall.New(&http.Client{Timeout: 10 * time.Second}, toolcall.Options{Timeout: 10 * time.Second}))
	return New(d)
}

const originSecret = "origin-s3cr3t"

// leaked reports whether any request s saw carried the credential.
func leaked(s *seen) bool {
	for _, h := range s.requests() {
		if strings.Contains(h, originSecret) {
			return true
		}
	}
	return false
}

// TestCredentialBoundToOrigin: a tools.manage holder cannot redirect a
// source's credential to a server of its own, by an MCP source's
// config.url or by a custom tool's binding; the origin it was set for
// still gets it.
func TestCredentialBoundToOrigin(t *testing.T) {
	for _, tc := range []struct {
		name   string
		kind   string
		header *string
		// attack points the source at the attacker's base URL, then makes
		// it call out; it returns the error of the redirecting change.
		attack func(t *testing.T, svc *Service, e *env, attacker string) error
	}{
		{"mcp config.url, then refresh", KindMCP, nil, func(t *testing.T, svc *Service, e *env, attacker string) error {
			_, err := svc.UpdateToolSource(e.as("admin"), &apiv1.UpdateToolSourceRequest{Slug: "src", Config: mcpConfig(attacker + "/mcp")})
			_, _ = svc.RefreshToolSource(e.as("admin"), &apiv1.RefreshToolSourceRequest{Slug: "src"})
			return err
		}},
		{"custom binding, then invoke", KindCustom, ptr("X-Key"), func(t *testing.T, svc *Service, e *env, attacker string) error {
			_, err := svc.PutTool(e.as("admin"), &apiv1.PutToolRequest{
				Slug: "src", Name: "steal", Description: "d", InputSchema: objectSchema(),
				Binding: &apiv1.ToolBinding{Method: "GET", Url: attacker + "/x"},
			})
			_, _ = svc.InvokeTool(e.as("admin"), &apiv1.InvokeToolRequest{Slug: "src", Name: "steal"})
			return err
		}},
		{"custom binding, the attacker by another host name", KindCustom, nil, func(t *testing.T, svc *Service, e *env, attacker string) error {
			_, err := svc.PutTool(e.as("admin"), &apiv1.PutToolRequest{
				Slug: "src", Name: "steal", Description: "d", InputSchema: objectSchema(),
				Binding: &apiv1.ToolBinding{Method: "GET", Url: strings.Replace(attacker, "127.0.0.1", "localhost", 1) + "/x"},
			})
			_, _ = svc.InvokeTool(e.as("admin"), &apiv1.InvokeToolRequest{Slug: "src", Name: "steal"})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, false, nil)
			svc := realEngine(e)
			admin := e.as("admin")
			orig, attacker := newSeen(t), newSeen(t)
			all := true
			req := &apiv1.CreateToolSourceRequest{Slug: "src", Kind: tc.kind, AllMembers: &all}
			if tc.kind == KindMCP {
				req.Config = mcpConfig(orig.srv.URL + "/mcp")
			}
			_, err := svc.CreateToolSource(admin, req)
			require.NoError(t, err)
			kind := "bearer"
			if tc.header != nil {
				kind = "header"
			}
			_, err = svc.SetToolCredential(admin, &apiv1.SetToolCredentialRequest{Slug: "src", Kind: kind, HeaderName: tc.header, Secret: originSecret})
			require.NoError(t, err)

			// The origin it was set for gets it (a custom source's first
			// tool pins the origin).
			if tc.kind == KindCustom {
				_, err = svc.PutTool(admin, &apiv1.PutToolRequest{
					Slug: "src", Name: "ok", Description: "d", InputSchema: objectSchema(),
					Binding: &apiv1.ToolBinding{Method: "GET", Url: orig.srv.URL + "/ok"},
				})
				require.NoError(t, err)
				got, err := svc.InvokeTool(admin, &apiv1.InvokeToolRequest{Slug: "src", Name: "ok"})
				require.NoError(t, err)
				require.False(t, got.GetIsError())
			} else {
				_, _ = svc.RefreshToolSource(admin, &apiv1.RefreshToolSourceRequest{Slug: "src"})
			}
			require.True(t, leaked(orig), "the credential's own origin gets it: %v", orig.requests())

			err = tc.attack(t, svc, e, attacker.srv.URL)
			require.Error(t, err, "the redirecting change is refused")
			if tc.kind == KindMCP {
				requireCode(t, err, apierr.CodeConflict)
			} else {
				requireCode(t, err, apierr.CodeBadRequest)
				require.Contains(t, err.Error(), "binding.url")
			}
			require.False(t, leaked(attacker), "the attacker's server never sees the credential: %v", attacker.requests())

			// A path change on the same origin keeps the credential.
			if tc.kind == KindMCP {
				_, err = svc.UpdateToolSource(admin, &apiv1.UpdateToolSourceRequest{Slug: "src", Config: mcpConfig(orig.srv.URL + "/other")})
				require.NoError(t, err)
				n := len(orig.requests())
				_, _ = svc.RefreshToolSource(admin, &apiv1.RefreshToolSourceRequest{Slug: "src"})
				require.Greater(t, len(orig.requests()), n)
				require.Contains(t, orig.requests()[n], originSecret)
			}

			// With the credential deleted, the source may move anywhere.
			_, err = svc.DeleteToolCredential(admin, &apiv1.DeleteToolCredentialRequest{Slug: "src"})
			require.NoError(t, err)
			require.NoError(t, tc.attack(t, svc, e, attacker.srv.URL))
			require.NotEmpty(t, attacker.requests())
			require.False(t, leaked(attacker))
		})
	}
}

// TestCredentialOriginOnSet: a custom source's credential set after its
// tools is bound to their one origin; tools on two origins cannot share
// one (409); a credential set before origins were recorded is never sent.
func TestCredentialOriginOnSet(t *testing.T) {
	e := newEnv(t, false, nil)
	svc := realEngine(e)
	admin := e.as("admin")
	a, b := newSeen(t), newSeen(t)
	all := true
	put := func(slug, name, base string) error {
		_, err := svc.PutTool(admin, &apiv1.PutToolRequest{
			Slug: slug, Name: name, Description: "d", InputSchema: objectSchema(),
			Binding: &apiv1.ToolBinding{Method: "GET", Url: base + "/" + name},
		})
		return err
	}
	for _, slug := range []string{"one", "two", "old"} {
		_, err := svc.CreateToolSource(admin, &apiv1.CreateToolSourceRequest{Slug: slug, Kind: KindCustom, AllMembers: &all})
		require.NoError(t, err)
	}
	require.NoError(t, put("one", "t", a.srv.URL))
	_, err := svc.SetToolCredential(admin, &apiv1.SetToolCredentialRequest{Slug: "one", Kind: "bearer", Secret: originSecret})
	require.NoError(t, err)
	requireCode(t, put("one", "u", b.srv.URL), apierr.CodeBadRequest)
	_, err = svc.InvokeTool(admin, &apiv1.InvokeToolRequest{Slug: "one", Name: "t"})
	require.NoError(t, err)
	require.True(t, leaked(a))

	require.NoError(t, put("two", "t", a.srv.URL))
	require.NoError(t, put("two", "u", b.srv.URL))
	_, err = svc.SetToolCredential(admin, &apiv1.SetToolCredentialRequest{Slug: "two", Kind: "bearer", Secret: originSecret})
	requireCode(t, err, apierr.CodeConflict)

	// A value sealed as it was before origins were recorded: the bare
	// secret. It is withheld from every call until set again.
	require.NoError(t, put("old", "t", b.srv.URL))
	sealed, err := e.deps.Registry.Seal([]byte(originSecret), registry.ToolSources.PurposeOf("old"))
	require.NoError(t, err)
	x, err := e.st.GetToolSource(t.Context(), "old")
	require.NoError(t, err)
	x.Credential.Kind, x.Credential.Secret = "bearer", sealed
	require.NoError(t, e.st.WithTx(t.Context(), func(tx store.Tx) error { return tx.SetToolCredential(t.Context(), "old", x.Credential, time.Now()) }))
	_, err = svc.InvokeTool(admin, &apiv1.InvokeToolRequest{Slug: "old", Name: "t"})
	require.NoError(t, err)
	require.NotEmpty(t, b.requests())
	require.False(t, leaked(b), "a credential without an origin is never sent")
}

// TestOriginOf: the origin compares scheme, host and port, case-blind,
// with the default port made explicit.
func TestOriginOf(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"https://API.example.com/x", "https://api.example.com:443"},
		{"HTTPS://api.example.com:443/{{args.a}}", "https://api.example.com:443"},
		{"http://api.example.com", "http://api.example.com:80"},
		{"http://127.0.0.1:8080?q=1", "http://127.0.0.1:8080"},
		{"http://[::1]:9/x", "http://[::1]:9"},
		{"http://[::1]/x", "http://[::1]:80"},
		{"ftp://x", ""},
		{"http://u@x/", ""},
		{"http:///x", ""},
	} {
		require.Equal(t, tc.want, origin(tc.in), tc.in)
	}
}

// TestToolSourceConfigVisibility: a source's config (an MCP URL may hold a
// key in its query) is shown to tools.manage holders and to members who
// may use the source, bound or by allMembers; to no one else.
func TestToolSourceConfigVisibility(t *testing.T) {
	e := newEnv(t, false, nil)
	admin := e.as("admin")
	const keyed = "https://mcp.example.com/mcp?key=cfg-s3cr3t"
	for _, src := range []struct {
		slug string
		all  bool
	}{{"bound", false}, {"everyone", true}} {
		_, err := e.tools.CreateToolSource(admin, &apiv1.CreateToolSourceRequest{Slug: src.slug, Kind: KindMCP, AllMembers: &src.all, Config: mcpConfig(keyed)})
		require.NoError(t, err)
	}
	_, err := e.tools.AddToolBinding(admin, &apiv1.AddToolBindingRequest{Slug: "bound", Member: "bob"})
	require.NoError(t, err)
	for _, tc := range []struct {
		viewer, slug string
		sees         bool
	}{
		{"admin", "bound", true},
		{"bob", "bound", true},
		{"alice", "bound", false},
		{"alice", "everyone", true},
		{"bob", "everyone", true},
	} {
		t.Run(tc.viewer+"/"+tc.slug, func(t *testing.T) {
			got, err := e.tools.GetToolSource(e.as(tc.viewer), &apiv1.GetToolSourceRequest{Slug: tc.slug})
			require.NoError(t, err)
			list, err := e.tools.ListToolSources(e.as(tc.viewer), &apiv1.ListToolSourcesRequest{})
			require.NoError(t, err)
			var listed *apiv1.ToolSource
			for _, s := range list.GetSources() {
				if s.GetSlug() == tc.slug {
					listed = s
				}
			}
			require.NotNil(t, listed)
			for _, s := range []*apiv1.ToolSource{got.GetSource(), listed} {
				if tc.sees {
					require.Equal(t, keyed, s.GetConfig().GetFields()["url"].GetStringValue())
				} else {
					require.Nil(t, s.GetConfig(), "no config for a member who cannot use the source")
				}
			}
		})
	}
}
