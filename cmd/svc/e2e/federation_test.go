package e2e

// End-to-end tests of platform connect and federation JWTs (core.md
// Authentication: Federation JWT; "Platform connect (optional
// federation)"; docs/FEDERATION.md): a JWT is a credential like a token over
// REST and gRPC, bind writes <config>.jwt.json and makes JWTs work without a
// restart, bind's refusals, the one-time lookup and the gates.

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/stretchr/testify/require"

	apiv1 "svc/gen/svc/v1"
	"svc/server/federation/issuertest"
)

func init() {
	for name, spec := range map[string]rpcSpec{
		"CreatePairingCode": {http.MethodPost, "/platform-connect/pairing-codes", http.StatusOK, "", unaryOn(apiv1.NewPlatformClient, apiv1.PlatformClient.CreatePairingCode)},
		"LookupPairingCode": {http.MethodGet, "/platform-connect/lookup", http.StatusOK, "", unaryOn(apiv1.NewPlatformClient, apiv1.PlatformClient.LookupPairingCode)},
		"Bind":              {http.MethodPost, "/platform-connect/bind", http.StatusOK, "", unaryOn(apiv1.NewPlatformClient, apiv1.PlatformClient.Bind)},
	} {
		rpcs[name] = spec
	}
	queryOps["LookupPairingCode"] = true
}

// fedEgress lets the broker reach the test's loopback issuer and platform;
// the default policy refuses loopback.
const fedEgress = "SVC_EGRESS_ALLOW=127.0.0.1"

// fakePlatform is a platform's lookup endpoint: it answers every lookup
// with the configured status and body, and records the codes asked for.
type fakePlatform struct {
	srv    *httptest.Server
	mu     sync.Mutex
	status int
	body   string
	codes  []string
}

func newFakePlatform(t testing.TB, status int, body string) *fakePlatform {
	t.Helper()
	f := &fakePlatform{status: status, body: body}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/platform-connect/lookup" {
			http.NotFound(w, r)
			return
		}
		f.mu.Lock()
		f.codes = append(f.codes, r.URL.Query().Get("code"))
		status, body := f.status, f.body
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakePlatform) asked() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.codes...)
}

// platformInfo is the lookup answer naming is.
func platformInfo(t testing.TB, is *issuertest.Issuer) string {
	t.Helper()
	b, err := json.Marshal(obj{"issuer": is.Name, "audience": is.Audience, "jwksUrl": is.JWKSURL()})
	require.NoError(t, err)
	return string(b)
}

// adminSession enrolls the admin's TOTP and logs in.
func adminSession(t testing.TB, d driver, admin cred) cred {
	t.Helper()
	return sessionCred(login(t, d, enroll(t, d, admin, "admin")))
}

// onEachTransportEnv is onEachTransport with extra environment for the
// broker.
func onEachTransportEnv(t *testing.T, env []string, scenario func(t *testing.T, p *proc, admin cred, d driver)) {
	t.Helper()
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			p := mustStartSvc(t, procOpts{env: env})
			scenario(t, p, bearer(p.adminToken(t)), tr.connect(t, p))
		})
	}
}

func jwtCred(t testing.TB, k *issuertest.Key, claims any) cred {
	t.Helper()
	return bearer(issuertest.Sign(t, k, claims))
}

func TestFederationJWTWorksLikeAToken(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			rsaKey, ecKey := issuertest.NewRSAKey(t, "rsa-1"), issuertest.NewECKey(t, "ec-1")
			is := issuertest.New(t, rsaKey, ecKey)
			plat := newFakePlatform(t, http.StatusOK, platformInfo(t, is))
			p := mustStartSvc(t, procOpts{env: []string{fedEgress}})
			admin := bearer(p.adminToken(t))
			d := tr.connect(t, p)
			aliceTok := createMember(t, d, admin, "alice", "activity.read")
			now := time.Now()
			alice := jwtCred(t, rsaKey, is.Claims("alice", now))

			// Before a bind no JWT is a credential.
			requireRejected(t, d, alice)

			session := adminSession(t, d, admin)
			b := mustCall(t, d, session, "Bind", obj{"pairingCode": "pc-1", "platformUrl": plat.srv.URL})
			require.Equal(t, true, b["bound"])
			require.Equal(t, plat.srv.URL, b["platformUrl"])
			require.Equal(t, obj{"issuer": is.Name, "audience": is.Audience, "jwksUrl": is.JWKSURL()}, b["jwt"])
			require.Positive(t, b["boundAt"])
			require.Equal(t, []string{"pc-1"}, plat.asked())

			overlay := p.opts.configPath + ".jwt.json"
			st, err := os.Stat(overlay)
			require.NoError(t, err)
			require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
			raw, err := os.ReadFile(overlay)
			require.NoError(t, err)
			require.JSONEq(t, `{"jwt":`+platformInfo(t, is)+`}`, string(raw))

			// Without a restart, the JWT is alice, exactly as her token is.
			requireWorks(t, d, alice, "alice")
			requireWorks(t, d, jwtCred(t, ecKey, is.Claims("alice", now)), "alice")
			require.Equal(t, mustCall(t, d, bearer(aliceTok), "GetBriefing", nil), mustCall(t, d, alice, "GetBriefing", nil))
			require.Equal(t, mustCall(t, d, bearer(aliceTok), "GetSession", nil)["member"], mustCall(t, d, alice, "GetSession", nil)["member"])

			// Gates apply as to her token: alice lacks members.manage; a
			// JWT naming the admin holds it.
			mustFail(t, d, alice, "CreateMember", obj{"name": "carol", "permissions": []string{}}, "forbidden")
			mustFail(t, d, bearer(aliceTok), "CreateMember", obj{"name": "carol", "permissions": []string{}}, "forbidden")
			createMember(t, d, jwtCred(t, rsaKey, is.Claims("admin", now)), "carol")
			mustFail(t, d, alice, "Bind", obj{"pairingCode": "x", "platformUrl": plat.srv.URL}, "forbidden")
			mustFail(t, d, jwtCred(t, rsaKey, is.Claims("admin", now)), "Bind", obj{"pairingCode": "x", "platformUrl": plat.srv.URL}, "forbidden")

			// Refused JWTs.
			with := func(f func(c *jwt.Claims)) jwt.Claims { c := is.Claims("alice", now); f(&c); return c }
			for _, c := range map[string]cred{
				"unknown sub":   jwtCred(t, rsaKey, is.Claims("mallory", now)),
				"expired":       jwtCred(t, rsaKey, with(func(c *jwt.Claims) { c.Expiry = jwt.NewNumericDate(now.Add(-time.Hour)) })),
				"no exp":        jwtCred(t, rsaKey, with(func(c *jwt.Claims) { c.Expiry = nil })),
				"wrong aud":     jwtCred(t, rsaKey, with(func(c *jwt.Claims) { c.Audience = jwt.Audience{"elsewhere"} })),
				"wrong iss":     jwtCred(t, rsaKey, with(func(c *jwt.Claims) { c.Issuer = "https://evil.example/" })),
				"foreign key":   jwtCred(t, issuertest.NewRSAKey(t, "rsa-1"), is.Claims("alice", now)),
				"alg none":      bearer("eyJhbGciOiJub25lIiwia2lkIjoicnNhLTEifQ.eyJzdWIiOiJhbGljZSJ9.eA"),
				"not JWS-shape": bearer("a.b"),
			} {
				mustFail(t, d, c, "GetBriefing", nil, "unauthenticated")
			}

			// A bound broker keeps its bind across a restart.
			p.mustStop(t)
			p2 := p.restart(t)
			requireWorks(t, tr.connect(t, p2), alice, "alice")
		})
	}
}

// TestFederationJWTOnHandWrittenRoutes: a JWT is the bearer plane on the
// hand-written routes (OTLP export is bearer only), and a cookie-only route
// ignores it.
func TestFederationJWTOnHandWrittenRoutes(t *testing.T) {
	key := issuertest.NewECKey(t, "ec-1")
	is := issuertest.New(t, key)
	plat := newFakePlatform(t, http.StatusOK, platformInfo(t, is))
	p := mustStartSvc(t, procOpts{env: []string{fedEgress}})
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	createMember(t, d, admin, "alice")
	mustCall(t, d, adminSession(t, d, admin), "Bind", obj{"pairingCode": "c", "platformUrl": plat.srv.URL})

	tok := issuertest.Sign(t, key, is.Claims("alice", time.Now()))
	r := p.do(t, http.MethodPost, "/otlp/v1/metrics", []byte(`{}`), withBearer(tok))
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	requireRESTError(t, p.do(t, http.MethodPost, "/otlp/v1/metrics", []byte(`{}`), withBearer(tok+"x")), "unauthenticated")
	requireRESTError(t, p.do(t, http.MethodPost, "/presence/activity", obj{"state": "working"}, withBearer(tok+"x")), "unauthenticated")
	r = p.do(t, http.MethodPost, "/presence/activity", obj{"state": "working"}, withBearer(tok))
	require.Equal(t, http.StatusNoContent, r.status, "%s", r.raw)
}

// TestFederationFromTeamConfig: the team config's jwt block is live at boot
// and the overlay file wins over it.
func TestFederationFromTeamConfig(t *testing.T) {
	k1, k2 := issuertest.NewRSAKey(t, "k1"), issuertest.NewRSAKey(t, "k2")
	is1, is2 := issuertest.New(t, k1), issuertest.New(t, k2)
	is2.Audience = "team-two"
	p := mustStartSvc(t, procOpts{env: []string{fedEgress}})
	p.adminToken(t)
	p.mustStop(t)

	raw, err := os.ReadFile(p.opts.configPath)
	require.NoError(t, err)
	var cfg map[string]any
	require.NoError(t, json.Unmarshal(raw, &cfg))
	cfg["jwt"] = obj{"issuer": is1.Name, "audience": is1.Audience, "jwksUrl": is1.JWKSURL()}
	raw, err = json.Marshal(cfg)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(p.opts.configPath, raw, 0o600))

	p = p.restart(t)
	d := restDriver{p}
	now := time.Now()
	requireWorks(t, d, jwtCred(t, k1, is1.Claims("admin", now)), "admin")
	requireRejected(t, d, jwtCred(t, k2, is2.Claims("admin", now)))
	p.mustStop(t)

	// An overlay file wins over the team config.
	require.NoError(t, os.WriteFile(p.opts.configPath+".jwt.json", []byte(`{"jwt":`+platformInfo(t, is2)+`}`), 0o600))
	p = p.restart(t)
	d = restDriver{p}
	requireWorks(t, d, jwtCred(t, k2, is2.Claims("admin", now)), "admin")
	requireRejected(t, d, jwtCred(t, k1, is1.Claims("admin", now)))
	p.mustStop(t)

	// An overlay that does not parse refuses to start, naming the file.
	require.NoError(t, os.WriteFile(p.opts.configPath+".jwt.json", []byte(`{"jwt":{"issuer":"i"}}`), 0o600))
	code, _, stderr := runSvc(t, []string{"serve", "--addr", "127.0.0.1:0", "--config-path", p.opts.configPath}, nil, nil)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, ".jwt.json")
}

func TestPlatformBindRefusals(t *testing.T) {
	onEachTransportEnv(t, []string{fedEgress}, func(t *testing.T, p *proc, admin cred, d driver) {
		is := issuertest.New(t, issuertest.NewRSAKey(t, "k"))
		good := newFakePlatform(t, http.StatusOK, platformInfo(t, is))
		session := adminSession(t, d, admin)
		bobTok := createMember(t, d, admin, "bob")
		bobSession := sessionCred(login(t, d, enroll(t, d, admin, "bob")))
		bind := obj{"pairingCode": "code-1", "platformUrl": good.srv.URL}

		// Gates: a session, of a members.manage holder.
		mustFail(t, d, anonymous, "Bind", bind, "unauthenticated")
		mustFail(t, d, admin, "Bind", bind, "forbidden")
		mustFail(t, d, bearer(bobTok), "Bind", bind, "forbidden")
		mustFail(t, d, bobSession, "Bind", bind, "forbidden")
		require.Empty(t, good.asked(), "no refused bind reached the platform")

		// Bad input.
		for name, req := range map[string]obj{
			"no code":        {"platformUrl": good.srv.URL},
			"no url":         {"pairingCode": "c"},
			"ftp url":        {"pairingCode": "c", "platformUrl": "ftp://127.0.0.1/"},
			"relative url":   {"pairingCode": "c", "platformUrl": "/platform"},
			"url with query": {"pairingCode": "c", "platformUrl": good.srv.URL + "/?x=1"},
		} {
			r := d.call(t, session, "Bind", req)
			require.Equal(t, "bad_request", r.code, name)
		}

		// The platform's side.
		unreachable := httptest.NewServer(http.NotFoundHandler())
		unreachable.Close()
		mustFail(t, d, session, "Bind", obj{"pairingCode": "c", "platformUrl": unreachable.URL}, "bad_gateway")
		for name, tc := range map[string]struct {
			status int
			body   string
			want   string
		}{
			"404":          {http.StatusNotFound, `{"error":"not_found","message":"no such code"}`, "bad_gateway"},
			"500":          {http.StatusInternalServerError, platformInfo(t, is), "bad_gateway"},
			"not JSON":     {http.StatusOK, `<html>`, "bad_request"},
			"missing aud":  {http.StatusOK, `{"issuer":"i","jwksUrl":"https://p/jwks"}`, "bad_request"},
			"empty jwks":   {http.StatusOK, `{"issuer":"i","audience":"a","jwksUrl":""}`, "bad_request"},
			"bad jwks url": {http.StatusOK, `{"issuer":"i","audience":"a","jwksUrl":"file:///etc/passwd"}`, "bad_request"},
		} {
			plat := newFakePlatform(t, tc.status, tc.body)
			r := d.call(t, session, "Bind", obj{"pairingCode": "c", "platformUrl": plat.srv.URL})
			require.Equal(t, tc.want, r.code, name)
			require.Len(t, plat.asked(), 1, name)
		}
		_, err := os.Stat(p.opts.configPath + ".jwt.json")
		require.ErrorIs(t, err, os.ErrNotExist, "no refused bind wrote the overlay")
		requireRejected(t, d, jwtCred(t, issuertest.NewRSAKey(t, "k"), is.Claims("admin", time.Now())))
	})

	t.Run("loopback refused by the default egress policy", func(t *testing.T) {
		is := issuertest.New(t, issuertest.NewRSAKey(t, "k"))
		plat := newFakePlatform(t, http.StatusOK, platformInfo(t, is))
		p := mustStartSvc(t, procOpts{})
		d := restDriver{p}
		session := adminSession(t, d, bearer(p.adminToken(t)))
		mustFail(t, d, session, "Bind", obj{"pairingCode": "c", "platformUrl": plat.srv.URL}, "bad_gateway")
		require.Empty(t, plat.asked())
	})
}

func TestPairingCodeLookup(t *testing.T) {
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		bobTok := createMember(t, d, admin, "bob")
		info := obj{"issuer": "https://platform.example/", "audience": "team-x", "jwksUrl": "https://platform.example/jwks"}

		// Gates: minting needs members.manage.
		mustFail(t, d, anonymous, "CreatePairingCode", info, "unauthenticated")
		mustFail(t, d, bearer(bobTok), "CreatePairingCode", info, "forbidden")
		// This broker has no jwt block to pass on, and partial blocks are
		// refused.
		mustFail(t, d, admin, "CreatePairingCode", obj{}, "bad_request")
		mustFail(t, d, admin, "CreatePairingCode", obj{"issuer": "i"}, "bad_request")
		mustFail(t, d, admin, "CreatePairingCode", obj{"issuer": "i", "audience": "a", "jwksUrl": "ftp://x/"}, "bad_request")

		minted := mustCall(t, d, admin, "CreatePairingCode", info)
		code, _ := minted["code"].(string)
		require.Regexp(t, `^[a-z2-7]{32}$`, code)
		require.Equal(t, info, minted["jwt"])
		expires, _ := minted["expiresAt"].(float64)
		require.InDelta(t, float64(time.Now().Add(5*time.Minute).UnixMilli()), expires, 60_000)

		// The lookup is public and answers once.
		mustFail(t, d, anonymous, "LookupPairingCode", obj{"code": "wrong"}, "not_found")
		require.Equal(t, info, mustCall(t, d, anonymous, "LookupPairingCode", obj{"code": code}))
		mustFail(t, d, anonymous, "LookupPairingCode", obj{"code": code}, "not_found")
		mustFail(t, d, admin, "LookupPairingCode", obj{"code": code}, "not_found")
		mustFail(t, d, anonymous, "LookupPairingCode", obj{}, "bad_request")
	})
}

// TestBrokerToBrokerBind: broker A mints a pairing code for a platform's
// jwt block; broker B binds to A with it, and takes the platform's JWTs.
func TestBrokerToBrokerBind(t *testing.T) {
	key := issuertest.NewECKey(t, "ec-1")
	is := issuertest.New(t, key)
	a := mustStartSvc(t, procOpts{})
	aAdmin := bearer(a.adminToken(t))
	b := mustStartSvc(t, procOpts{env: []string{fedEgress}})
	bd := restDriver{b}
	bSession := adminSession(t, bd, bearer(b.adminToken(t)))

	code, _ := mustCall(t, restDriver{a}, aAdmin, "CreatePairingCode", obj{"issuer": is.Name, "audience": is.Audience, "jwksUrl": is.JWKSURL()})["code"].(string)
	requireRejected(t, bd, jwtCred(t, key, is.Claims("admin", time.Now())))
	mustCall(t, bd, bSession, "Bind", obj{"pairingCode": code, "platformUrl": a.base})
	requireWorks(t, bd, jwtCred(t, key, is.Claims("admin", time.Now())), "admin")

	// The code was used: a second bind with it finds nothing at A.
	mustFail(t, bd, bSession, "Bind", obj{"pairingCode": code, "platformUrl": a.base}, "bad_gateway")
	r := a.do(t, http.MethodGet, "/platform-connect/lookup?code="+url.QueryEscape(code), nil)
	requireRESTError(t, r, "not_found")
}
