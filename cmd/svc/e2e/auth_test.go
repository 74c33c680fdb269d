package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestUnauthenticated(t *testing.T) {
	t.Parallel()
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		creds := []struct {
			name string
			c    cred
		}{
			{name: "none", c: anonymous},
			{name: "garbage bearer", c: cred{authorization: "Bearer garbage"}},
			{name: "wrong prefix", c: cred{authorization: "Bearer xyz_" + randomSecret(t)}},
			{name: "well-formed unknown token", c: bearer(randomToken(t))},
			{name: "truncated token", c: bearer(randomToken(t)[:20])},
			{name: "token with trailing bytes", c: bearer(randomToken(t) + "A")},
			{name: "basic scheme", c: cred{authorization: "Basic YWRtaW46YWRtaW4="}},
			{name: "empty bearer", c: cred{authorization: "Bearer "}},
			{name: "malformed session", c: sessionCred("garbage")},
			{name: "unknown session", c: sessionCred(randomSecret(t))},
		}
		calls := []struct {
			op  string
			req obj
		}{
			{op: "GetBriefing"},
			{op: "ListMembers"},
			{op: "GetRoster"},
			{op: "GetSession"},
			{op: "Logout"},
			{op: "CreateMember", req: obj{"name": "mallory", "permissions": []string{"admin"}}},
			{op: "ListTokens", req: obj{"name": "admin"}},
			{op: "RotateToken", req: obj{"name": "admin"}},
		}
		for _, cr := range creds {
			t.Run(cr.name, func(t *testing.T) {
				for _, call := range calls {
					mustFail(t, d, cr.c, call.op, call.req, "unauthenticated")
				}
			})
		}
		require.Equal(t, []string{"admin"}, memberNames(t, d, admin), "no refused call took effect")
		requireWorks(t, d, admin, "admin")
	})
}

func TestForbiddenWithoutMembersManage(t *testing.T) {
	t.Parallel()
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		bob := bearer(createMember(t, d, admin, "bob", "member"))
		// An operator holds leaves, but not members.manage.
		carolTok := createMember(t, d, admin, "carol", "operator")
		carolTokens := listOf(t, mustCall(t, d, admin, "ListTokens", obj{"name": "carol"}), "tokens")
		require.Len(t, carolTokens, 1)
		carolTokenID := carolTokens[0]["id"].(string)

		for _, caller := range []struct {
			name string
			c    cred
		}{
			{name: "member preset", c: bob},
			{name: "operator preset", c: bearer(carolTok)},
		} {
			t.Run(caller.name, func(t *testing.T) {
				tests := []struct {
					op  string
					req obj
				}{
					{op: "CreateMember", req: obj{"name": "mallory", "permissions": []string{"admin"}}},
					{op: "UpdateMember", req: obj{"name": "carol", "permissions": []string{"member"}}},
					{op: "UpdateMember", req: obj{"name": "bob", "permissions": []string{"admin"}}},
					{op: "UpdateMember", req: obj{"name": "admin", "role": obj{"title": "x"}}},
					{op: "DeleteMember", req: obj{"name": "carol"}},
					{op: "DeleteMember", req: obj{"name": "admin"}},
					{op: "DeleteMember", req: obj{"name": "bob"}},
					{op: "ListTokens", req: obj{"name": "admin"}},
					{op: "RotateToken", req: obj{"name": "admin"}},
					{op: "EnrollTotp", req: obj{"name": "admin"}},
					{op: "RevokeToken", req: obj{"name": "admin", "id": carolTokenID}},
					{op: "ListTokens", req: obj{"name": "ghost"}},
				}
				for _, tc := range tests {
					mustFail(t, d, caller.c, tc.op, tc.req, "forbidden")
				}
			})
		}
		mustFail(t, d, bob, "ListTokens", obj{"name": "carol"}, "forbidden")
		mustFail(t, d, bob, "RotateToken", obj{"name": "carol"}, "forbidden")
		mustFail(t, d, bob, "EnrollTotp", obj{"name": "carol"}, "forbidden")
		mustFail(t, d, bob, "RevokeToken", obj{"name": "carol", "id": carolTokenID}, "forbidden")

		// Nothing changed: carol's token still works, the team is intact.
		requireWorks(t, d, bearer(carolTok), "carol")
		require.Equal(t, []string{"admin", "bob", "carol"}, memberNames(t, d, admin))
		require.Equal(t, operatorLeaves, sortedStrs(t, memberByName(t, d, admin, "carol")["permissions"]))
		require.Empty(t, strs(t, memberByName(t, d, admin, "bob")["permissions"]))
		requireWorks(t, d, admin, "admin")
	})
}

func TestTOTPSessions(t *testing.T) {
	t.Parallel()
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		bobTok := createMember(t, d, admin, "bob", "operator")
		createMember(t, d, admin, "carol", "member")

		// Re-enrolling replaces the bound authenticator: the first
		// secret (enrolled by a manager) stops working once bob
		// enrolls himself.
		old := enroll(t, d, admin, "bob")
		bob := enroll(t, d, bearer(bobTok), "bob")
		require.NotEqual(t, old.secret, bob.secret)
		mustFail(t, d, anonymous, "CreateSession", obj{"code": old.next(t), "member": "bob"}, "unauthenticated")

		start := time.Now()
		r := d.call(t, anonymous, "CreateSession", obj{"code": bob.next(t), "member": "bob"})
		require.Empty(t, r.code)
		require.Equal(t, []string{"expiresAt", "member", "permissions"}, keys(r.body), "bob has no role")
		require.Equal(t, "bob", r.body["member"])
		require.Equal(t, operatorLeaves, sortedStrs(t, r.body["permissions"]))
		requireSessionExpiry(t, r.body["expiresAt"], start)
		bobSession := sessionFrom(t, r)

		s := mustCall(t, d, sessionCred(bobSession), "GetSession", nil)
		require.Equal(t, "bob", s["member"])
		requireSessionExpiry(t, s["expiresAt"], start)
		requireWorks(t, d, sessionCred(bobSession), "bob")

		// The codeless form finds the member by its code.
		carol := enroll(t, d, admin, "carol")
		code := carol.next(t)
		r = d.call(t, anonymous, "CreateSession", obj{"code": code})
		require.Empty(t, r.code)
		require.Equal(t, "carol", r.body["member"])
		require.Empty(t, strs(t, r.body["permissions"]))
		carolSession := sessionFrom(t, r)
		require.NotEqual(t, bobSession, carolSession)
		requireWorks(t, d, sessionCred(carolSession), "carol")

		// A named login checks only that member: dave's valid code
		// does not log in as carol.
		createMember(t, d, admin, "dave")
		dave := enroll(t, d, admin, "dave")
		mustFail(t, d, anonymous, "CreateSession", obj{"code": dave.next(t), "member": "carol"}, "unauthenticated")

		// An accepted code cannot be replayed, named or not.
		mustFail(t, d, anonymous, "CreateSession", obj{"code": code, "member": "carol"}, "unauthenticated")
		mustFail(t, d, anonymous, "CreateSession", obj{"code": code}, "unauthenticated")

		for _, bad := range []string{"", "12345", "1234567", "abcdef", "12 456", "１２３４５６"} {
			mustFail(t, d, anonymous, "CreateSession", obj{"code": bad, "member": "bob"}, "bad_request")
		}

		// A presented bearer is authoritative: a bad one is not rescued
		// by a valid cookie.
		requireRejected(t, d, cred{authorization: "Bearer " + randomToken(t), session: bobSession})

		// Logout ends this session only and clears the cookie.
		r = d.call(t, sessionCred(bobSession), "Logout", nil)
		require.Empty(t, r.code)
		requireClearedCookie(t, r.setCookie)
		mustFail(t, d, sessionCred(bobSession), "GetSession", nil, "unauthenticated")
		requireRejected(t, d, sessionCred(bobSession))
		requireWorks(t, d, sessionCred(carolSession), "carol")
		requireWorks(t, d, bearer(bobTok), "bob")

		// Deleting a member ends its sessions.
		mustCall(t, d, admin, "DeleteMember", obj{"name": "carol"})
		requireRejected(t, d, sessionCred(carolSession))
	})
}

// requireSessionExpiry asserts a 7-day expiry stamped after start.
func requireSessionExpiry(t *testing.T, v any, start time.Time) {
	t.Helper()
	ms, ok := v.(float64)
	require.True(t, ok, "expiresAt is a number of epoch ms: %#v", v)
	week := 7 * 24 * time.Hour
	require.GreaterOrEqual(t, ms, float64(start.Add(week).UnixMilli()-1000))
	require.LessOrEqual(t, ms, float64(time.Now().Add(week).UnixMilli()+1000))
}

// requireClearedCookie asserts one Set-Cookie deleting svc_session.
func requireClearedCookie(t *testing.T, setCookie []string) {
	t.Helper()
	require.Len(t, setCookie, 1, "%v", setCookie)
	c, err := http.ParseSetCookie(setCookie[0])
	require.NoError(t, err)
	require.Equal(t, "svc_session", c.Name)
	require.Empty(t, c.Value)
	require.Equal(t, "/", c.Path)
	require.True(t, c.MaxAge < 0 || (!c.Expires.IsZero() && c.Expires.Before(time.Now())), "expired: %q", setCookie[0])
	require.True(t, c.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, c.SameSite)
}

func TestTOTPRateLimits(t *testing.T) {
	t.Parallel()
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		users := map[string]*totpUser{}
		for _, name := range []string{"bob", "carol", "dave"} {
			createMember(t, d, admin, name)
			users[name] = enroll(t, d, admin, name)
		}
		bob, carol, dave := users["bob"], users["carol"], users["dave"]

		// Five failures for a named member, then every attempt for
		// that member is 429, even with the right code.
		for range 5 {
			mustFail(t, d, anonymous, "CreateSession", obj{"code": bob.wrong(t), "member": "bob"}, "unauthenticated")
		}
		r := mustFail(t, d, anonymous, "CreateSession", obj{"code": bob.next(t), "member": "bob"}, "rate_limited")
		requireRetryAfter(t, r)
		// Leaving the name out does not escape bob's limit: the code
		// matches bob, whose limit covers the attempt.
		requireRetryAfter(t, mustFail(t, d, anonymous, "CreateSession", obj{"code": bob.next(t)}, "rate_limited"))

		// Others are not covered by bob's limit: 5 global failures so far.
		r = d.call(t, anonymous, "CreateSession", obj{"code": carol.next(t), "member": "carol"})
		require.Empty(t, r.code, "carol is not limited by bob's failures")

		// Five more failures, codeless or naming unknown members, reach
		// the global limit of ten.
		for _, req := range []obj{
			{"code": dave.wrong(t)},
			{"code": dave.wrong(t)},
			{"code": dave.wrong(t), "member": "ghost"},
			{"code": dave.wrong(t)},
			{"code": dave.wrong(t), "member": "ghost"},
		} {
			mustFail(t, d, anonymous, "CreateSession", req, "unauthenticated")
		}
		code := dave.next(t)
		requireRetryAfter(t, mustFail(t, d, anonymous, "CreateSession", obj{"code": code, "member": "dave"}, "rate_limited"))
		requireRetryAfter(t, mustFail(t, d, anonymous, "CreateSession", obj{"code": code}, "rate_limited"))
		requireRetryAfter(t, mustFail(t, d, anonymous, "CreateSession", obj{"code": carol.next(t), "member": "carol"}, "rate_limited"))

		// Bearer tokens are unaffected by the login limit.
		requireWorks(t, d, admin, "admin")
	})
}

// requireRetryAfter asserts a Retry-After within the 15-minute window.
func requireRetryAfter(t *testing.T, r result) {
	t.Helper()
	require.GreaterOrEqual(t, r.retryAfter, 1)
	require.LessOrEqual(t, r.retryAfter, 15*60)
}

func TestSessionCookieOverHTTP(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := p.adminToken(t)
	d := restDriver{p}
	createMember(t, d, bearer(admin), "bob")
	bob := enroll(t, d, bearer(admin), "bob")
	adminSession := login(t, d, enroll(t, d, bearer(admin), "admin"))

	r := p.do(t, http.MethodPost, "/session/totp", obj{"code": bob.next(t), "member": "bob"})
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	cookies := r.header.Values("Set-Cookie")
	require.Len(t, cookies, 1)
	require.Regexp(t, sessionCookieRE, cookies[0])
	require.NotContains(t, strings.ToLower(cookies[0]), "secure", "no Secure over plain HTTP")
	session := sessionCookieRE.FindStringSubmatch(cookies[0])[1]

	tests := []struct {
		name       string
		origin     string
		wantStatus int
	}{
		{name: "foreign origin", origin: "http://evil.example", wantStatus: http.StatusForbidden},
		{name: "same host other port", origin: "http://127.0.0.1:1", wantStatus: http.StatusForbidden},
		{name: "opaque origin", origin: "null", wantStatus: http.StatusForbidden},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := p.do(t, http.MethodPost, "/session/logout", obj{}, withSession(session), withHeader("Origin", tc.origin))
			requireRESTError(t, r, "forbidden")
			require.Empty(t, r.header.Values("Set-Cookie"), "the cookie is not cleared")
			// A cross-origin PATCH by a manager's cookie is refused as well.
			r = p.do(t, http.MethodPatch, "/members/bob", obj{"role": obj{"title": "pwned"}}, withSession(adminSession), withHeader("Origin", tc.origin))
			requireRESTError(t, r, "forbidden")
		})
	}
	require.NotContains(t, memberByName(t, d, bearer(admin), "bob"), "role", "no refused PATCH took effect")
	r = p.do(t, http.MethodPatch, "/members/bob", obj{"role": obj{"title": "Builder"}}, withSession(adminSession), withHeader("Origin", p.base))
	require.Equal(t, http.StatusOK, r.status, "same-origin PATCH: %s", r.raw)
	require.Equal(t, obj{"title": "Builder", "description": ""}, r.body["role"])
	// The refused logout did not end the session; safe methods pass with
	// any origin; bearer calls carry no ambient credential and pass too.
	r = p.do(t, http.MethodGet, "/session", nil, withSession(session), withHeader("Origin", "http://evil.example"))
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	require.Equal(t, "bob", r.body["member"])
	r = p.do(t, http.MethodPost, "/members", obj{"name": "carol", "permissions": []string{}}, withBearer(admin), withHeader("Origin", "http://evil.example"))
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)

	// Same-origin logout works.
	r = p.do(t, http.MethodPost, "/session/logout", obj{}, withSession(session), withHeader("Origin", p.base))
	require.Equal(t, http.StatusNoContent, r.status, "%s", r.raw)
	require.Empty(t, r.raw)
	requireClearedCookie(t, r.header.Values("Set-Cookie"))
	requireRESTError(t, p.do(t, http.MethodGet, "/session", nil, withSession(session)), "unauthenticated")
	requireRESTError(t, p.do(t, http.MethodGet, "/briefing", nil, withSession(session)), "unauthenticated")
}
