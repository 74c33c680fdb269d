package federation_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/stretchr/testify/require"

	"svc/server/federation"
	"svc/server/federation/issuertest"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newClock() *clock { return &clock{t: time.Unix(1_800_000_000, 0)} }

// env is an issuer with an RSA and an EC key and a verifier configured for
// it.
type env struct {
	is     *issuertest.Issuer
	rsa    *issuertest.Key
	ec     *issuertest.Key
	clk    *clock
	v      *federation.Verifier
	config federation.Config
}

func newEnv(t testing.TB) *env {
	t.Helper()
	e := &env{rsa: issuertest.NewRSAKey(t, "rsa-1"), ec: issuertest.NewECKey(t, "ec-1"), clk: newClock()}
	e.is = issuertest.New(t, e.rsa, e.ec)
	e.v = federation.New(federation.Options{Client: e.is.Srv.Client(), Now: e.clk.Now})
	e.config = federation.Config{Issuer: e.is.Name, Audience: e.is.Audience, JWKSURL: e.is.JWKSURL()}
	e.v.SetConfig(&e.config)
	return e
}

// rawJWS builds a compact JWS from a header and claims with the given
// signature bytes, for tokens no honest signer makes.
func rawJWS(header, claims any, sig []byte) string {
	h, _ := json.Marshal(header)
	c, _ := json.Marshal(claims)
	enc := base64.RawURLEncoding
	return enc.EncodeToString(h) + "." + enc.EncodeToString(c) + "." + enc.EncodeToString(sig)
}

// hs256 signs header and claims with HMAC-SHA256 under secret.
func hs256(header, claims any, secret []byte) string {
	unsigned := rawJWS(header, claims, nil)
	unsigned = unsigned[:len(unsigned)-1] // drop the trailing "."
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(unsigned))
	return unsigned + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func TestVerify(t *testing.T) {
	e := newEnv(t)
	now := e.clk.Now()
	good := e.is.Claims("alice", now)
	with := func(f func(c *jwt.Claims)) jwt.Claims { c := good; f(&c); return c }

	rsaPub := e.rsa.Public()
	der, err := x509.MarshalPKIXPublicKey(rsaPub.Key)
	require.NoError(t, err)
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	jwkBytes, err := json.Marshal(rsaPub)
	require.NoError(t, err)
	goodRSA := issuertest.Sign(t, e.rsa, good)

	cases := []struct {
		name    string
		token   string
		wantSub string
		wantErr string
	}{
		{name: "good RS256", token: goodRSA, wantSub: "alice"},
		{name: "good ES256", token: issuertest.Sign(t, e.ec, good), wantSub: "alice"},
		{name: "audience among several", token: issuertest.Sign(t, e.rsa, with(func(c *jwt.Claims) { c.Audience = jwt.Audience{"other", e.is.Audience} })), wantSub: "alice"},
		{name: "exp within leeway", token: issuertest.Sign(t, e.rsa, with(func(c *jwt.Claims) { c.Expiry = jwt.NewNumericDate(now.Add(-10 * time.Second)) })), wantSub: "alice"},
		{name: "alg none", token: rawJWS(map[string]string{"alg": "none", "kid": "rsa-1"}, good, []byte("x")), wantErr: "unparsable"},
		{name: "alg none empty signature", token: strings.TrimSuffix(rawJWS(map[string]string{"alg": "none", "kid": "rsa-1"}, good, nil), "."), wantErr: "not a compact JWS"},
		{name: "HS256 keyed with the RSA public key PEM", token: hs256(map[string]string{"alg": "HS256", "kid": "rsa-1", "typ": "JWT"}, good, pemBytes), wantErr: "unparsable"},
		{name: "HS256 keyed with the RSA JWK", token: hs256(map[string]string{"alg": "HS256", "kid": "rsa-1", "typ": "JWT"}, good, jwkBytes), wantErr: "unparsable"},
		{name: "ES256 token naming the RSA key", token: issuertest.SignAs(t, jose.ES256, "rsa-1", e.ec.Priv, good), wantErr: "does not fit"},
		{name: "RS256 token naming the EC key", token: issuertest.SignAs(t, jose.RS256, "ec-1", e.rsa.Priv, good), wantErr: "does not fit"},
		{name: "PS256 over a key published for RS256", token: issuertest.SignAs(t, jose.PS256, "rsa-1", e.rsa.Priv, good), wantErr: "does not fit"},
		{name: "bad signature", token: goodRSA[:len(goodRSA)-4] + flip(goodRSA[len(goodRSA)-4:]), wantErr: "bad signature"},
		{name: "claims swapped under a good signature", token: swapClaims(goodRSA, with(func(c *jwt.Claims) { c.Subject = "root" })), wantErr: "bad signature"},
		{name: "signed by an unpublished key under a published kid", token: issuertest.Sign(t, &issuertest.Key{KID: "rsa-1", Alg: jose.RS256, Priv: issuertest.NewRSAKey(t, "x").Priv}, good), wantErr: "bad signature"},
		{name: "unknown kid", token: issuertest.Sign(t, issuertest.NewECKey(t, "ec-9"), good), wantErr: "unknown kid"},
		{name: "no kid", token: issuertest.SignAs(t, jose.RS256, "", e.rsa.Priv, good), wantErr: "no kid"},
		{name: "wrong issuer", token: issuertest.Sign(t, e.rsa, with(func(c *jwt.Claims) { c.Issuer = "https://evil.example/" })), wantErr: "wrong issuer"},
		{name: "wrong audience", token: issuertest.Sign(t, e.rsa, with(func(c *jwt.Claims) { c.Audience = jwt.Audience{"other-team"} })), wantErr: "wrong audience"},
		{name: "no audience", token: issuertest.Sign(t, e.rsa, with(func(c *jwt.Claims) { c.Audience = nil })), wantErr: "wrong audience"},
		{name: "expired", token: issuertest.Sign(t, e.rsa, with(func(c *jwt.Claims) { c.Expiry = jwt.NewNumericDate(now.Add(-time.Minute)) })), wantErr: "expired"},
		{name: "missing exp", token: issuertest.Sign(t, e.rsa, with(func(c *jwt.Claims) { c.Expiry = nil })), wantErr: "no exp"},
		{name: "nbf in the future", token: issuertest.Sign(t, e.rsa, with(func(c *jwt.Claims) { c.NotBefore = jwt.NewNumericDate(now.Add(time.Minute)) })), wantErr: "not valid yet"},
		{name: "iat in the future", token: issuertest.Sign(t, e.rsa, with(func(c *jwt.Claims) { c.IssuedAt = jwt.NewNumericDate(now.Add(time.Minute)) })), wantErr: "issued in the future"},
		{name: "no subject", token: issuertest.Sign(t, e.rsa, with(func(c *jwt.Claims) { c.Subject = "" })), wantErr: "no sub"},
		{name: "svc token", token: "svc_AAAA", wantErr: "not a compact JWS"},
		{name: "too large", token: issuertest.Sign(t, e.rsa, map[string]any{"iss": good.Issuer, "aud": e.is.Audience, "sub": "alice", "exp": now.Add(time.Hour).Unix(), "pad": strings.Repeat("a", federation.MaxTokenBytes)}), wantErr: "not a compact JWS"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := e.v.Verify(context.Background(), tc.token)
			if tc.wantErr != "" {
				require.ErrorIs(t, err, federation.ErrInvalid)
				require.ErrorContains(t, err, tc.wantErr)
				require.Empty(t, c.Subject)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.wantSub, c.Subject)
			require.False(t, c.Expiry.IsZero())
		})
	}
}

func flip(s string) string {
	b := []byte(s)
	for i := range b {
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
	}
	return string(b)
}

// swapClaims keeps tok's header and signature over other claims.
func swapClaims(tok string, claims any) string {
	parts := strings.Split(tok, ".")
	c, _ := json.Marshal(claims)
	return parts[0] + "." + base64.RawURLEncoding.EncodeToString(c) + "." + parts[2]
}

func TestNotConfigured(t *testing.T) {
	e := newEnv(t)
	tok := issuertest.Sign(t, e.rsa, e.is.Claims("alice", e.clk.Now()))
	e.v.SetConfig(nil)
	require.Nil(t, e.v.Config())
	_, err := e.v.Verify(context.Background(), tok)
	require.ErrorIs(t, err, federation.ErrNotConfigured)
	require.Zero(t, e.is.Fetches())

	// Configured again: the same token verifies at once.
	e.v.SetConfig(&e.config)
	c, err := e.v.Verify(context.Background(), tok)
	require.NoError(t, err)
	require.Equal(t, "alice", c.Subject)
}

func TestConfigSwapAppliesAtOnce(t *testing.T) {
	e := newEnv(t)
	tok := issuertest.Sign(t, e.rsa, e.is.Claims("alice", e.clk.Now()))
	_, err := e.v.Verify(context.Background(), tok)
	require.NoError(t, err)

	other := e.config
	other.Audience = "another-team"
	e.v.SetConfig(&other)
	_, err = e.v.Verify(context.Background(), tok)
	require.ErrorContains(t, err, "wrong audience")

	// A second issuer's keys replace the first's: the old token's kid is
	// unknown there.
	k2 := issuertest.NewRSAKey(t, "rsa-other")
	is2 := issuertest.New(t, k2)
	e.v.SetConfig(&federation.Config{Issuer: is2.Name, Audience: is2.Audience, JWKSURL: is2.JWKSURL()})
	_, err = e.v.Verify(context.Background(), tok)
	require.ErrorContains(t, err, "unknown kid")
	_, err = e.v.Verify(context.Background(), issuertest.Sign(t, k2, is2.Claims("bob", e.clk.Now())))
	require.NoError(t, err)
}

func TestKeyRotation(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	old := issuertest.Sign(t, e.rsa, e.is.Claims("alice", e.clk.Now()))
	_, err := e.v.Verify(ctx, old)
	require.NoError(t, err)
	require.EqualValues(t, 1, e.is.Fetches())

	// Verified again from the cache.
	_, err = e.v.Verify(ctx, old)
	require.NoError(t, err)
	require.EqualValues(t, 1, e.is.Fetches())

	// The platform rotates: rsa-2 appears, rsa-1 goes.
	k2 := issuertest.NewRSAKey(t, "rsa-2")
	e.is.Publish(k2, e.ec)
	e.clk.Advance(federation.DefaultMinRefresh)
	fresh := issuertest.Sign(t, k2, e.is.Claims("alice", e.clk.Now()))
	_, err = e.v.Verify(ctx, fresh)
	require.NoError(t, err, "an unknown kid refreshes the keys")
	require.EqualValues(t, 2, e.is.Fetches())

	// That refresh dropped rsa-1: its tokens are refused now.
	_, err = e.v.Verify(ctx, old)
	require.ErrorContains(t, err, "unknown kid")
	require.EqualValues(t, 2, e.is.Fetches(), "a miss right after a refresh is rate-limited")
}

func TestRemovedKeyRefusedAfterMaxAge(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	_, err := e.v.Verify(ctx, issuertest.Sign(t, e.rsa, e.is.Claims("alice", e.clk.Now())))
	require.NoError(t, err)

	e.is.Publish(e.ec) // rsa-1 removed; nothing new to trigger a refresh
	e.clk.Advance(federation.DefaultMaxKeyAge - time.Second)
	_, err = e.v.Verify(ctx, issuertest.Sign(t, e.rsa, e.is.Claims("alice", e.clk.Now())))
	require.NoError(t, err, "cached keys are used until they are MaxKeyAge old")
	e.clk.Advance(time.Second)
	_, err = e.v.Verify(ctx, issuertest.Sign(t, e.rsa, e.is.Claims("alice", e.clk.Now())))
	require.ErrorContains(t, err, "unknown kid")
	require.EqualValues(t, 2, e.is.Fetches())
}

func TestUnknownKidFloodIsRateLimited(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	_, err := e.v.Verify(ctx, issuertest.Sign(t, e.rsa, e.is.Claims("alice", e.clk.Now())))
	require.NoError(t, err)
	e.clk.Advance(federation.DefaultMinRefresh)

	attacker := issuertest.NewECKey(t, "x")
	toks := make([]string, 200)
	for i := range toks {
		toks[i] = issuertest.SignAs(t, jose.ES256, fmt.Sprintf("kid-%d", i), attacker.Priv, e.is.Claims("alice", e.clk.Now()))
	}
	errs := make([]error, len(toks))
	var wg sync.WaitGroup
	for i := range toks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = e.v.Verify(ctx, toks[i])
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.ErrorContains(t, err, "unknown kid")
	}
	require.EqualValues(t, 2, e.is.Fetches(), "200 unknown kids cost one fetch")

	// Good tokens keep verifying from the cache meanwhile.
	_, err = e.v.Verify(ctx, issuertest.Sign(t, e.ec, e.is.Claims("alice", e.clk.Now())))
	require.NoError(t, err)
	require.EqualValues(t, 2, e.is.Fetches())
}

func TestFailedFetchKeepsKeys(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tok := issuertest.Sign(t, e.rsa, e.is.Claims("alice", e.clk.Now()))
	_, err := e.v.Verify(ctx, tok)
	require.NoError(t, err)

	e.is.Srv.Close()
	e.clk.Advance(federation.DefaultMaxKeyAge)
	_, err = e.v.Verify(ctx, issuertest.Sign(t, e.rsa, e.is.Claims("alice", e.clk.Now())))
	require.NoError(t, err, "an unreachable JWKS keeps the keys there were")
}

func TestJWKSRefusals(t *testing.T) {
	cases := []struct {
		name string
		h    http.HandlerFunc
	}{
		{name: "non-200", h: func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "no", http.StatusInternalServerError) }},
		{name: "not JSON", h: func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("<html>")) }},
		{name: "too large", h: func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(`{"keys":[],"pad":"` + strings.Repeat("a", federation.MaxJWKSBytes) + `"}`))
		}},
		{name: "redirect", h: func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/elsewhere", http.StatusFound) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.h)
			defer srv.Close()
			k := issuertest.NewECKey(t, "ec-1")
			clk := newClock()
			v := federation.New(federation.Options{Client: srv.Client(), Now: clk.Now})
			v.SetConfig(&federation.Config{Issuer: "i", Audience: "a", JWKSURL: srv.URL})
			tok := issuertest.Sign(t, k, jwt.Claims{Issuer: "i", Audience: jwt.Audience{"a"}, Subject: "alice", Expiry: jwt.NewNumericDate(clk.Now().Add(time.Hour))})
			_, err := v.Verify(context.Background(), tok)
			require.ErrorContains(t, err, "unknown kid")
		})
	}
}

func TestParseJWKSSkipsUnusableKeys(t *testing.T) {
	rsaKey := issuertest.NewRSAKey(t, "rsa-1")
	ecKey := issuertest.NewECKey(t, "ec-1")
	priv, err := json.Marshal(jose.JSONWebKey{Key: ecKey.Priv, KeyID: "private"})
	require.NoError(t, err)
	sym, err := json.Marshal(jose.JSONWebKey{Key: []byte("0123456789abcdef0123456789abcdef"), KeyID: "hmac"})
	require.NoError(t, err)
	pub, err := json.Marshal(rsaKey.Public())
	require.NoError(t, err)
	enc := ecKey.Public()
	enc.Use = "enc"
	encB, err := json.Marshal(enc)
	require.NoError(t, err)
	noKid := rsaKey.Public()
	noKid.KeyID = ""
	noKidB, err := json.Marshal(noKid)
	require.NoError(t, err)
	doc := fmt.Sprintf(`{"keys":[%s,%s,%s,%s,%s,{"kty":"weird","kid":"w"}]}`, priv, sym, pub, encB, noKidB)
	keys, err := federation.ParseJWKS([]byte(doc))
	require.NoError(t, err)
	require.Len(t, keys, 1)
	require.Equal(t, "rsa-1", keys[0].KeyID)

	for _, bad := range []string{``, `null`, `[]`, `{}`, `{"keys":{}}`} {
		_, err := federation.ParseJWKS([]byte(bad))
		require.Error(t, err, bad)
	}
	many := `{"keys":[` + strings.Repeat(string(pub)+",", 64) + string(pub) + `]}`
	_, err = federation.ParseJWKS([]byte(many))
	require.ErrorContains(t, err, "more than")
}

func TestConfigValidate(t *testing.T) {
	good := federation.Config{Issuer: "https://p/", Audience: "team", JWKSURL: "https://p/jwks"}
	require.NoError(t, good.Validate())
	http := good
	http.JWKSURL = "http://127.0.0.1:8080/jwks"
	require.NoError(t, http.Validate())
	for name, c := range map[string]federation.Config{
		"no issuer":      {Audience: "a", JWKSURL: "https://p/jwks"},
		"no audience":    {Issuer: "i", JWKSURL: "https://p/jwks"},
		"no jwks":        {Issuer: "i", Audience: "a"},
		"ftp":            {Issuer: "i", Audience: "a", JWKSURL: "ftp://p/jwks"},
		"relative":       {Issuer: "i", Audience: "a", JWKSURL: "/jwks"},
		"no host":        {Issuer: "i", Audience: "a", JWKSURL: "https:///jwks"},
		"credentials":    {Issuer: "i", Audience: "a", JWKSURL: "https://u:p@p/jwks"},
		"control":        {Issuer: "i\n", Audience: "a", JWKSURL: "https://p/jwks"},
		"blank":          {Issuer: " ", Audience: "a", JWKSURL: "https://p/jwks"},
		"long":           {Issuer: strings.Repeat("i", 3000), Audience: "a", JWKSURL: "https://p/jwks"},
		"file":           {Issuer: "i", Audience: "a", JWKSURL: "file:///etc/passwd"},
		"fragment":       {Issuer: "i", Audience: "a", JWKSURL: "https://p/jwks#x"},
		"javascript url": {Issuer: "i", Audience: "a", JWKSURL: "javascript:alert(1)"},
	} {
		require.Error(t, c.Validate(), name)
	}
}
