package gateway

import (
	"context"
	"crypto/tls"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/server/apierr"
	"svc/server/auth"
	"svc/store"
	"svc/store/sqlite"
)

// Every hand-written route New registers is declared in routeRules, and
// every declared route is registered: a route cannot ship without its
// plane and rule, and the table cannot name a route that is gone.
func TestEveryRouteIsDeclared(t *testing.T) {
	g, _ := newMuxGateway(t)
	require.ElementsMatch(t, slices.Collect(maps.Keys(routeRules)), g.registered)
}

func TestUndeclaredRouteIsRefused(t *testing.T) {
	g := &Gateway{}
	_, err := g.route("GET /not-declared", func(http.ResponseWriter, *http.Request, *auth.Principal) error { return nil })
	require.ErrorContains(t, err, "not declared")
	require.Empty(t, g.registered)
}

// members is a fixed auth.MemberLookup.
type members map[string][]string

func (m members) MemberPermissions(name string) ([]string, bool) {
	p, ok := m[name]
	return p, ok
}

// testCreds is an authenticator over an in-memory store with members ann
// (members.manage) and bob (none), bearer tokens of both, and a session
// of bob last seen a minute ago.
type testCreds struct {
	st                   store.Store
	authn                *auth.Authenticator
	bobBearer, annBearer string
	sid                  string
	shash                store.SessionHash
}

func newTestCreds(t *testing.T) *testCreds {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, "")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	now := time.Now()
	for _, m := range []string{"ann", "bob"} {
		require.NoError(t, st.PutMember(ctx, store.Member{Name: m, CreatedAt: now, UpdatedAt: now}))
	}
	token := func(id, member string) string {
		plain, hash, err := auth.NewToken()
		require.NoError(t, err)
		require.NoError(t, st.CreateToken(ctx, store.Token{ID: id, Member: member, Hash: hash, Origin: "bootstrap", CreatedAt: now}))
		return "Bearer " + plain
	}
	c := &testCreds{st: st, bobBearer: token("tb", "bob"), annBearer: token("ta", "ann")}
	c.sid, c.shash, err = auth.NewSessionID()
	require.NoError(t, err)
	require.NoError(t, st.CreateSession(ctx, store.Session{ID: "sb", Hash: c.shash, Member: "bob", CreatedAt: now, LastSeenAt: now.Add(-time.Minute), ExpiresAt: now.Add(time.Hour)}))
	c.authn = auth.NewAuthenticator(st, st, members{"ann": {auth.MembersManage}, "bob": {}}, time.Now, slog.New(slog.DiscardHandler))
	return c
}

// TestAdmit drives the planes and rules of hand-written routes with real
// credentials.
func TestAdmit(t *testing.T) {
	ctx := context.Background()
	c := newTestCreds(t)
	st, sid, shash, bobBearer, annBearer := c.st, c.sid, c.shash, c.bobBearer, c.annBearer
	bobCookie := auth.SessionCookieName + "=" + sid
	g := &Gateway{authn: c.authn}
	dual := routeRule{plane: planeDual, rule: auth.AnyMember}
	tests := []struct {
		name     string
		rule     routeRule
		bearer   string
		cookie   string
		tls      bool
		want     apierr.Code // "" admits
		member   string
		slideSet bool // a refreshed session cookie is sent
	}{
		{name: "none needs nothing", rule: routeRule{plane: planeNone, rule: auth.Public}},
		{name: "none ignores credentials", rule: routeRule{plane: planeNone, rule: auth.Public}, bearer: bobBearer},
		{name: "dual by bearer", rule: dual, bearer: bobBearer, member: "bob"},
		{name: "dual by cookie slides it", rule: dual, cookie: bobCookie, member: "bob", slideSet: true},
		{name: "dual by cookie over tls", rule: dual, cookie: bobCookie, tls: true, member: "bob", slideSet: true},
		{name: "dual without credentials", rule: dual, want: apierr.CodeUnauthenticated},
		{name: "dual with a bad bearer and a good cookie", rule: dual, bearer: "Bearer svc_nope", cookie: bobCookie, want: apierr.CodeUnauthenticated},
		{name: "bearer plane by bearer", rule: routeRule{plane: planeBearer, rule: auth.AnyMember}, bearer: bobBearer, member: "bob"},
		{name: "bearer plane ignores a cookie", rule: routeRule{plane: planeBearer, rule: auth.AnyMember}, cookie: bobCookie, want: apierr.CodeUnauthenticated},
		{name: "session plane by cookie", rule: routeRule{plane: planeSession, rule: auth.AnyMember}, cookie: bobCookie, member: "bob", slideSet: true},
		{name: "session plane ignores a bearer", rule: routeRule{plane: planeSession, rule: auth.AnyMember}, bearer: bobBearer, want: apierr.CodeUnauthenticated},
		{name: "leaf held", rule: routeRule{plane: planeDual, rule: auth.Require(auth.MembersManage)}, bearer: annBearer, member: "ann"},
		{name: "leaf missing", rule: routeRule{plane: planeDual, rule: auth.Require(auth.MembersManage)}, bearer: bobBearer, want: apierr.CodeForbidden},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// The session slides at most once a second: start each case a
			// minute after its last use.
			require.NoError(t, st.TouchSession(ctx, shash, time.Now().Add(-time.Minute), time.Now().Add(time.Hour)))
			r := httptest.NewRequest(http.MethodGet, "http://broker.test/x", nil)
			if tc.bearer != "" {
				r.Header.Set("Authorization", tc.bearer)
			}
			if tc.cookie != "" {
				r.Header.Set("Cookie", tc.cookie)
			}
			if tc.tls {
				r.TLS = &tls.ConnectionState{}
			}
			w := httptest.NewRecorder()
			p, err := g.admit(w, r, tc.rule)
			if tc.want != "" {
				require.Equal(t, tc.want, apierr.Render(err).Body.Error, "err %v", err)
				require.Empty(t, w.Header().Values("Set-Cookie"))
				return
			}
			require.NoError(t, err)
			if tc.member == "" {
				require.Nil(t, p)
				return
			}
			require.Equal(t, tc.member, p.Member)
			cookies := w.Header().Values("Set-Cookie")
			if !tc.slideSet {
				require.Empty(t, cookies)
				return
			}
			want := auth.SessionCookie(sid, int(auth.SessionTTL/time.Second))
			if tc.tls {
				want += "; Secure"
			}
			require.Equal(t, []string{want}, cookies)
		})
	}
}

// Every REST route of the gRPC services maps to a method of the
// permission table, and the public ones are the public methods: the table
// authBeforeBody reads is complete.
func TestRPCRoutes(t *testing.T) {
	routes, err := rpcRoutes()
	require.NoError(t, err)
	require.NotEmpty(t, routes)
	var public []string
	for route, method := range routes {
		rule, known := auth.RuleFor(method)
		require.True(t, known, "%s -> %s has no permission rule", route, method)
		if rule.Public {
			public = append(public, route)
		}
	}
	require.ElementsMatch(t, []string{"GET /healthz", "POST /session/totp", "GET /push/vapid-public-key", "POST /enroll", "POST /enroll/poll", "GET /platform-connect/lookup"}, public)
	require.Equal(t, "/svc.v1.Broker/RevokeToken", routes["DELETE /members/{name}/tokens/{id}"])
}
