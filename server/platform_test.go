package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"svc/server/apierr"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	apiv1 "svc/gen/svc/v1"
	"svc/server/auth"
	"svc/server/egress"
	"svc/server/federation"
	"svc/server/teamconfig"
)

// platformEnv is the Platform service over a running test server, with the
// overlay file in a temp dir.
type platformEnv struct {
	p       *Platform
	overlay string
	clock   *testClock
}

type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newPlatformEnv(t *testing.T, policy egress.Policy, initial *federation.Config) *platformEnv {
	t.Helper()
	clk := &testClock{t: time.Now()}
	overlay := filepath.Join(t.TempDir(), "svc.json"+teamconfig.JWTOverlaySuffix)
	srv := startTestServer(t, mustMemStore(t), map[string][]string{"admin": {auth.MembersManage}, "bob": {}}, Deps{},
		WithNow(clk.Now), WithEgress(policy), WithFederation(initial, overlay))
	return &platformEnv{p: &Platform{core: srv.core, fed: srv.fed}, overlay: overlay, clock: clk}
}

func asAdmin(via auth.Via) context.Context {
	return auth.WithPrincipal(context.Background(), &auth.Principal{Member: "admin", Permissions: []string{auth.MembersManage}, Via: via})
}

// fakePlatform answers lookups with status and body, recording the code it
// was asked for.
func fakePlatform(t *testing.T, status int, body string) (*httptest.Server, *string) {
	t.Helper()
	var got string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/base/platform-connect/lookup" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		got = r.URL.Query().Get("code")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv, &got
}

const goodLookup = `{"issuer":"https://platform.example/","audience":"team-a","jwksUrl":"https://platform.example/jwks","extra":1}`

func TestBind(t *testing.T) {
	e := newPlatformEnv(t, egress.AllowAll, nil)
	plat, gotCode := fakePlatform(t, http.StatusOK, goodLookup)
	code := "abc&code=evil #x"
	resp, err := e.p.Bind(asAdmin(auth.ViaSession), &apiv1.BindRequest{PairingCode: code, PlatformUrl: plat.URL + "/base"})
	require.NoError(t, err)
	require.Equal(t, code, *gotCode, "the code is query-encoded, whole")
	require.True(t, resp.GetBound())
	require.Equal(t, "https://platform.example/", resp.GetJwt().GetIssuer())
	require.Equal(t, "team-a", resp.GetJwt().GetAudience())
	require.Equal(t, "https://platform.example/jwks", resp.GetJwt().GetJwksUrl())

	st, err := os.Stat(e.overlay)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	j, err := teamconfig.LoadJWTOverlay(e.overlay)
	require.NoError(t, err)
	require.Equal(t, &teamconfig.JWT{Issuer: "https://platform.example/", Audience: "team-a", JWKSURL: "https://platform.example/jwks"}, j)
	require.Equal(t, &federation.Config{Issuer: "https://platform.example/", Audience: "team-a", JWKSURL: "https://platform.example/jwks"}, e.p.fed.verifier.Config(), "live at once")
}

func TestBindRefusals(t *testing.T) {
	okPlat, _ := fakePlatform(t, http.StatusOK, goodLookup)
	initial := &federation.Config{Issuer: "i", Audience: "a", JWKSURL: "https://i/jwks"}
	cases := []struct {
		name   string
		via    auth.Via
		code   string
		url    string
		status int
		body   string
		want   apierr.Code
	}{
		{name: "bearer token", via: auth.ViaBearer, code: "c", url: okPlat.URL + "/base", want: apierr.CodeForbidden},
		{name: "federation JWT", via: auth.ViaJWT, code: "c", url: okPlat.URL + "/base", want: apierr.CodeForbidden},
		{name: "no code", via: auth.ViaSession, url: okPlat.URL + "/base", want: apierr.CodeBadRequest},
		{name: "long code", via: auth.ViaSession, code: strings.Repeat("c", 300), url: okPlat.URL + "/base", want: apierr.CodeBadRequest},
		{name: "control in code", via: auth.ViaSession, code: "a\nb", url: okPlat.URL + "/base", want: apierr.CodeBadRequest},
		{name: "no url", via: auth.ViaSession, code: "c", want: apierr.CodeBadRequest},
		{name: "ftp url", via: auth.ViaSession, code: "c", url: "ftp://x/", want: apierr.CodeBadRequest},
		{name: "relative url", via: auth.ViaSession, code: "c", url: "/x", want: apierr.CodeBadRequest},
		{name: "url with query", via: auth.ViaSession, code: "c", url: okPlat.URL + "/base?a=b", want: apierr.CodeBadRequest},
		{name: "url with credentials", via: auth.ViaSession, code: "c", url: "http://u:p@" + strings.TrimPrefix(okPlat.URL, "http://"), want: apierr.CodeBadRequest},
		{name: "unreachable", via: auth.ViaSession, code: "c", url: "http://127.0.0.1:1/base", want: apierr.CodeBadGateway},
		{name: "non-2xx", via: auth.ViaSession, code: "c", status: http.StatusNotFound, body: `{"error":"not_found"}`, want: apierr.CodeBadGateway},
		{name: "5xx", via: auth.ViaSession, code: "c", status: http.StatusInternalServerError, body: goodLookup, want: apierr.CodeBadGateway},
		{name: "not JSON", via: auth.ViaSession, code: "c", status: http.StatusOK, body: `<html>`, want: apierr.CodeBadRequest},
		{name: "array", via: auth.ViaSession, code: "c", status: http.StatusOK, body: `[]`, want: apierr.CodeBadRequest},
		{name: "missing jwksUrl", via: auth.ViaSession, code: "c", status: http.StatusOK, body: `{"issuer":"i","audience":"a"}`, want: apierr.CodeBadRequest},
		{name: "empty issuer", via: auth.ViaSession, code: "c", status: http.StatusOK, body: `{"issuer":"","audience":"a","jwksUrl":"https://p/j"}`, want: apierr.CodeBadRequest},
		{name: "issuer not a string", via: auth.ViaSession, code: "c", status: http.StatusOK, body: `{"issuer":1,"audience":"a","jwksUrl":"https://p/j"}`, want: apierr.CodeBadRequest},
		{name: "file jwksUrl", via: auth.ViaSession, code: "c", status: http.StatusOK, body: `{"issuer":"i","audience":"a","jwksUrl":"file:///etc/passwd"}`, want: apierr.CodeBadRequest},
		{name: "trailing data", via: auth.ViaSession, code: "c", status: http.StatusOK, body: goodLookup + `{}`, want: apierr.CodeBadRequest},
		{name: "too large", via: auth.ViaSession, code: "c", status: http.StatusOK, body: `{"issuer":"` + strings.Repeat("i", maxLookupBody) + `"}`, want: apierr.CodeBadRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newPlatformEnv(t, egress.AllowAll, initial)
			u := tc.url
			if tc.status != 0 {
				plat, _ := fakePlatform(t, tc.status, tc.body)
				u = plat.URL + "/base"
			}
			_, err := e.p.Bind(asAdmin(tc.via), &apiv1.BindRequest{PairingCode: tc.code, PlatformUrl: u})
			require.Equal(t, tc.want, codeOf(err), "%v", err)
			if tc.code != "" && len(tc.code) > 1 {
				require.NotContains(t, err.Error(), tc.code)
			}
			_, statErr := os.Stat(e.overlay)
			require.ErrorIs(t, statErr, os.ErrNotExist, "nothing written on refusal")
			require.Equal(t, initial, e.p.fed.verifier.Config(), "the live config is unchanged")
		})
	}
}

func TestBindRespectsEgressPolicy(t *testing.T) {
	e := newPlatformEnv(t, egress.Policy{}, nil)
	plat, gotCode := fakePlatform(t, http.StatusOK, goodLookup)
	_, err := e.p.Bind(asAdmin(auth.ViaSession), &apiv1.BindRequest{PairingCode: "secret-code", PlatformUrl: plat.URL + "/base"})
	require.Equal(t, apierr.CodeBadGateway, codeOf(err))
	require.NotContains(t, err.Error(), "secret-code")
	require.Empty(t, *gotCode, "loopback is refused at dial time")
}

func TestBindWithoutOverlay(t *testing.T) {
	e := newPlatformEnv(t, egress.AllowAll, nil)
	e.p.fed.overlay = ""
	plat, gotCode := fakePlatform(t, http.StatusOK, goodLookup)
	_, err := e.p.Bind(asAdmin(auth.ViaSession), &apiv1.BindRequest{PairingCode: "c", PlatformUrl: plat.URL + "/base"})
	require.Equal(t, apierr.CodeUnavailable, codeOf(err))
	require.Empty(t, *gotCode, "the code is not spent when nothing can be written")
	require.Nil(t, e.p.fed.verifier.Config())
}

func TestPairingCodes(t *testing.T) {
	initial := &federation.Config{Issuer: "https://p/", Audience: "team", JWKSURL: "https://p/jwks"}
	e := newPlatformEnv(t, egress.AllowAll, initial)
	ctx := asAdmin(auth.ViaBearer)

	// Derived from the live config.
	resp, err := e.p.CreatePairingCode(ctx, &apiv1.CreatePairingCodeRequest{})
	require.NoError(t, err)
	require.Len(t, resp.GetCode(), 32)
	require.Equal(t, float64(e.clock.Now().Add(PairingCodeTTL).UnixMilli()), resp.GetExpiresAt())
	require.Equal(t, "https://p/", resp.GetJwt().GetIssuer())

	got, err := e.p.LookupPairingCode(context.Background(), &apiv1.LookupPairingCodeRequest{Code: resp.GetCode()})
	require.NoError(t, err)
	require.Equal(t, &apiv1.LookupPairingCodeResponse{Issuer: "https://p/", Audience: "team", JwksUrl: "https://p/jwks"}, got)
	_, err = e.p.LookupPairingCode(context.Background(), &apiv1.LookupPairingCodeRequest{Code: resp.GetCode()})
	require.Equal(t, apierr.CodeNotFound, codeOf(err), "answered once")

	// Given explicitly.
	given, err := e.p.CreatePairingCode(ctx, &apiv1.CreatePairingCodeRequest{Issuer: ptr("https://q/"), Audience: ptr("other"), JwksUrl: ptr("http://q.internal/jwks")})
	require.NoError(t, err)
	require.NotEqual(t, resp.GetCode(), given.GetCode())
	got, err = e.p.LookupPairingCode(context.Background(), &apiv1.LookupPairingCodeRequest{Code: given.GetCode()})
	require.NoError(t, err)
	require.Equal(t, "other", got.GetAudience())

	// Expiry.
	late, err := e.p.CreatePairingCode(ctx, &apiv1.CreatePairingCodeRequest{})
	require.NoError(t, err)
	e.clock.Advance(PairingCodeTTL)
	_, err = e.p.LookupPairingCode(context.Background(), &apiv1.LookupPairingCodeRequest{Code: late.GetCode()})
	require.Equal(t, apierr.CodeNotFound, codeOf(err), "expired")

	for name, req := range map[string]*apiv1.CreatePairingCodeRequest{
		"partial":     {Issuer: ptr("https://q/")},
		"bad url":     {Issuer: ptr("i"), Audience: ptr("a"), JwksUrl: ptr("ftp://q/")},
		"empty issue": {Issuer: ptr(""), Audience: ptr("a"), JwksUrl: ptr("https://q/")},
	} {
		_, err := e.p.CreatePairingCode(ctx, req)
		require.Equal(t, apierr.CodeBadRequest, codeOf(err), name)
	}
	for name, code := range map[string]string{"empty": "", "long": strings.Repeat("a", 300)} {
		_, err := e.p.LookupPairingCode(context.Background(), &apiv1.LookupPairingCodeRequest{Code: code})
		require.Equal(t, apierr.CodeBadRequest, codeOf(err), name)
	}
	_, err = e.p.LookupPairingCode(context.Background(), &apiv1.LookupPairingCodeRequest{Code: "never-minted"})
	require.Equal(t, apierr.CodeNotFound, codeOf(err))
}

func TestPairingCodeNeedsAConfig(t *testing.T) {
	e := newPlatformEnv(t, egress.AllowAll, nil)
	_, err := e.p.CreatePairingCode(asAdmin(auth.ViaSession), &apiv1.CreatePairingCodeRequest{})
	require.Equal(t, apierr.CodeBadRequest, codeOf(err))
}

func TestPairingCodesBounded(t *testing.T) {
	e := newPlatformEnv(t, egress.AllowAll, &federation.Config{Issuer: "i", Audience: "a", JWKSURL: "https://i/j"})
	for range maxPairingCodes {
		_, err := e.p.CreatePairingCode(asAdmin(auth.ViaSession), &apiv1.CreatePairingCodeRequest{})
		require.NoError(t, err)
	}
	_, err := e.p.CreatePairingCode(asAdmin(auth.ViaSession), &apiv1.CreatePairingCodeRequest{})
	require.Equal(t, apierr.CodeRateLimited, codeOf(err))
	require.Equal(t, PairingCodeTTL, apierr.Classify(err).RetryAfter)
	e.clock.Advance(PairingCodeTTL)
	_, err = e.p.CreatePairingCode(asAdmin(auth.ViaSession), &apiv1.CreatePairingCodeRequest{})
	require.NoError(t, err, "expired codes free their places")
}

// FuzzParseLookup feeds the parser of a platform's lookup answer (hostile
// bytes from an address a member chose). It never panics, and what it
// accepts is a valid jwt block.
func FuzzParseLookup(f *testing.F) {
	for _, s := range []string{goodLookup, ``, `null`, `[]`, `{}`, `{"issuer":1}`, goodLookup + `{}`,
		`{"issuer":"i","audience":"a","jwksUrl":"file:///x"}`, `{"issuer":"\u0000","audience":"a","jwksUrl":"https://p/j"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := parseLookup(b)
		if err != nil {
			require.Equal(t, federation.Config{}, c)
			return
		}
		require.NoError(t, c.Validate())
	})
}

// FuzzLookupURL: a platform URL either is refused or yields an http(s)
// lookup URL on the same host whose path ends in the lookup route.
func FuzzLookupURL(f *testing.F) {
	for _, s := range []string{"https://p.example", "https://p.example/base/", "http://127.0.0.1:8080", "ftp://x", "", "https://u:p@x", "https://x/?q", "https://x/#f", "https://x/%2e%2e/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := lookupURL(s)
		if err != nil {
			require.Nil(t, u)
			require.Equal(t, apierr.CodeBadRequest, codeOf(err))
			return
		}
		require.Contains(t, []string{"http", "https"}, u.Scheme)
		require.NotEmpty(t, u.Host)
		require.Nil(t, u.User)
		require.True(t, strings.HasSuffix(u.Path, "/platform-connect/lookup"), u.Path)
	})
}
